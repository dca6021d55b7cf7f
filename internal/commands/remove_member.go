package commands

import (
	"cmp"
	"context"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// RemoveMember takes a user out of a group: a command on the group. A user not in the
// group records nothing.
type RemoveMember struct {
	Group    string
	Username string
	// IfExpiresAt, when set, removes the member only while the membership's expiry is
	// still this instant (the expiry scheduler's removal, internal/expiry): a renewal
	// or a removal first wins, and the command then records nothing.
	IfExpiresAt *time.Time
}

// RemoveMemberHandler decides RemoveMember.
type RemoveMemberHandler struct{ deps Deps }

func NewRemoveMemberHandler(d Deps) RemoveMemberHandler { return RemoveMemberHandler{deps: d} }

// Handle returns the group's version after the command.
func (h RemoveMemberHandler) Handle(ctx context.Context, t Tenant, cmd RemoveMember, m Meta) (int64, error) {
	username, ok := identity.NormalizeUsername(cmd.Username)
	if !ok {
		return 0, apperr.NotFound("user")
	}
	var version int64
	err := retryInTurn(ctx, t, cmd.Group, func() error {
		g, err := loadLiveGroup(ctx, h.deps, t, cmd.Group)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, g.State.Version); err != nil {
			return err
		}
		// An unknown or deleted user is a 404, also when a membership of it is left over
		// from a delete whose clean-up is pending.
		counts, err := h.deps.lateWriterCounts(ctx, t, []string{username})
		if err != nil {
			return err
		}
		u, err := h.deps.Store.LoadUser(ctx, t, username)
		if err != nil {
			return err
		}
		if !u.Live() {
			return apperr.NotFound("user")
		}
		// A rename of the user being made moves this membership: it goes first.
		if waited, err := h.deps.settleUser(ctx, t, u, ""); err != nil || waited {
			return cmp.Or(err, ErrVersionConflict)
		}
		current, err := h.deps.Store.Memberships(ctx, t, g.State.Key, []string{username})
		if err != nil {
			return err
		}
		if current[username] != u.State.ID {
			// Nothing to remove, if the group and the user are still those read: a rename
			// of either moves the membership in the same transaction that ends the name,
			// so a membership found gone by a rename in between is no answer for it.
			if err := h.unchanged(ctx, t, g.State, u.State); err != nil {
				return err
			}
			version = g.State.Version
			return h.deps.recordNoop(ctx, t, m, events.KindGroup, g.State.Key, g.State.Version)
		}
		if cmd.IfExpiresAt != nil {
			states, err := h.deps.Store.MemberStates(ctx, t, username, []string{g.State.Key})
			if err != nil {
				return err
			}
			st, ok := states[g.State.Key]
			if !ok {
				return ErrVersionConflict // a members change's item not written yet
			}
			if st.UserID != u.State.ID || !sameExpiry(st.ExpiresAt, cmd.IfExpiresAt) {
				version = g.State.Version
				return nil // renewed, or its expiry cleared, since
			}
		}
		now := h.deps.now()
		next := g.State
		next.Version, next.UpdatedAt = g.State.Version+1, now
		c := Change{
			Event: h.deps.envelope(m, events.KindGroup, next.Key, next.Version, now,
				map[string]events.Change{"member": {Old: username, New: nil}},
				&events.GroupMemberRemoved{Group: next, Username: username, UserID: u.State.ID}),
			ExpectedVersion: g.State.Version,
			Group:           &GroupAggregate{Exists: true, State: next},
			RemoveMembers:   []Membership{{GroupKey: next.Key, Username: username, UserID: u.State.ID}},
			RequireMembers:  true,
			// The transaction checks the expiry again, beside the group's version.
			RequireExpiresAt: cmd.IfExpiresAt,
			DeleteCounts:     counts,
			Idempotency:      m.Idempotency,
			Actor:            m.Actor,
		}
		version = next.Version
		return h.deps.Store.Append(ctx, t, c)
	})
	return version, err
}

// unchanged reports ErrVersionConflict when the group or the user moved on from the
// versions g and u since they were read.
func (h RemoveMemberHandler) unchanged(ctx context.Context, t Tenant, g events.Group, u events.User) error {
	ga, err := h.deps.Store.LoadGroup(ctx, t, g.Key)
	if err != nil {
		return err
	}
	ua, err := h.deps.Store.LoadUser(ctx, t, u.Username)
	if err != nil {
		return err
	}
	if ga.State.Version != g.Version || ua.State.Version != u.Version {
		return ErrVersionConflict
	}
	return nil
}
