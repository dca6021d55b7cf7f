package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
)

// RenameUser gives a user a new username: the same person (same id), the next version;
// the old name is free at once, and the memberships move to the new one.
type RenameUser struct {
	Username    string
	NewUsername string
}

// RenameUserHandler decides RenameUser.
type RenameUserHandler struct{ deps Deps }

func NewRenameUserHandler(d Deps) RenameUserHandler { return RenameUserHandler{deps: d} }

// MaxRenameMemberships is how many memberships a rename moves in its one transaction
// (five items each beside ten fixed ones); a user in more groups cannot be renamed yet.
const MaxRenameMemberships = 18

// Validate normalises the new username and reports it if it breaks the rule.
func (c *RenameUser) Validate() error {
	var p problems
	c.NewUsername = checkUsername(&p, "username", c.NewUsername)
	return p.Err(invalidRequest)
}

// Handle returns the user under its new name.
func (h RenameUserHandler) Handle(ctx context.Context, t Tenant, cmd RenameUser, m Meta) (events.User, error) {
	if err := cmd.Validate(); err != nil {
		return events.User{}, err
	}
	var result events.User
	err := retry(ctx, func() error {
		agg, err := loadLiveUser(ctx, h.deps.Store, t, cmd.Username)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, agg.State.Version); err != nil {
			return err
		}
		old := agg.State
		if old.Username == cmd.NewUsername {
			result = old
			return h.deps.recordNoop(ctx, t, m, events.KindUser, old.Username, old.Version)
		}
		target, err := h.deps.Store.LoadUser(ctx, t, cmd.NewUsername)
		if err != nil {
			return err
		}
		if target.Live() {
			return apperr.Conflict(apperr.CodeUsernameTaken, "username already in use")
		}
		if target.ErasureID != "" {
			return apperr.Unavailable(errors.New("the username is being erased"), time.Minute)
		}
		if target.CleanupPending {
			if err := finishUserCleanup(ctx, h.deps.Store, t, target); err != nil {
				return err
			}
		}
		// The revision is the one read with the group pointers: a group rename in between
		// moves a pointer and takes the revision, so the rename's condition on it fails.
		moved, fromRev, err := h.memberships(ctx, t, old)
		if err != nil {
			return err
		}
		toRev, _, err := h.deps.Store.UserMemberships(ctx, t, cmd.NewUsername)
		if err != nil {
			return err
		}
		for i := range moved {
			moved[i].MembershipRev = toRev + 1
		}
		now := h.deps.now()
		next := old
		next.Username = cmd.NewUsername
		// Versions are never reused under a name: a name that held a deleted user goes on
		// from that user's tombstone (docs/storage.md, "Renames").
		next.Version = max(old.Version, target.State.Version) + 1
		next.UpdatedAt, next.NamedAt = now, now
		next.DeletedMembershipRev = target.State.DeletedMembershipRev
		next.FormerNames = append(slices.Clone(old.FormerNames), events.FormerName{Username: old.Username, From: old.Named(), Until: now})
		tomb := events.User{
			Username: old.Username, Version: old.Version + 1, CreatedAt: old.CreatedAt, UpdatedAt: now,
			Deleted: true, DeletedMembershipRev: fromRev + 1,
		}
		payload := &events.UserRenamed{User: next, PreviousUsername: old.Username, PreviousVersion: old.Version,
			PreviousDeletedMembershipRev: tomb.DeletedMembershipRev, Memberships: moved}
		changes := map[string]events.Change{"username": {Old: old.Username, New: next.Username}}
		r := UserRename{
			Change: Change{
				Event:           h.deps.envelope(m, events.KindUser, next.Username, next.Version, now, changes, payload),
				ExpectedVersion: target.State.Version,
				User:            &UserAggregate{Exists: true, State: next, PasswordCiphertext: agg.PasswordCiphertext},
				PutLookups:      UserLookups(next),
				Idempotency:     m.Idempotency,
				Actor:           m.Actor,
			},
			From: old.Username, FromVersion: old.Version, Tombstone: tomb,
			FromMembershipRev: fromRev, ToMembershipRev: toRev,
			Email: old.Email, Memberships: moved, UserID: old.ID,
		}
		result = next
		return h.deps.Store.AppendRename(ctx, t, r)
	})
	return result, err
}

// memberships are the user's memberships as the rename moves them, each with its group's
// current version, and the user's membership revision read before them. A group with a members change still being written is waited for
// first, so that the change's items never land on a name that has moved.
func (h RenameUserHandler) memberships(ctx context.Context, t Tenant, u events.User) ([]events.RenamedMembership, int64, error) {
	rev, groups, err := h.deps.Store.UserMemberships(ctx, t, u.Username)
	if err != nil {
		return nil, 0, err
	}
	items, err := h.deps.Store.MemberStates(ctx, t, u.Username, groups)
	if err != nil {
		return nil, 0, err
	}
	var out []events.RenamedMembership
	for _, key := range slices.Sorted(maps.Keys(items)) {
		it := items[key]
		if it.UserID != u.ID {
			continue // left by an earlier incarnation of the name
		}
		g, err := loadLiveGroup(ctx, h.deps, t, key)
		if apperr.KindOf(err) == apperr.KindNotFound {
			// A group renamed away from the key may still be moving this membership:
			// once it has moved, the rename decides again with it under the new key.
			if waited, err := finishMove(ctx, h.deps, t, g); err != nil || waited {
				return nil, 0, cmp.Or(err, ErrVersionConflict)
			}
			continue // its delete's clean-up removes it
		}
		if err != nil {
			return nil, 0, err
		}
		if it.GroupVersion <= g.State.LastDeletedVersion {
			continue
		}
		out = append(out, events.RenamedMembership{GroupKey: g.State.Key, GroupName: g.State.Name, GroupVersion: g.State.Version,
			AddedVersion: it.GroupVersion, AddedAt: it.AddedAt, ExpiresAt: it.ExpiresAt})
	}
	if len(out) > MaxRenameMemberships {
		return nil, 0, apperr.InvalidField("username",
			fmt.Sprintf("the user is in %d groups; a rename moves at most %d", len(out), MaxRenameMemberships))
	}
	return out, rev, nil
}
