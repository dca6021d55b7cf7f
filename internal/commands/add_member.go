package commands

import (
	"context"
	"errors"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// AddMember puts a user into a group: a command on the group. A user already in the group
// records nothing.
type AddMember struct {
	Group    string
	Username string
}

// AddMemberHandler decides AddMember.
type AddMemberHandler struct{ deps Deps }

func NewAddMemberHandler(d Deps) AddMemberHandler { return AddMemberHandler{deps: d} }

// Handle returns the group's version after the command.
func (h AddMemberHandler) Handle(ctx context.Context, t Tenant, cmd AddMember, m Meta) (int64, error) {
	var version int64
	err := retry(ctx, func() error {
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
		u, err := loadLiveUser(ctx, h.deps.Store, t, cmd.Username)
		if err != nil {
			return err
		}
		current, err := h.deps.Store.Memberships(ctx, t, g.State.Key, []string{u.State.Username})
		if err != nil {
			return err
		}
		// A membership item of an earlier incarnation of the name is not this user's.
		if current[u.State.Username] == u.State.ID {
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
		payload := &events.GroupMemberAdded{Group: next, Username: u.State.Username, UserID: u.State.ID, MembershipRev: rev + 1}
		c := Change{
			Event: h.deps.envelope(m, events.KindGroup, next.Key, next.Version, now,
				map[string]events.Change{"member": {Old: nil, New: u.State.Username}}, payload),
			ExpectedVersion:       g.State.Version,
			Group:                 &GroupAggregate{Exists: true, State: next},
			AddMember:             &Membership{GroupKey: next.Key, Username: u.State.Username, UserID: u.State.ID},
			ExpectedMembershipRev: &rev,
			DeleteCounts:          counts,
			Idempotency:           m.Idempotency,
			Actor:                 m.Actor,
		}
		version = next.Version
		return h.deps.Store.Append(ctx, t, c)
	})
	if errors.Is(err, ErrUserGone) {
		return 0, apperr.NotFound("user")
	}
	return version, err
}
