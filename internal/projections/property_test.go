package projections_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestAnyOrderGivesTheSameTables: given a random command history over a few users and
// groups (creates, updates, password changes, (de)activation, deletes and re-creates,
// members added and removed one by one and many at once, groups deleted), when its records are applied in order into
// tables A, shuffled with random duplicates into B, shuffled with duplicates by four
// concurrent workers into C, through ApplyBatch in random chunks into D, and through a
// Committer by sixteen concurrent workers (the live projector's group commit) into E, then
// all five hold the same items, and A holds what the write side's state says. It holds
// for both ways of writing a group's view items: transactions of 25 (DynamoDB Local's
// fast way) and a conditional PutItem each (AWS's cheap way).
func TestAnyOrderGivesTheSameTables(t *testing.T) {
	for _, mode := range []struct {
		name string
		puts bool
	}{{"transactions", false}, {"single puts", true}} {
		for seed := range 3 {
			t.Run(fmt.Sprintf("%s, seed %d", mode.name, seed), func(t *testing.T) {
				t.Parallel()
				anyOrderGivesTheSameTables(t, seed, mode.puts)
			})
		}
	}
}

func anyOrderGivesTheSameTables(t *testing.T, seed int, puts bool) {
	{
		{
			rng := rand.New(rand.NewPCG(uint64(seed), 2026))
			db := client(t)
			p := projections.New(db, projections.Options{Retention: retention, SinglePuts: puts})
			w := newWorld(t)
			randomHistory(w, rng, 60)
			ctx := context.Background()

			a := newTables(t, db)
			applyAll(t, p, a, w.log)
			want := takeSnapshot(t, db, a)
			assertMatchesWriteSide(t, want, w)
			assertActivities(t, want, w.log)
			assertPointers(t, want, w.log)
			assertNoSecrets(t, want)

			b := newTables(t, db)
			applyAll(t, p, b, shuffledWithDuplicates(rng, w.log))
			if d := want.diff(takeSnapshot(t, db, b)); d != "" {
				t.Errorf("shuffled with duplicates, tables differ from in order:\n%s", d)
			}

			c := newTables(t, db)
			work := make(chan events.Envelope)
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() {
					for e := range work {
						if err := p.Apply(ctx, c, e); err != nil {
							t.Errorf("apply %s %s v%d: %v", e.Type, e.Entity(), e.Version, err)
						}
					}
				})
			}
			for _, e := range shuffledWithDuplicates(rng, w.log) {
				work <- e
			}
			close(work)
			wg.Wait()
			if d := want.diff(takeSnapshot(t, db, c)); d != "" {
				t.Errorf("applied concurrently, tables differ from in order:\n%s", d)
			}

			d := newTables(t, db)
			rest := shuffledWithDuplicates(rng, w.log)
			for len(rest) > 0 {
				n := min(len(rest), 1+rng.IntN(40))
				if err := p.ApplyBatch(ctx, d, rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			if diff := want.diff(takeSnapshot(t, db, d)); diff != "" {
				t.Errorf("applied in batches, tables differ from in order:\n%s", diff)
			}

			e := newTables(t, db)
			committer := p.Committer(e)
			work = make(chan events.Envelope)
			for range 16 {
				wg.Go(func() {
					for ev := range work {
						if err := committer.Apply(ctx, ev, nil); err != nil {
							t.Errorf("commit %s %s v%d: %v", ev.Type, ev.Entity(), ev.Version, err)
						}
					}
				})
			}
			for _, ev := range shuffledWithDuplicates(rng, w.log) {
				work <- ev
			}
			close(work)
			wg.Wait()
			if diff := want.diff(takeSnapshot(t, db, e)); diff != "" {
				t.Errorf("applied in concurrent groups, tables differ from in order:\n%s", diff)
			}
		}
	}
}

// randomHistory makes the world accept n random commands that it accepts.
func randomHistory(w *world, rng *rand.Rand, n int) {
	usernames := []string{"ann", "bob", "cid"}
	groupNames := []string{"Red", "Blue"}
	exists := func(name string) bool { u, ok := w.users[name]; return ok && u.exists }
	groupExists := func(key string) bool { g, ok := w.groups[key]; return ok && g.exists }
	isMember := func(key, name string) bool {
		if !groupExists(key) {
			return false
		}
		_, ok := w.groups[key].members[name]
		return ok
	}
	for len(w.log) < n {
		u := usernames[rng.IntN(len(usernames))]
		gname := groupNames[rng.IntN(len(groupNames))]
		g := strings.ToLower(gname)
		// Membership commands are the interesting ones, so they are drawn most often; deletes
		// are drawn less, so that memberships get a chance to pile up before one.
		switch rng.IntN(16) {
		case 0:
			if !exists(u) {
				w.createUser(u, fmt.Sprintf("%s.%d@Example.com", u, rng.IntN(100)), "First"+u, "Last"+u)
			}
		case 1:
			if exists(u) {
				w.updateUser(u, func(s *events.User) {
					s.LastName = []string{"", "Smith", "smythe"}[rng.IntN(3)]
					s.Email = fmt.Sprintf("%s.%d@Example.com", u, rng.IntN(100))
				})
			}
		case 2:
			if exists(u) {
				if rng.IntN(2) == 0 {
					w.changePassword(u)
				} else {
					w.setActive(u, !w.users[u].state.IsActive)
				}
			}
		case 3:
			if exists(u) && rng.IntN(2) == 0 {
				w.deleteUser(u)
			}
		case 4:
			if !groupExists(g) {
				if rng.IntN(2) == 0 {
					gname = strings.ToUpper(gname)
				}
				w.createGroup(gname, "")
			}
		case 5:
			if groupExists(g) {
				w.updateGroup(g, fmt.Sprint("tier ", rng.IntN(10)))
			}
		case 6:
			if groupExists(g) && rng.IntN(3) == 0 {
				w.deleteGroup(g)
			}
		case 7, 8, 9, 10, 11:
			if groupExists(g) && exists(u) && !isMember(g, u) {
				w.addMember(g, u)
			}
		case 12, 13:
			if isMember(g, u) {
				w.removeMember(g, u)
			}
		case 14, 15:
			// One members change: a random part of the users added, another removed.
			if !groupExists(g) {
				continue
			}
			var add, remove []string
			for _, name := range usernames {
				switch {
				case !exists(name):
				case isMember(g, name) && rng.IntN(2) == 0:
					remove = append(remove, name)
				case !isMember(g, name) && rng.IntN(2) == 0:
					add = append(add, name)
				}
			}
			if len(add)+len(remove) > 0 {
				w.changeMembers(g, add, remove)
			}
		}
	}
}

// shuffledWithDuplicates is every event at least once, a third of them twice, in random
// order.
func shuffledWithDuplicates(rng *rand.Rand, log []events.Envelope) []events.Envelope {
	out := slices.Clone(log)
	for _, e := range log {
		if rng.IntN(3) == 0 {
			out = append(out, e)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// assertMatchesWriteSide checks the read table against the world's final state: every
// user and group at its version, live or tombstoned as the write side has it, and exactly
// the write side's memberships live.
func assertMatchesWriteSide(t *testing.T, s snapshot, w *world) {
	t.Helper()
	for name, u := range w.users {
		it := s.Users["user#"+name+"/config"]
		if it == nil {
			t.Errorf("no config item for user %s", name)
			continue
		}
		if it["version"] != float64(u.state.Version) || it["is_deleted"] != !u.exists {
			t.Errorf("user %s: version %v deleted %v, want %d %v", name, it["version"], it["is_deleted"], u.state.Version, !u.exists)
		}
		if u.exists && (it["user_id"] != u.state.ID || it["email"] != strings.ToLower(u.state.Email)) {
			t.Errorf("user %s: id %v email %v, want %s %s", name, it["user_id"], it["email"], u.state.ID, strings.ToLower(u.state.Email))
		}
	}
	live := map[string]float64{}
	for key, g := range w.groups {
		it := s.Users["group#"+key+"/config"]
		if it == nil {
			t.Errorf("no config item for group %s", key)
			continue
		}
		if it["version"] != float64(g.state.Version) || it["is_deleted"] != !g.exists {
			t.Errorf("group %s: version %v deleted %v, want %d %v", key, it["version"], it["is_deleted"], g.state.Version, !g.exists)
		}
		for name, v := range g.members {
			live["group#"+key+"/member#"+name] = float64(v)
		}
	}
	got := map[string]float64{}
	for k, it := range s.Users {
		if _, ok := it["member_id"]; ok {
			got[k], _ = it["version"].(float64)
			if it["is_deleted"] != false {
				t.Errorf("membership %s has member_id but is_deleted %v", k, it["is_deleted"])
			}
		}
	}
	if !maps.Equal(got, live) {
		t.Errorf("live memberships (key → version) %v, want %v", got, live)
	}
}
