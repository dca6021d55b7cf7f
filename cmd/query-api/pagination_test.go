package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/queries/querytest"
)

// TestPaginationWhileWriting walks every list a few items at a time while another goroutine
// keeps creating, changing and deleting users, groups and memberships. Every item that
// existed unchanged for the whole walk must appear exactly once, and lists whose sort keys
// never move must not repeat anything.
func TestPaginationWhileWriting(t *testing.T) {
	a := startApp(t, options{})
	f := a.tenant(t, tenantA)

	const stable = 12
	var stableUsers, stableGroups []string
	for i := range stable {
		u := fmt.Sprintf("u%02da", i)
		stableUsers = append(stableUsers, u)
		apply(t, f, f.CreateUser(events.User{Username: u, FirstName: "Sam", LastName: fmt.Sprintf("Lin %02d", i)}))
		g := fmt.Sprintf("g%02da", i)
		stableGroups = append(stableGroups, g)
		apply(t, f, f.CreateGroup(g, ""), f.AddMember(g, "u00a"))
	}
	apply(t, f, f.CreateGroup("team", ""))
	for _, u := range stableUsers {
		apply(t, f, f.AddMember("team", u))
	}
	// Churn users exist before the walk and change during it, so they move in the
	// by-update lists.
	for i := range stable {
		apply(t, f, f.CreateUser(events.User{Username: fmt.Sprintf("u%02dc", i), FirstName: "Cy", LastName: fmt.Sprintf("Lin %02d", i)}))
	}
	stableActivity := activityIDs(t, a, url.Values{"day": {querytest.Day}})
	var churner writer

	walks := []struct {
		name  string
		path  string
		query url.Values
		limit int
		// fixed: sort keys never move, so nothing may appear twice.
		fixed  bool
		key    func(map[string]any) string
		stable []string
	}{
		{"all users by update time, newest first", "/users", nil, 3, false, field("username"), stableUsers},
		{"all users by update time, oldest first", "/users", url.Values{"order": {"updated_asc"}}, 3, false, field("username"), stableUsers},
		{"users by last-name prefix", "/users", url.Values{"last_name_prefix": {"lin"}}, 3, true, field("username"), stableUsers},
		{"users by first-name prefix", "/users", url.Values{"first_name_prefix": {"s"}}, 3, true, field("username"), stableUsers},
		{"users by username prefix", "/users", url.Values{"username_prefix": {"u"}}, 3, true, field("username"), stableUsers},
		{"groups by name", "/groups", nil, 3, true, field("name"), stableGroups},
		{"a group's members", "/groups/team/members", nil, 3, true, field("username"), stableUsers},
		{"a user's groups", "/users/u00a/groups", nil, 3, true, field("name"), stableGroups},
		{"the activity of a day", "/activity", url.Values{"day": {querytest.Day}}, 20, true, field("event_id"), stableActivity},
		{"the activity of an actor", "/activity", url.Values{"actor": {"bootstrap"}}, 20, true, field("event_id"), stableActivity},
		{"the activity of an entity", "/activity", url.Values{"entity": {"group:team"}}, 5, true, field("event_id"), nil},
	}
	for _, w := range walks {
		t.Run(w.name, func(t *testing.T) {
			var items []map[string]any
			n := churner.during(t, f, stable, func(awaitWrites func()) {
				items = walk[map[string]any](t, a, tenantPath(tenantA, w.path), w.query, w.limit, awaitWrites)
			})
			if n < 2 {
				t.Fatalf("only %d rounds of writes happened during the walk", n)
			}
			seen := map[string]int{}
			for _, it := range items {
				seen[w.key(it)]++
			}
			for _, k := range w.stable {
				if seen[k] != 1 {
					t.Errorf("%s appeared %d times, want exactly once", k, seen[k])
				}
			}
			if w.fixed {
				for k, n := range seen {
					if n > 1 {
						t.Errorf("%s appeared %d times in a list whose order never moves", k, n)
					}
				}
			}
		})
	}
}

func field(name string) func(map[string]any) string {
	return func(m map[string]any) string { s, _ := m[name].(string); return s }
}

func activityIDs(t *testing.T, a *app, q url.Values) []string {
	t.Helper()
	var ids []string
	for _, it := range walk[activityJSON](t, a, tenantPath(tenantA, "/activity"), q, 500, nil) {
		ids = append(ids, it.EventID)
	}
	return ids
}

// whileWriting runs walk while a goroutine keeps writing, and returns the number of rounds
// of writes made meanwhile. walk gets a function to call after each page that waits for
// the next round, so that every walk really runs while its list changes, however fast the
// reads are.
func (w *writer) during(t *testing.T, f *querytest.Tenant, stable int, walk func(awaitWrites func())) int64 {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	before := w.rounds.Load()
	done := make(chan error, 1)
	go func() { done <- w.churn(ctx, f, stable) }()
	walk(func() {
		from := w.rounds.Load()
		deadline := time.Now().Add(10 * time.Second)
		for w.rounds.Load() == from && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("concurrent writer: %v", err)
	}
	return w.rounds.Load() - before
}

// writer writes in rounds; seq numbers the rounds it starts across walks, so that its names
// never repeat even when a round is cut short, and rounds counts those it completed.
type writer struct {
	seq    atomic.Int64
	rounds atomic.Int64
}

// churn writes until ctx ends: new users (between the stable ones in every order), changes
// and deletes of churn users, new groups with memberships, members joining and leaving.
func (w *writer) churn(ctx context.Context, f *querytest.Tenant, stable int) error {
	for ctx.Err() == nil {
		i := int(w.seq.Add(1) - 1)
		n := i % stable
		nu := fmt.Sprintf("u%02db%d", n, i)
		ng := fmt.Sprintf("g%02db%d", n, i)
		cu := fmt.Sprintf("u%02dc", n)
		es := []events.Envelope{
			f.CreateUser(events.User{Username: nu, FirstName: "Sue", LastName: fmt.Sprintf("Lin %02d", n)}),
			f.AddMember("team", nu),
			f.CreateGroup(ng, ""),
			f.AddMember(ng, "u00a"),
		}
		if i < stable {
			es = append(es, f.UpdateUser(cu, func(u *events.User) { u.FirstName = "Cyd" }))
		} else if i < 2*stable {
			es = append(es, f.DeleteUser(cu))
		}
		if i%3 == 2 {
			es = append(es, f.RemoveMember("team", nu), f.DeleteGroup(ng))
		}
		if err := f.Apply(ctx, es...); err != nil {
			if ctx.Err() != nil || strings.Contains(err.Error(), "context canceled") {
				return nil
			}
			return err
		}
		w.rounds.Add(1)
	}
	return nil
}
