package commands

import (
	"context"

	"github.com/ssodir/ssodir/internal/events"
)

// DeleteGroup deletes a group with its memberships and frees its name.
type DeleteGroup struct{ Name string }

// DeleteGroupHandler decides DeleteGroup.
type DeleteGroupHandler struct{ deps Deps }

func NewDeleteGroupHandler(d Deps) DeleteGroupHandler { return DeleteGroupHandler{deps: d} }

// Handle returns the tombstone's version.
func (h DeleteGroupHandler) Handle(ctx context.Context, t Tenant, cmd DeleteGroup, m Meta) (int64, error) {
	var (
		tomb     events.Group
		leftover []Membership
	)
	err := retry(ctx, func() error {
		agg, err := loadLiveGroup(ctx, h.deps, t, cmd.Name)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, agg.State.Version); err != nil {
			return err
		}
		// Members are read after the version: a concurrent join bumps the version, so the
		// delete's condition fails and it is decided again with the new member.
		ms, err := h.deps.Store.GroupMembers(ctx, t, agg.State.Key)
		if err != nil {
			return err
		}
		now := h.deps.now()
		old := agg.State
		tomb = events.Group{
			Key: old.Key, Name: old.Name, Version: old.Version + 1, CreatedAt: old.CreatedAt, UpdatedAt: now,
			Deleted: true, LastDeletedVersion: old.Version + 1,
		}
		inTx := min(len(ms), h.deps.Store.MaxMembersPerChange())
		leftover = ms[inTx:]
		c := Change{
			DeleteLookups: GroupLookups(old),
			Event: h.deps.envelope(m, events.KindGroup, old.Key, tomb.Version, now, groupChanges(old, events.Group{}),
				&events.GroupDeleted{Group: tomb, PreviousID: old.ID}),
			ExpectedVersion: old.Version,
			Group:           &GroupAggregate{Exists: true, State: tomb, CleanupPending: len(leftover) > 0},
			RemoveMembers:   ms[:inTx],
			// A member's rename moving its membership after the members were read makes
			// the delete decide again, so that it removes the moved one.
			ExpectedMemberMoves: &agg.MemberMoves,
			Idempotency:         m.Idempotency,
			Actor:               m.Actor,
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
		if err := h.deps.Store.RemoveMembersAfter(ctx, t, Cleanup{Kind: events.KindGroup, Key: tomb.Key, Version: tomb.Version, Members: leftover}); err != nil {
			h.deps.cleanupFailed(t, events.KindGroup, tomb.Key, tomb.Version, len(leftover), err)
		}
	}
	return tomb.Version, nil
}
