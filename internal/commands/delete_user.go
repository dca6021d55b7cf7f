package commands

import (
	"context"

	"github.com/ssodir/ssodir/internal/events"
)

// DeleteUser deletes a user with its memberships and frees its username and email.
type DeleteUser struct{ Username string }

// DeleteUserHandler decides DeleteUser.
type DeleteUserHandler struct{ deps Deps }

func NewDeleteUserHandler(d Deps) DeleteUserHandler { return DeleteUserHandler{deps: d} }

// Handle returns the tombstone's version.
func (h DeleteUserHandler) Handle(ctx context.Context, t Tenant, cmd DeleteUser, m Meta) (int64, error) {
	var (
		tomb     events.User
		leftover []Membership
	)
	err := retry(ctx, func() error {
		agg, err := loadLiveUser(ctx, h.deps.Store, t, cmd.Username)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, agg.State.Version); err != nil {
			return err
		}
		rev, groups, err := h.deps.Store.UserMemberships(ctx, t, agg.State.Username)
		if err != nil {
			return err
		}
		now := h.deps.now()
		old := agg.State
		tomb = events.User{
			Username: old.Username, Version: old.Version + 1, CreatedAt: old.CreatedAt, UpdatedAt: now,
			Deleted: true, DeletedMembershipRev: rev,
		}
		ms := make([]Membership, 0, len(groups))
		for _, g := range groups {
			ms = append(ms, Membership{GroupKey: g, Username: old.Username, UserID: old.ID})
		}
		// Memberships beyond what one transaction holds are removed right after it; the
		// tombstone's cleanup mark makes a later re-create finish the job if this process
		// dies in between. Readers see them go with the event, which lists every group.
		inTx := min(len(ms), h.deps.Store.MaxMembersPerChange())
		leftover = ms[inTx:]
		c := Change{
			Event: h.deps.envelope(m, events.KindUser, old.Username, tomb.Version, now, userChanges(old, tomb),
				&events.UserDeleted{User: tomb, PreviousID: old.ID, Groups: groups}),
			ExpectedVersion:       old.Version,
			User:                  &UserAggregate{Exists: true, State: tomb, CleanupPending: len(leftover) > 0},
			ReleaseEmail:          old.Email,
			RemoveMembers:         ms[:inTx],
			ExpectedMembershipRev: &rev,
			Idempotency:           m.Idempotency,
			Actor:                 m.Actor,
		}
		return h.deps.Store.Append(ctx, t, c)
	})
	if err != nil {
		return 0, err
	}
	if len(leftover) > 0 {
		// The delete is recorded, so it is answered as done whatever happens now: an error
		// here would tell the client that nothing was written. Memberships this clean-up
		// cannot remove stay under the tombstone's cleanup mark, and the next create of the
		// name removes them first, as after a crash.
		if err := h.deps.Store.RemoveMembersAfter(ctx, t, Cleanup{Kind: events.KindUser, Key: tomb.Username, Version: tomb.Version,
			MembershipRev: tomb.DeletedMembershipRev, Members: leftover}); err != nil {
			h.deps.cleanupFailed(t, events.KindUser, tomb.Username, tomb.Version, len(leftover), err)
		}
	}
	return tomb.Version, nil
}
