package commands

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

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

// MaxRenameMemberships is how many memberships a rename moves: its record lists every
// one (the projector, the Keycloak sync and a replay move them by it), and a DynamoDB
// item holds 400 KB; the record's payload is also held to maxUserRenameRecord. A user in
// more groups cannot be renamed (400).
var MaxRenameMemberships = 1000

// maxUserRenameRecord bounds the encoded payload of a user rename's record: with the
// record's other attributes it stays well below DynamoDB's 400 KB item limit. 1,000
// memberships take about 250 KB with group names of 20 characters.
var maxUserRenameRecord = 320_000

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
	var (
		result  events.User
		payload *events.UserRenamed
		lease   *MembersLease
		marked  string
	)
	// The renamer's mark on the old name (MarkRename): every command naming the person
	// waits for it, so that what the rename reads stays true until it is recorded.
	owner := h.deps.NewID()
	err := retry(ctx, func() error {
		payload, lease = nil, nil
		agg, err := loadLiveUserAs(ctx, h.deps, t, cmd.Username, owner)
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
		now := h.deps.Now()
		ok, err := h.deps.Store.MarkRename(ctx, t, old.Username, old.Version, MembersLease{Version: old.Version, Owner: owner, Until: now.Add(membersLease)}, now)
		if err != nil {
			return err
		}
		if !ok {
			return ErrVersionConflict
		}
		marked = old.Username
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
		// The name's memberships may still be moving away from it (an earlier rename).
		if waited, err := h.deps.settleUser(ctx, t, target, ""); err != nil || waited {
			return cmp.Or(err, ErrVersionConflict)
		}
		if target.CleanupPending {
			if err := finishUserCleanup(ctx, h.deps.Store, t, target); err != nil {
				return err
			}
		}
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
		now = h.deps.now()
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
		payload = &events.UserRenamed{User: next, PreviousUsername: old.Username, PreviousVersion: old.Version,
			PreviousDeletedMembershipRev: tomb.DeletedMembershipRev, Memberships: moved}
		if data, err := events.Encode(payload); err != nil {
			return err
		} else if len(data) > maxUserRenameRecord {
			return tooManyGroupsToRename(len(moved))
		}
		user := &UserAggregate{Exists: true, State: next, PasswordCiphertext: agg.PasswordCiphertext}
		if len(moved) > 0 {
			lease = &MembersLease{Version: next.Version, Owner: owner, Until: h.deps.Now().Add(membersLease)}
			user.Pending = lease
		}
		changes := map[string]events.Change{"username": {Old: old.Username, New: next.Username}}
		r := UserRename{
			Change: Change{
				Event:           h.deps.envelope(m, events.KindUser, next.Username, next.Version, now, changes, payload),
				ExpectedVersion: target.State.Version,
				User:            user,
				PutLookups:      UserLookups(next),
				Idempotency:     m.Idempotency,
				Actor:           m.Actor,
			},
			From: old.Username, FromVersion: old.Version, Mark: owner, Tombstone: tomb,
			FromMembershipRev: fromRev, ToMembershipRev: toRev,
			Email: old.Email, Memberships: moved, UserID: old.ID,
		}
		result = next
		return h.deps.Store.AppendRename(ctx, t, r)
	})
	if err != nil {
		if marked != "" {
			// Nothing recorded: the name is given back at once rather than when the
			// mark's lease runs out.
			if err := h.deps.Store.ClearRenameMark(context.WithoutCancel(ctx), t, marked, owner); err != nil {
				h.deps.log().Warn("a rename's mark could not be cleared; it is cleared when its lease runs out", zap.Error(err))
			}
		}
		return events.User{}, err
	}
	if lease != nil {
		// The rename is recorded, so it is answered as done whatever happens now: what
		// this cannot move, the next command on either name moves (settleUser).
		if err := h.deps.writeUserMove(ctx, t, *lease, payload); err != nil {
			h.deps.userMoveFailed(t, payload.User.ID, payload.User.Version, err)
		}
	}
	return result, nil
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
		return nil, 0, tooManyGroupsToRename(len(out))
	}
	return out, rev, nil
}

// tooManyGroupsToRename is the 400 of a user in more groups than one rename's record
// can list.
func tooManyGroupsToRename(n int) error {
	return apperr.InvalidField("username", fmt.Sprintf("the user is in %d groups; a rename moves at most %d "+
		"(fewer with long group names: its record lists them in at most %d KB)", n, MaxRenameMemberships, maxUserRenameRecord/1000))
}
