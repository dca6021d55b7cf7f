package commands

import (
	"context"
	"errors"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// AddMember puts a user into a group: a command on the group. A user already in the group
// records nothing, unless Expiry moves the membership's expiry (group.member_expiry_set).
type AddMember struct {
	Group    string
	Username string
	// Expiry is the request's expires_at, when it gave one: nil leaves the expiry as it is.
	Expiry *ExpiryChange
}

// ExpiryChange is an expires_at a request gave: At sets it, nil At clears it.
type ExpiryChange struct{ At *time.Time }

// checkExpiry is the expiry truncated to the millisecond the store keeps, or a
// validation failure when it is not in the future.
func checkExpiry(field string, e *ExpiryChange, now time.Time) (*time.Time, error) {
	if e == nil || e.At == nil {
		return nil, nil
	}
	at := e.At.UTC().Truncate(time.Millisecond)
	if !at.After(now) {
		return nil, apperr.InvalidField(field, "must be an instant in the future")
	}
	return &at, nil
}

func sameExpiry(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// AddMemberHandler decides AddMember.
type AddMemberHandler struct{ deps Deps }

func NewAddMemberHandler(d Deps) AddMemberHandler { return AddMemberHandler{deps: d} }

// Handle returns the group's version after the command.
func (h AddMemberHandler) Handle(ctx context.Context, t Tenant, cmd AddMember, m Meta) (int64, error) {
	expiresAt, err := checkExpiry("expires_at", cmd.Expiry, h.deps.now())
	if err != nil {
		return 0, err
	}
	var version int64
	err = retryInTurn(ctx, t, cmd.Group, func() error {
		g, err := loadLiveGroup(ctx, h.deps, t, cmd.Group)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, g.State.Version); err != nil {
			return err
		}
		username, ok := identity.NormalizeUsername(cmd.Username)
		if !ok {
			return apperr.NotFound("user")
		}
		counts, err := h.deps.lateWriterCounts(ctx, t, []string{username})
		if err != nil {
			return err
		}
		u, err := loadLiveUser(ctx, h.deps, t, cmd.Username)
		if err != nil {
			return err
		}
		current, err := h.deps.Store.Memberships(ctx, t, g.State.Key, []string{u.State.Username})
		if err != nil {
			return err
		}
		// A membership item of an earlier incarnation of the name is not this user's.
		if current[u.State.Username] == u.State.ID {
			if cmd.Expiry != nil {
				v, done, err := h.setExpiry(ctx, t, g.State, u.State, expiresAt, m)
				if done || err != nil {
					version = v
					return err
				}
			}
			version = g.State.Version
			return h.deps.recordNoop(ctx, t, m, events.KindGroup, g.State.Key, g.State.Version)
		}
		rev, _, err := h.deps.Store.UserMemberships(ctx, t, u.State.Username)
		if err != nil {
			return err
		}
		now := h.deps.now()
		next := g.State
		next.Version, next.UpdatedAt = g.State.Version+1, now
		payload := &events.GroupMemberAdded{Group: next, Username: u.State.Username, UserID: u.State.ID, MembershipRev: rev + 1, ExpiresAt: expiresAt}
		changes := map[string]events.Change{"member": {Old: nil, New: u.State.Username}}
		c := Change{
			ExpectedVersion:       g.State.Version,
			Group:                 &GroupAggregate{Exists: true, State: next},
			AddMember:             &Membership{GroupKey: next.Key, Username: u.State.Username, UserID: u.State.ID, ExpiresAt: expiresAt},
			ExpectedMembershipRev: &rev,
			DeleteCounts:          counts,
			Idempotency:           m.Idempotency,
			Actor:                 m.Actor,
		}
		if expiresAt != nil {
			changes["expires_at"] = events.Change{Old: nil, New: *expiresAt}
			c.Due = &ExpiryDue{GroupID: next.ID, UserID: u.State.ID, At: *expiresAt}
		}
		c.Event = h.deps.envelope(m, events.KindGroup, next.Key, next.Version, now, changes, payload)
		version = next.Version
		return h.deps.Store.Append(ctx, t, c)
	})
	if errors.Is(err, ErrUserGone) {
		return 0, apperr.NotFound("user")
	}
	return version, err
}

// setExpiry records a change of a member's expiry (group.member_expiry_set); done is
// false when the expiry is already at. The change conditions on the group's version
// and on the membership item still being the user's, so a removal or another change
// in between makes the command decide again.
func (h AddMemberHandler) setExpiry(ctx context.Context, t Tenant, g events.Group, u events.User, at *time.Time, m Meta) (int64, bool, error) {
	states, err := h.deps.Store.MemberStates(ctx, t, u.Username, []string{g.Key})
	if err != nil {
		return 0, false, err
	}
	st, ok := states[g.Key]
	if !ok || st.UserID != u.ID {
		// Read as a member a moment ago: a pending members change that added it has not
		// written its item yet, or it changed since; decide again.
		return 0, false, ErrVersionConflict
	}
	if sameExpiry(st.ExpiresAt, at) {
		return 0, false, nil
	}
	now := h.deps.now()
	next := g
	next.Version, next.UpdatedAt = g.Version+1, now
	payload := &events.GroupMemberExpirySet{Group: next, Username: u.Username, UserID: u.ID,
		MembershipRev: st.MembershipRev, AddedAt: st.AddedAt, ExpiresAt: at, Previous: st.ExpiresAt}
	var old, new any
	if st.ExpiresAt != nil {
		old = *st.ExpiresAt
	}
	if at != nil {
		new = *at
	}
	c := Change{
		Event: h.deps.envelope(m, events.KindGroup, next.Key, next.Version, now,
			map[string]events.Change{"member": {Old: u.Username, New: u.Username}, "expires_at": {Old: old, New: new}}, payload),
		ExpectedVersion: g.Version,
		Group:           &GroupAggregate{Exists: true, State: next},
		SetExpiry:       &MemberExpiry{GroupKey: next.Key, Username: u.Username, UserID: u.ID, ExpiresAt: at},
		Idempotency:     m.Idempotency,
		Actor:           m.Actor,
	}
	if at != nil {
		c.Due = &ExpiryDue{GroupID: next.ID, UserID: u.ID, At: *at}
	}
	return next.Version, true, h.deps.Store.Append(ctx, t, c)
}
