package commands

import (
	"context"
	"errors"
	"math"

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
		states, err := h.deps.Store.GroupMemberStates(ctx, t, agg.State.Key, math.MaxInt)
		if err != nil {
			return err
		}
		ms := make([]Membership, len(states))
		for i, gm := range states {
			ms[i] = Membership{GroupKey: agg.State.Key, Username: gm.Username, UserID: gm.UserID}
		}
		// The record lists the members whose membership the delete ends, as a rename
		// does (liveMembers: never a person deleted or erased before it commits), so that
		// each member's own feed shows it whatever the order the projector sees it in.
		live, counts, err := liveMembers(ctx, h.deps, t, states)
		if err != nil {
			return err
		}
		now := h.deps.now()
		old := agg.State
		tomb = events.Group{
			Key: old.Key, Name: old.Name, Version: old.Version + 1, CreatedAt: old.CreatedAt, UpdatedAt: now,
			Deleted: true, LastDeletedVersion: old.Version + 1,
		}
		payload, parts, err := deletedGroup(tomb, old.ID, live)
		if err != nil {
			return err
		}
		// Each part of the record and each count checked takes an item of the transaction.
		room := max(0, h.deps.Store.MaxMembersPerChange()-(parts+len(counts)+1)/2)
		inTx := min(len(ms), room)
		leftover = ms[inTx:]
		c := Change{
			DeleteLookups:   GroupLookups(old),
			Event:           h.deps.envelope(m, events.KindGroup, old.Key, tomb.Version, now, groupChanges(old, events.Group{}), payload),
			ExpectedVersion: old.Version,
			Group:           &GroupAggregate{Exists: true, State: tomb, CleanupPending: len(leftover) > 0},
			RemoveMembers:   ms[:inTx],
			// A member's rename moving its membership after the members were read makes
			// the delete decide again, so that it removes the moved one.
			ExpectedMemberMoves: &agg.MemberMoves,
			DeleteCounts:        counts,
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

// deletedGroup is the payload of a group delete that ends the memberships of live, and how
// many parts its record takes (events.SplitMembers). Members past what one record holds
// (events.MemberListBytes: some 20,000 with long usernames) are left out, and the record
// says so (MoreMembers): their feeds do not show the delete.
func deletedGroup(tomb events.Group, previousID string, live []GroupMember) (*events.GroupDeleted, int, error) {
	p := &events.GroupDeleted{Group: tomb, PreviousID: previousID}
	for _, gm := range live {
		p.Members = append(p.Members, events.Member{Username: gm.Username, UserID: gm.UserID, MembershipRev: gm.MembershipRev})
	}
	for {
		_, parts, err := events.SplitMembers(p)
		if !errors.Is(err, events.ErrMemberListTooLong) {
			return p, len(parts), err
		}
		// A tenth fewer each time: a few rounds at most.
		p.Members, p.MoreMembers = p.Members[:len(p.Members)*9/10], true
	}
}
