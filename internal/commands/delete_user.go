package commands

import (
	"cmp"
	"context"
	"strings"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// DeleteUser deletes a user with its memberships and frees its username and email.
type DeleteUser struct{ Username string }

// DeleteUserHandler decides DeleteUser.
type DeleteUserHandler struct{ deps Deps }

func NewDeleteUserHandler(d Deps) DeleteUserHandler { return DeleteUserHandler{deps: d} }

// Handle returns the tombstone's version.
func (h DeleteUserHandler) Handle(ctx context.Context, t Tenant, cmd DeleteUser, m Meta) (int64, error) {
	username, ok := identity.NormalizeUsername(cmd.Username)
	if !ok {
		return 0, apperr.NotFound("user")
	}
	return h.remove(ctx, t, username, m, func(agg UserAggregate) error {
		if !agg.Live() {
			return apperr.NotFound("user")
		}
		return nil
	}, nil)
}

// remove is the one implementation of a user's delete, which an erasure shares: check
// decides whether the aggregate may go; erase, when set, makes the event user.erased and
// writes the erasure's ledger entry with it.
func (h DeleteUserHandler) remove(ctx context.Context, t Tenant, username string, m Meta, check func(UserAggregate) error, erase *EraseUser) (int64, error) {
	var (
		tomb events.User
		old  events.User
	)
	err := retry(ctx, func() error {
		agg, err := h.deps.Store.LoadUser(ctx, t, username)
		if err != nil {
			return err
		}
		// A rename of the user being made, or its memberships still moving to or from
		// the name, goes first: the delete (or erasure) must find them all.
		if waited, err := h.deps.settleUser(ctx, t, agg, ""); err != nil || waited {
			return cmp.Or(err, ErrVersionConflict)
		}
		if err := check(agg); err != nil {
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
		var (
			payload events.Payload = &events.UserDeleted{User: tomb, PreviousID: old.ID, Groups: groups}
			changes                = userChanges(old, tomb)
			erasure *Erasure
			erasing string
		)
		if erase != nil {
			// The record of an erasure names nothing it need not: it is read from the
			// stream only, and erased with the user's partition.
			payload = &events.UserErased{User: tomb, PreviousID: old.ID, Groups: groups, ErasureID: erase.ErasureID,
				AllIncarnations: erase.AllIncarnations}
			changes = nil
			erasing = erase.ErasureID
			erasure = &Erasure{ID: erase.ErasureID, RequestedAt: now, Actor: m.Actor,
				Reason: strings.TrimSpace(erase.Reason), Places: ErasurePlaces, AllIncarnations: erase.AllIncarnations}
			if old.ID != "" {
				erasure.UserIDHashes = []string{identity.ErasedIDHash(old.ID)}
			}
		}
		c := Change{
			DeleteLookups:         UserLookups(old),
			Event:                 h.deps.envelope(m, events.KindUser, old.Username, tomb.Version, now, changes, payload),
			ExpectedVersion:       old.Version,
			User:                  &UserAggregate{Exists: true, State: tomb, CleanupPending: len(ms) > inTx, ErasureID: erasing},
			ReleaseEmail:          old.Email,
			RemoveMembers:         ms[:inTx],
			ExpectedMembershipRev: &rev,
			Idempotency:           m.Idempotency,
			Actor:                 m.Actor,
			Erasure:               erasure,
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
