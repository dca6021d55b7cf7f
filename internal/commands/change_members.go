package commands

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// MaxMembersChange is how many usernames one ChangeMembers may name, added and removed
// together (API.md).
const MaxMembersChange = 1000

// countDeletesFrom is how many users a ChangeMembers must add for it to check that they
// still live after writing by the counts of user deletes (read again,
// Store.UserDeleteCounts) rather than by reading each of them again: below it, the reads
// of each cost less.
const countDeletesFrom = 32

// ChangeMembers adds and removes many members of a group in one command: one group
// version for the whole change, or none when it changes nothing; all or nothing.
type ChangeMembers struct {
	Group  string
	Add    []string
	Remove []string
	// Expires are the expiries given for some of Add, by username (Validate normalises
	// them): each applies to the membership the change adds; a user already in the group
	// keeps the expiry it has (PUT of the one member changes it).
	Expires map[string]time.Time
}

// ChangeMembersHandler decides ChangeMembers.
//
// A thousand memberships do not fit into one TransactWriteItems (100 items), so the
// decision and its writes are apart: the transaction holds the group's new `config`
// (marked with the change as pending), its history record (group.members_changed with
// every user added and removed) and the idempotency record; the membership items follow
// right after, written idempotently in batches (pendingMembers). The change is accepted
// whole or not at all when the transaction commits; until its items are written, every
// other command on the group first waits for them (or, when the writer died, writes them
// itself), and the readers of the write model read the pending record beside the items.
type ChangeMembersHandler struct{ deps Deps }

func NewChangeMembersHandler(d Deps) ChangeMembersHandler { return ChangeMembersHandler{deps: d} }

// Validate normalises the usernames (lower-cased, duplicates dropped) and reports every
// invalid one: more than MaxMembersChange in all, a malformed username, or one that is
// both added and removed.
func (c *ChangeMembers) Validate() error {
	var p problems
	if n := len(c.Add) + len(c.Remove); n > MaxMembersChange {
		p.Add("add", fmt.Sprintf("add and remove name %d usernames together; at most %d are allowed in one request", n, MaxMembersChange))
		return p.Err(invalidRequest)
	}
	add := normalizeNames(&p, "add", c.Add)
	remove := normalizeNames(&p, "remove", c.Remove)
	for i, u := range c.Remove {
		if name, ok := identity.NormalizeUsername(u); ok && slices.Contains(add, name) {
			p.Add(fmt.Sprintf("remove[%d]", i), "user "+name+" is also in add")
		}
	}
	if err := p.Err(invalidRequest); err != nil {
		return err
	}
	if len(c.Expires) > 0 {
		expires := make(map[string]time.Time, len(c.Expires))
		for u, at := range c.Expires {
			if name, ok := identity.NormalizeUsername(u); ok {
				expires[name] = at.UTC().Truncate(time.Millisecond)
			}
		}
		c.Expires = expires
	}
	c.Add, c.Remove = add, remove
	return nil
}

// normalizeNames is the lower-cased usernames of list, sorted, without duplicates.
func normalizeNames(p *problems, field string, list []string) []string {
	out := make([]string, 0, len(list))
	for i, u := range list {
		name, ok := identity.NormalizeUsername(u)
		if !ok {
			p.Add(fmt.Sprintf("%s[%d]", field, i), identity.UsernameRule)
			continue
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Handle returns the group after the command.
func (h ChangeMembersHandler) Handle(ctx context.Context, t Tenant, cmd ChangeMembers, m Meta) (events.Group, error) {
	if err := cmd.Validate(); err != nil {
		return events.Group{}, err
	}
	now := h.deps.now()
	for i, name := range cmd.Add {
		if at, ok := cmd.Expires[name]; ok && !at.After(now) {
			return events.Group{}, apperr.InvalidField(fmt.Sprintf("add[%d].expires_at", i), "must be an instant in the future")
		}
	}
	var (
		result  events.Group
		payload *events.GroupMembersChanged
		lease   MembersLease
		deletes DeleteCounts
	)
	err := retryInTurn(ctx, t, cmd.Group, func() error {
		payload, deletes = nil, nil
		g, err := loadLiveGroup(ctx, h.deps, t, cmd.Group)
		if err != nil {
			return err
		}
		if err := checkIfMatch(m, g.State.Version); err != nil {
			return err
		}
		result = g.State
		names := append(slices.Clone(cmd.Add), cmd.Remove...)
		// Read before the users, so that a delete they do not count is one the users show.
		counts, err := h.deps.lateWriterCounts(ctx, t, names)
		if err != nil {
			return err
		}
		if len(cmd.Add) >= countDeletesFrom {
			deletes = counts
		}
		var (
			users   map[string]UserAggregate
			current map[string]string
		)
		reads, rctx := errgroup.WithContext(ctx)
		reads.Go(func() (err error) { users, err = h.deps.Store.LoadUsers(rctx, t, names); return err })
		reads.Go(func() (err error) { current, err = h.deps.Store.Memberships(rctx, t, g.State.Key, names); return err })
		if err := reads.Wait(); err != nil {
			return err
		}
		if err := unknownUsers(cmd, users); err != nil {
			return err
		}
		// A rename of a user being made moves its memberships: it goes first.
		if waited, err := h.deps.settleUsers(ctx, t, users); err != nil || waited {
			return cmp.Or(err, ErrVersionConflict)
		}
		var added, removed []events.Member
		for _, name := range cmd.Add {
			u := users[name].State
			// A membership item of an earlier incarnation of the name is not this user's.
			if current[name] != u.ID {
				m := events.Member{Username: name, UserID: u.ID, MembershipRev: u.DeletedMembershipRev + 1}
				if at, ok := cmd.Expires[name]; ok {
					m.ExpiresAt = &at
				}
				added = append(added, m)
			}
		}
		for _, name := range cmd.Remove {
			if u := users[name].State; current[name] == u.ID {
				removed = append(removed, events.Member{Username: name, UserID: u.ID})
			}
		}
		if len(added) == 0 && len(removed) == 0 {
			return h.deps.recordNoop(ctx, t, m, events.KindGroup, g.State.Key, g.State.Version)
		}
		now := h.deps.now()
		next := g.State
		next.Version, next.UpdatedAt = g.State.Version+1, now
		payload = &events.GroupMembersChanged{Group: next, Added: added, Removed: removed}
		lease = MembersLease{Version: next.Version, Owner: m.CommandID, Until: h.deps.Now().Add(membersLease)}
		c := Change{
			// The activity feed shows each member (projections); the record's own change
			// set only counts them, so that a thousand usernames are not stored twice.
			Event:           h.deps.envelope(m, events.KindGroup, next.Key, next.Version, now, membersCount(added, removed), payload),
			ExpectedVersion: g.State.Version,
			Group:           &GroupAggregate{Exists: true, State: next, Pending: &lease},
			DeleteCounts:    counts,
			Idempotency:     m.Idempotency,
			Actor:           m.Actor,
		}
		result = next
		return h.deps.Store.Append(ctx, t, c)
	})
	if err != nil {
		return events.Group{}, err
	}
	if payload != nil {
		// The change is recorded, so it is answered as done whatever happens now: items
		// this cannot write are written by the next command on the group, which waits for
		// the lease to end first.
		if err := h.deps.writePending(ctx, t, lease, payload, deletes); err != nil {
			h.deps.pendingFailed(t, payload.Group.Key, payload.Group.Version, err)
		}
	}
	return result, nil
}

// unknownUsers is the 404 naming every user of cmd that does not exist (or is deleted).
func unknownUsers(cmd ChangeMembers, users map[string]UserAggregate) error {
	var missing problems
	for field, list := range map[string][]string{"add": cmd.Add, "remove": cmd.Remove} {
		for _, name := range list {
			if !users[name].Live() {
				missing.Add(field, "no user "+name)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	slices.SortFunc(missing, func(a, b apperr.FieldError) int {
		return strings.Compare(a.Field+" "+a.Message, b.Field+" "+b.Message)
	})
	e := apperr.NotFound("user")
	e.Message = fmt.Sprintf("%d of the users named do not exist; nothing was changed", len(missing))
	e.Fields = missing
	return e
}

// membersCount is the change set of a GroupMembersChanged record: how many members it
// added and removed.
func membersCount(added, removed []events.Member) map[string]events.Change {
	ch := map[string]events.Change{}
	if len(added) > 0 {
		ch["members_added"] = events.Change{New: len(added)}
	}
	if len(removed) > 0 {
		ch["members_removed"] = events.Change{New: len(removed)}
	}
	return ch
}
