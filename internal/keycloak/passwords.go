package keycloak

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"strings"
)

// A password is sent to Keycloak once per change. Keycloak keeps no trace of which change
// a password came from, so the Syncer marks the user with two attributes:
//
//   - AttrSsodirPasswordPending = v is written before the reset-password of change v: from
//     then on the password of v may be in Keycloak;
//   - AttrSsodirPasswordVersion = v is written after it succeeded: the password of v (or a
//     later one) is there, and a record at or below v sends nothing.
//
// A crash between the reset and the second write sends the password once more, never
// not at all. Sent again to a realm with a password-history policy, that reset answers 400
// invalidPasswordHistoryMessage: with the pending mark there, that means the earlier reset
// landed, and the change is marked done instead of failing.
const (
	AttrSsodirPasswordVersion = "ssodir_password_version"
	AttrSsodirPasswordPending = "ssodir_password_pending"
)

// passwordAttributes are the marks of the password Keycloak holds; every write of a user
// keeps them as they are (desiredUser), reconciles included.
var passwordAttributes = []string{AttrSsodirPasswordVersion, AttrSsodirPasswordPending}

// PasswordVersion is the directory version of the last password change Keycloak confirmed
// it holds for the user, 0 when none.
func (u User) PasswordVersion() int64 { return attrInt(u.Attributes, AttrSsodirPasswordVersion) }

// passwordPending is the version of the password change that may have been sent, 0 when none.
func (u User) passwordPending() int64 { return attrInt(u.Attributes, AttrSsodirPasswordPending) }

func attrInt(attrs map[string][]string, key string) int64 {
	n, err := strconv.ParseInt(firstValue(attrs, key), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// PasswordChange is a directory password change to send to Keycloak once.
type PasswordChange struct {
	// Version is the directory version of the change: the user's version it made.
	Version int64
	// Open returns the plaintext; it is called only when the password is to be sent, and
	// the caller's buffer is cleared after the call.
	Open func(ctx context.Context) ([]byte, error)
}

// PasswordRecentlyUsed reports whether err is a realm's password-history policy refusing a
// password (the current one, or one of the last few).
func PasswordRecentlyUsed(err error) bool {
	return StatusCode(err) == http.StatusBadRequest && ErrorCode(err) == CodePasswordHistory
}

// UpsertUserPassword is UpsertUser, then the password change pw (nil: none) unless
// Keycloak already holds it or a later one (its ssodir_password_version is at or above
// pw.Version). The password goes even when Keycloak holds a newer state of the user: the
// newer state's record carries no password. It fails with the realm's 400 when its policy
// refuses the password, but not when a password-history policy refuses a password an
// earlier attempt may have sent.
func (s *Syncer) UpsertUserPassword(ctx context.Context, du DirectoryUser, pw *PasswordChange) error {
	if err := checkID("user", du.ID); err != nil {
		return err
	}
	if pw != nil && pw.Version <= 0 {
		return fmt.Errorf("keycloak: password change of user %s: no version", du.ID)
	}
	defer s.c.cfg.Locks.lock(userLock(du.ID))()
	cur, err := s.findUser(ctx, du.ID)
	if errors.Is(err, ErrNotFound) {
		want := desiredUser(du, nil, s.preserve)
		if pw != nil {
			want.Attributes[AttrSsodirPasswordPending] = []string{strconv.FormatInt(pw.Version, 10)}
		}
		id, _, err := s.c.createManagedUser(ctx, want)
		s.c.metrics.operation(string(ActionCreateUser), err)
		if err != nil {
			if errors.Is(err, ErrUsernameRefused) {
				return fmt.Errorf("keycloak: create user %s: %w: %w", du.ID, ErrUsernameRefused, err)
			}
			if errors.Is(err, ErrConflict) {
				return fmt.Errorf("keycloak: create user %s: its username or email is held by another Keycloak user, left untouched: %w", du.ID, err)
			}
			return err
		}
		s.remember(s.users, du.ID, id)
		if pw == nil {
			return nil
		}
		want.ID = id
		return s.sendPassword(ctx, want, pw, false)
	}
	if err != nil {
		return err
	}
	want := *cur
	if cur.SsodirVersion() <= du.Version {
		want = desiredUser(du, cur, s.preserve)
	}
	due := pw != nil && cur.PasswordVersion() < pw.Version
	maySent := due && cur.passwordPending() >= pw.Version
	if due && !maySent {
		want.Attributes = maps.Clone(want.Attributes)
		if want.Attributes == nil {
			want.Attributes = map[string][]string{}
		}
		want.Attributes[AttrSsodirPasswordPending] = []string{strconv.FormatInt(pw.Version, 10)}
	}
	if len(diffUser(*cur, want)) > 0 {
		err = s.c.UpdateUser(ctx, want)
		s.c.metrics.operation(string(ActionUpdateUser), err)
		if err != nil && !strings.EqualFold(cur.Username, want.Username) && errors.Is(err, ErrUsernameReadOnly) {
			// A rename waits, never a second user nor a delete and create again (which would
			// lose the Keycloak user's id, sessions and links): the record fails until the
			// realm allows it, as a dead letter once its retries are spent.
			return fmt.Errorf("keycloak: rename user %s in place: %w (enable Realm settings > General > Edit username, then re-drive): %w",
				du.ID, ErrUsernameReadOnly, err)
		}
		if err != nil && errors.Is(err, ErrUsernameRefused) {
			return fmt.Errorf("keycloak: rename user %s: %w: %w", du.ID, ErrUsernameRefused, err)
		}
		if err != nil {
			return err
		}
	}
	if !due {
		return nil
	}
	return s.sendPassword(ctx, want, pw, maySent)
}

// sendPassword resets u's password to pw's and marks it sent. u is the user as just
// written, carrying pw's pending mark; maySent says an earlier attempt may have sent it.
func (s *Syncer) sendPassword(ctx context.Context, u User, pw *PasswordChange, maySent bool) error {
	plain, err := pw.Open(ctx)
	if err != nil {
		return err
	}
	err = s.c.SetPassword(ctx, u.ID, string(plain))
	clear(plain)
	if errors.Is(err, ErrNotFound) {
		s.forget(s.users, u.SsodirID())
	}
	s.c.metrics.operation(string(ActionSetPassword), err)
	refused := PasswordRecentlyUsed(err)
	switch {
	case refused && maySent:
		// The earlier attempt's reset landed: the password is the current one.
	case refused:
		// Refused on its first sending: the password is one of the user's recent ones, and
		// never went. Take the pending mark back, so that a retry is refused again rather
		// than taken for a resend (best effort: the record fails either way).
		back := u
		back.Attributes = maps.Clone(u.Attributes)
		delete(back.Attributes, AttrSsodirPasswordPending)
		_ = s.c.UpdateUser(ctx, back)
		return err
	case err != nil:
		return err
	}
	u.Attributes = maps.Clone(u.Attributes)
	if u.passwordPending() <= pw.Version {
		delete(u.Attributes, AttrSsodirPasswordPending)
	}
	u.Attributes[AttrSsodirPasswordVersion] = []string{strconv.FormatInt(pw.Version, 10)}
	err = s.c.UpdateUser(ctx, u)
	s.c.metrics.operation(string(ActionUpdateUser), err)
	return err
}
