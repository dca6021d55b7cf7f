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
		tomb events.User
		old  events.User
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
		old = agg.State
		// The delete takes the next membership revision: every membership decided on this
		// incarnation is at or below it, also one a members change decided without taking
		// a revision of its own (ChangeMembersHandler).
		tomb = events.User{
			Username: old.Username, Version: old.Version + 1, CreatedAt: old.CreatedAt, UpdatedAt: now,
			Deleted: true, DeletedMembershipRev: rev + 1,
		}
		ms := make([]Membership, 0, len(groups))
		for _, g := range groups {
			ms = append(ms, Membership{GroupKey: g, Username: old.Username, UserID: old.ID})
		}
		// Memberships beyond what one transaction holds are removed right after it; the
		// tombstone's cleanup mark makes a later re-create finish the job if this process
		// dies in between. Readers see them go with the event, which lists every group.
		inTx := min(len(ms), h.deps.Store.MaxMembersPerChange())
		c := Change{
			DeleteLookups: UserLookups(old),
			Event: h.deps.envelope(m, events.KindUser, old.Username, tomb.Version, now, userChanges(old, tomb),
				&events.UserDeleted{User: tomb, PreviousID: old.ID, Groups: groups}),
			ExpectedVersion:       old.Version,
			User:                  &UserAggregate{Exists: true, State: tomb, CleanupPending: len(ms) > inTx},
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
	// The delete is recorded, so it is answered as done whatever happens now: an error here
	// would tell the client that nothing was written. What is left is the memberships
	// beyond the transaction, and any that a members change decided before the delete
	// wrote after the delete had read the user's groups: both are found by the user's group
	// pointers, which every membership's writer puts first. Memberships this clean-up
	// cannot remove stay under the tombstone's cleanup mark (or are removed by the members
	// change's own check that its users still live), and the next create of the name
	// removes them first, as after a crash.
	_, left, err := h.deps.Store.UserMemberships(ctx, t, tomb.Username)
	if err == nil && len(left) > 0 {
		leftover := make([]Membership, 0, len(left))
		for _, g := range left {
			leftover = append(leftover, Membership{GroupKey: g, Username: tomb.Username, UserID: old.ID})
		}
		err = h.deps.Store.RemoveMembersAfter(ctx, t, Cleanup{Kind: events.KindUser, Key: tomb.Username, Version: tomb.Version,
			MembershipRev: tomb.DeletedMembershipRev, Members: leftover})
	}
	if err != nil {
		h.deps.cleanupFailed(t, events.KindUser, tomb.Username, tomb.Version, len(left), err)
	}
	return tomb.Version, nil
}
