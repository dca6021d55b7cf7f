package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// The fresh-build comparisons leave the as-of index out (snapshot): where its items lie
// depends on when they were written. asOfMatchesLog checks what it answers instead: the
// members of every group and the groups of some users, at instants between the log's
// membership changes, each against an answer worked out from the command log alone.

// incarnation is one life of a user or group under a name: [created, deleted), deleted
// 0 while it lasts.
type incarnation struct {
	id               string
	created, deleted int64
}

type logEdge struct {
	at, version int64
	in          bool
}

// logModel is the command log reduced to what as-of answers depend on.
type logModel struct {
	groups, users map[string][]*incarnation // by key / username, in creation order
	userByID      map[string]*incarnation
	groupByID     map[string]*incarnation
	edges         map[[2]string][]logEdge // (group id, user id)
	instants      []int64                 // of the membership changes
}

func newLogModel(t *testing.T, e *env, commands string) (*logModel, error) {
	t.Helper()
	reg := events.NewRegistry()
	var es []events.Envelope
	for _, it := range scan(t, e.db, commands) {
		if !dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
			continue
		}
		env, err := dynamo.DecodeRecord(reg, it)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, env)
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].OccurredAt.Before(es[j].OccurredAt) })
	m := &logModel{groups: map[string][]*incarnation{}, users: map[string][]*incarnation{},
		userByID: map[string]*incarnation{}, groupByID: map[string]*incarnation{}, edges: map[[2]string][]logEdge{}}
	edge := func(gid, uid string, at, version int64, in bool) {
		k := [2]string{gid, uid}
		m.edges[k] = append(m.edges[k], logEdge{at, version, in})
		m.instants = append(m.instants, at)
	}
	for _, ev := range es {
		at := asof.Millis(ev.OccurredAt)
		switch p := ev.Payload.(type) {
		case *events.GroupCreated:
			inc := &incarnation{id: p.Group.ID, created: at}
			m.groups[p.Group.Key] = append(m.groups[p.Group.Key], inc)
			m.groupByID[inc.id] = inc
		case *events.GroupDeleted:
			if inc := m.groupByID[p.PreviousID]; inc != nil {
				inc.deleted = at
			}
		case *events.UserCreated:
			inc := &incarnation{id: p.User.ID, created: at}
			m.users[p.User.Username] = append(m.users[p.User.Username], inc)
			m.userByID[inc.id] = inc
		case *events.UserDeleted:
			if inc := m.userByID[p.PreviousID]; inc != nil {
				inc.deleted = at
			}
		case *events.GroupMemberAdded:
			edge(p.Group.ID, p.UserID, at, ev.Version, true)
		case *events.GroupMemberRemoved:
			edge(p.Group.ID, p.UserID, at, ev.Version, false)
		case *events.GroupMembersChanged:
			for _, u := range p.Added {
				edge(p.Group.ID, u.UserID, at, ev.Version, true)
			}
			for _, u := range p.Removed {
				edge(p.Group.ID, u.UserID, at, ev.Version, false)
			}
		case *events.UserRenamed, *events.GroupRenamed, *events.UserErased:
			return nil, fmt.Errorf("the log model does not follow %s", ev.Type)
		}
	}
	for _, es := range m.edges {
		sort.SliceStable(es, func(i, j int) bool {
			if es[i].at != es[j].at {
				return es[i].at < es[j].at
			}
			return es[i].version < es[j].version
		})
	}
	slices.Sort(m.instants)
	return m, nil
}

// holder is the incarnation that held a name at t: the latest created at or before t,
// unless it was deleted by t.
func holder(incs []*incarnation, t int64) *incarnation {
	var h *incarnation
	for _, inc := range incs {
		if inc.created <= t {
			h = inc
		}
	}
	if h == nil || (h.deleted != 0 && h.deleted <= t) {
		return nil
	}
	return h
}

func alive(inc *incarnation, t int64) bool {
	return inc != nil && inc.created <= t && (inc.deleted == 0 || inc.deleted > t)
}

// in: whether the pair's changes at or before t leave the user in the group.
func (m *logModel) in(k [2]string, t int64) bool {
	in := false
	for _, e := range m.edges[k] {
		if e.at > t {
			break
		}
		in = e.in
	}
	return in
}

// members are the user ids in the group that held key at t ("404" when none did).
func (m *logModel) members(key string, t int64) []string {
	g := holder(m.groups[key], t)
	if g == nil {
		return []string{"404"}
	}
	out := []string{}
	for k := range m.edges {
		if k[0] == g.id && m.in(k, t) && alive(m.userByID[k[1]], t) {
			out = append(out, k[1])
		}
	}
	slices.Sort(out)
	return out
}

// groupsOf are the group ids of the user who held username at t ("404" when none did).
func (m *logModel) groupsOf(username string, t int64) []string {
	u := holder(m.users[username], t)
	if u == nil {
		return []string{"404"}
	}
	out := []string{}
	for k := range m.edges {
		if k[1] == u.id && m.in(k, t) && alive(m.groupByID[k[0]], t) {
			out = append(out, k[0])
		}
	}
	slices.Sort(out)
	return out
}

// asOfMatchesLog compares the index of usersTable with the log of commands at a dozen
// instants spread over the log's membership changes (at a change, and a millisecond
// before it): every group's members and the groups of every sixth user.
func asOfMatchesLog(t *testing.T, e *env, commands, usersTable string) (bool, string) {
	t.Helper()
	m, err := newLogModel(t, e, commands)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.instants) == 0 {
		return false, "no membership changes in the log"
	}
	var at []int64
	for i := 1; i <= 6; i++ {
		x := m.instants[(len(m.instants)-1)*i/6]
		at = append(at, x-1, x)
	}
	at = append(at, m.instants[len(m.instants)-1]+1)
	ctx := context.Background()
	r := asof.NewReader(e.db)
	if err := r.Check(ctx, usersTable, time.UnixMilli(m.instants[0]-1), time.Now(), 0); err != nil {
		return false, fmt.Sprintf("the index of %s does not cover the log's first change: %v", usersTable, err)
	}
	var usernames []string
	for u := range m.users {
		usernames = append(usernames, u)
	}
	slices.Sort(usernames)
	var bad []string
	for _, ti := range at {
		for key := range m.groups {
			got := []string{}
			cursor := ""
			for {
				p, err := r.Members(ctx, usersTable, key, ti, 100, cursor)
				if errors.Is(err, asof.ErrNotFound) {
					got = []string{"404"}
					break
				}
				if err != nil {
					return false, err.Error()
				}
				for _, it := range p.Items {
					got = append(got, it.UserID)
				}
				if p.Next == nil {
					break
				}
				cursor = *p.Next
			}
			slices.Sort(got)
			if want := m.members(key, ti); !slices.Equal(got, want) {
				bad = append(bad, fmt.Sprintf("members of %q at %d: index %v, log %v", key, ti, got, want))
			}
		}
		for i := 0; i < len(usernames); i += 6 {
			got := []string{}
			p, err := r.Groups(ctx, usersTable, usernames[i], ti, 500, "")
			switch {
			case errors.Is(err, asof.ErrNotFound):
				got = []string{"404"}
			case err != nil:
				return false, err.Error()
			default:
				for _, g := range p.Items {
					got = append(got, g.GroupID)
				}
			}
			slices.Sort(got)
			if want := m.groupsOf(usernames[i], ti); !slices.Equal(got, want) {
				bad = append(bad, fmt.Sprintf("groups of %q at %d: index %v, log %v", usernames[i], ti, got, want))
			}
		}
	}
	if len(bad) > 0 {
		return false, fmt.Sprintf("%d as-of answers differ from the log, e.g.:\n%s", len(bad), strings.Join(bad[:min(len(bad), 5)], "\n"))
	}
	return true, ""
}
