package asof_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// history builds envelopes at known instants.
type history struct {
	t0  time.Time
	es  []events.Envelope
	ver map[string]int64
}

func (h *history) at(sec float64) time.Time {
	return h.t0.Add(time.Duration(sec * float64(time.Second)))
}

func (h *history) add(sec float64, kind events.AggregateKind, key, actor string, p events.Payload) {
	if h.ver == nil {
		h.ver = map[string]int64{}
	}
	h.ver[string(kind)+key]++
	h.es = append(h.es, events.Envelope{
		EventID: fmt.Sprintf("e%d", len(h.es)), Type: p.EventType(), Kind: kind, Key: key,
		Version: h.ver[string(kind)+key], Actor: actor, OccurredAt: h.at(sec), Payload: p,
	})
}

// applyIn applies es with x: "in order", or else shuffled by seed with every event twice
// (the index is order-proof).
func applyIn(t *testing.T, x *asof.Index, table string, es []events.Envelope, order string, seed int64) {
	t.Helper()
	es = slices.Clone(es)
	if order != "in order" {
		rand.New(rand.NewSource(seed)).Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
		es = append(es, es...)
	}
	for _, e := range es {
		if err := x.Apply(context.Background(), table, e); err != nil {
			t.Fatal(err)
		}
	}
}

func newTable(t *testing.T) (*asof.Index, *asof.Reader, string) {
	t.Helper()
	db := dynamotest.Current(t).DynamoDB()
	table := dynamotest.UniqueName("asof_users")
	if err := dynamo.EnsureTable(context.Background(), db, dynamo.UsersTable(table)); err != nil {
		t.Fatal(err)
	}
	return asof.New(db), asof.NewReader(db), table
}

func user(id, name string, created time.Time) events.User {
	return events.User{ID: id, Username: name, CreatedAt: created, IsActive: true, Version: 1}
}

// story is the history of the issue: adds, removes, a bulk change, a rename, a user
// delete, a group delete and re-create, and an erased member.
func story() *history {
	h := &history{t0: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	eng := events.Group{ID: "g-1", Key: "eng", Name: "Eng", CreatedAt: h.at(1)}
	alice, bob, carol := user("u-alice", "alice", h.at(1)), user("u-bob", "bob", h.at(1)), user("u-carol", "carol", h.at(1))
	h.add(1, events.KindGroup, "eng", "admin", &events.GroupCreated{Group: eng})
	h.add(1, events.KindUser, "alice", "admin", &events.UserCreated{User: alice})
	h.add(1, events.KindUser, "bob", "admin", &events.UserCreated{User: bob})
	h.add(1, events.KindUser, "carol", "admin", &events.UserCreated{User: carol})
	h.add(2, events.KindGroup, "eng", "admin", &events.GroupMemberAdded{Group: eng, Username: "alice", UserID: "u-alice"})
	h.add(3, events.KindGroup, "eng", "=cmd|' /C calc'!A0", &events.GroupMemberAdded{Group: eng, Username: "bob", UserID: "u-bob"})
	h.add(4, events.KindGroup, "eng", "scim:okta", &events.GroupMembersChanged{Group: eng,
		Added: []events.Member{{Username: "carol", UserID: "u-carol"}}, Removed: []events.Member{{Username: "alice", UserID: "u-alice"}}})
	robert := bob
	robert.Username, robert.NamedAt, robert.Version = "robert", h.at(5), 2
	robert.FormerNames = []events.FormerName{{Username: "bob", From: h.at(1), Until: h.at(5)}}
	h.add(5, events.KindUser, "robert", "admin", &events.UserRenamed{User: robert, PreviousUsername: "bob", PreviousVersion: 1})
	h.add(6, events.KindUser, "carol", "admin", &events.UserDeleted{User: events.User{Username: "carol", Deleted: true, CreatedAt: h.at(1)}, PreviousID: "u-carol", Groups: []string{"eng"}})
	h.add(7, events.KindGroup, "eng", "admin", &events.GroupDeleted{Group: events.Group{Key: "eng", Name: "Eng", CreatedAt: h.at(1), Deleted: true}, PreviousID: "g-1"})
	eng2 := events.Group{ID: "g-2", Key: "eng", Name: "ENG", CreatedAt: h.at(8)}
	h.add(8, events.KindGroup, "eng", "admin", &events.GroupCreated{Group: eng2})
	dave := user("u-dave", "dave", h.at(8))
	h.add(8, events.KindUser, "dave", "admin", &events.UserCreated{User: dave})
	h.add(8.5, events.KindGroup, "eng", "admin", &events.GroupMembersChanged{Group: eng2,
		Added: []events.Member{{Username: "alice", UserID: "u-alice"}, {Username: "dave", UserID: "u-dave"}}})
	h.add(9, events.KindUser, "dave", "dpo", &events.UserErased{User: events.User{Username: "dave", Deleted: true}, PreviousID: "u-dave", ErasureID: "er-1"})
	return h
}

func members(t *testing.T, r *asof.Reader, table, group string, at time.Time, limit int) ([]string, error) {
	t.Helper()
	var out []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		p, err := r.Members(context.Background(), table, group, asof.Millis(at), limit, cursor)
		if err != nil {
			return nil, err
		}
		if len(p.Items) > limit {
			t.Fatalf("page of %d items for limit %d", len(p.Items), limit)
		}
		for _, m := range p.Items {
			switch {
			case m.Erased:
				out = append(out, "(erased)")
			default:
				out = append(out, m.Username+"/"+m.UserID)
			}
		}
		if p.Next == nil {
			break
		}
		cursor = *p.Next
	}
	sort.Strings(out)
	return out, nil
}

func groups(t *testing.T, r *asof.Reader, table, username string, at time.Time) ([]string, error) {
	t.Helper()
	p, err := r.Groups(context.Background(), table, username, asof.Millis(at), 50, "")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, g := range p.Items {
		out = append(out, g.Name+"/"+g.GroupID)
	}
	sort.Strings(out)
	return out, nil
}

func TestMembersAtInstantsBetweenEachStep(t *testing.T) {
	ctx := context.Background()
	h := story()
	// Applied in a shuffled order, and every event twice: the index is order-proof.
	for _, order := range []string{"in order", "shuffled twice"} {
		t.Run(order, func(t *testing.T) {
			x, r, table := newTable(t)
			applyIn(t, x, table, h.es, order, 7)
			if err := asof.Erase(ctx, dynamotest.Current(t).DynamoDB(), table, []string{asof.Hash("u-dave")}); err != nil {
				t.Fatal(err)
			}
			// Carol's delete ended her interval in the index itself: the only interval
			// of the first group still open is bob's (the group was deleted, not he).
			open, err := x.Open(ctx, table, "g-1")
			if err != nil || !slices.Equal(open, []string{asof.Hash("u-bob")}) {
				t.Errorf("open intervals of g-1: %v, %v; want bob's only", open, err)
			}
			for _, c := range []struct {
				at   float64
				want []string // nil: not found
			}{
				{0.5, nil},
				{1, []string{}},
				{2.5, []string{"alice/u-alice"}},
				{3, []string{"alice/u-alice", "bob/u-bob"}}, // a change at the instant counts
				{3.5, []string{"alice/u-alice", "bob/u-bob"}},
				{4.5, []string{"bob/u-bob", "carol/u-carol"}},
				{5.5, []string{"carol/u-carol", "robert/u-bob"}},
				{6.5, []string{"robert/u-bob"}},
				{7.5, nil},
				{8.2, []string{}},
				{8.7, []string{"(erased)", "alice/u-alice"}},
				{9.5, []string{"alice/u-alice"}},
			} {
				for _, limit := range []int{1, 50} {
					got, err := members(t, r, table, "eng", h.at(c.at), limit)
					if c.want == nil {
						if !errors.Is(err, asof.ErrNotFound) {
							t.Errorf("eng at +%vs: %v, %v; want not found", c.at, got, err)
						}
						continue
					}
					if err != nil || !slices.Equal(got, c.want) {
						t.Errorf("eng at +%vs (limit %d): %v, %v; want %v", c.at, limit, got, err, c.want)
					}
				}
			}
			for _, c := range []struct {
				user string
				at   float64
				want []string
			}{
				{"alice", 2.5, []string{"Eng/g-1"}},
				{"alice", 4.5, []string{}},
				{"alice", 8.7, []string{"ENG/g-2"}},
				{"bob", 3.5, []string{"Eng/g-1"}},
				{"bob", 5.5, nil}, // the name is robert's now, and nobody else's
				{"robert", 3.5, nil},
				{"robert", 6.5, []string{"Eng/g-1"}},
				{"robert", 7.5, []string{}}, // the group was deleted
				{"carol", 5.5, []string{"Eng/g-1"}},
				{"carol", 6.5, nil}, // deleted
				{"dave", 8.7, nil},  // erased: nobody is found by that name any more
			} {
				got, err := groups(t, r, table, c.user, h.at(c.at))
				if c.want == nil {
					if !errors.Is(err, asof.ErrNotFound) {
						t.Errorf("%s at +%vs: %v, %v; want not found", c.user, c.at, got, err)
					}
					continue
				}
				if err != nil || !slices.Equal(got, c.want) {
					t.Errorf("%s at +%vs: %v, %v; want %v", c.user, c.at, got, err, c.want)
				}
			}
		})
	}
}

// TestAGroupRenameKeepsItsMembers: the hook a group rename calls moves the name, not the
// memberships: the old name answers before the rename only, the new one after it only,
// and a user's groups show the name held at the instant.
func TestAGroupRenameKeepsItsMembers(t *testing.T) {
	ctx := context.Background()
	x, r, table := newTable(t)
	h := &history{t0: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	ops := events.Group{ID: "g-9", Key: "ops", Name: "Ops", CreatedAt: h.at(1)}
	h.add(1, events.KindGroup, "ops", "admin", &events.GroupCreated{Group: ops})
	h.add(1, events.KindUser, "alice", "admin", &events.UserCreated{User: user("u-alice", "alice", h.at(1))})
	h.add(2, events.KindGroup, "ops", "admin", &events.GroupMemberAdded{Group: ops, Username: "alice", UserID: "u-alice"})
	for _, e := range h.es {
		if err := x.Apply(ctx, table, e); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // twice: idempotent
		if err := x.GroupRenamed(ctx, table, "g-9", "ops", "sre", "SRE", asof.Millis(h.at(3))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		group string
		at    float64
		want  []string
	}{
		{"ops", 2.5, []string{"alice/u-alice"}},
		{"ops", 3.5, nil},
		{"sre", 2.5, nil},
		{"sre", 3.5, []string{"alice/u-alice"}},
	} {
		got, err := members(t, r, table, c.group, h.at(c.at), 50)
		if c.want == nil {
			if !errors.Is(err, asof.ErrNotFound) {
				t.Errorf("%s at +%vs: %v, %v; want not found", c.group, c.at, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s at +%vs: %v, %v; want %v", c.group, c.at, got, err, c.want)
		}
	}
	// Deleted under its new name: the new name ends there, and never held the group
	// before the rename.
	h.add(4, events.KindGroup, "sre", "admin", &events.GroupDeleted{Group: events.Group{Key: "sre", Name: "SRE", CreatedAt: h.at(1), Deleted: true}, PreviousID: "g-9"})
	if err := x.Apply(ctx, table, h.es[len(h.es)-1]); err != nil {
		t.Fatal(err)
	}
	for _, at := range []float64{2.5, 4.5} {
		if got, err := members(t, r, table, "sre", h.at(at), 50); !errors.Is(err, asof.ErrNotFound) {
			t.Errorf("sre at +%vs after the delete: %v, %v; want not found", at, got, err)
		}
	}
	if got, err := members(t, r, table, "sre", h.at(3.5), 50); err != nil || !slices.Equal(got, []string{"alice/u-alice"}) {
		t.Errorf("sre at +3.5s after the delete: %v, %v", got, err)
	}
	for at, want := range map[float64]string{2.5: "Ops/g-9", 3.5: "SRE/g-9"} {
		if got, err := groups(t, r, table, "alice", h.at(at)); err != nil || !slices.Equal(got, []string{want}) {
			t.Errorf("alice's groups at +%vs: %v, %v; want %s", at, got, err, want)
		}
	}
}

func TestCheckRefusesWhatTheIndexDoesNotCover(t *testing.T) {
	ctx := context.Background()
	db := dynamotest.Current(t).DynamoDB()
	_, r, table := newTable(t)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	if err := r.Check(ctx, table, now.Add(-time.Hour), now, 0); !errors.Is(err, asof.ErrNotKept) {
		t.Fatalf("no coverage mark: %v", err)
	}
	if err := asof.MarkCoverage(ctx, db, table, asof.Millis(now.Add(-48*time.Hour))); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at        time.Time
		retention time.Duration
		want      error
	}{
		{now.Add(-time.Hour), 0, nil},
		{now, 0, nil},
		{now.Add(time.Millisecond), 0, asof.ErrFuture},
		{now.Add(-49 * time.Hour), 0, asof.ErrNotKept},
		{now.Add(-25 * time.Hour), 24 * time.Hour, asof.ErrNotKept},
		{now.Add(-23 * time.Hour), 24 * time.Hour, nil},
	} {
		if err := r.Check(ctx, table, c.at, now, c.retention); !errors.Is(err, c.want) {
			t.Errorf("Check(%s, retention %s) = %v, want %v", c.at, c.retention, err, c.want)
		}
	}
}

func TestPagesContinueOnlyTheirOwnList(t *testing.T) {
	ctx := context.Background()
	x, r, table := newTable(t)
	h := story()
	for _, e := range h.es {
		if err := x.Apply(ctx, table, e); err != nil {
			t.Fatal(err)
		}
	}
	p, err := r.Members(ctx, table, "eng", asof.Millis(h.at(3.5)), 1, "")
	if err != nil || p.Next == nil {
		t.Fatalf("first page %+v, %v", p, err)
	}
	if _, err := r.Members(ctx, table, "eng", asof.Millis(h.at(4.5)), 1, *p.Next); !errors.Is(err, asof.ErrBadCursor) {
		t.Errorf("a cursor of another instant: %v", err)
	}
	if _, err := r.Groups(ctx, table, "alice", asof.Millis(h.at(3.5)), 1, *p.Next); !errors.Is(err, asof.ErrBadCursor) {
		t.Errorf("a cursor of another list: %v", err)
	}
	if _, err := r.Members(ctx, table, "eng", asof.Millis(h.at(3.5)), 1, "!!"); !errors.Is(err, asof.ErrBadCursor) {
		t.Errorf("a malformed cursor: %v", err)
	}
}

// TestRandomHistoriesMatchTheLog checks the tree against a brute-force reading of the log:
// random additions and removals of a few users at random instants (many at the same
// millisecond, many short, some open), applied out of order, read at every instant that
// matters and around it.
func TestRandomHistoriesMatchTheLog(t *testing.T) {
	ctx := context.Background()
	x, r, table := newTable(t)
	rng := rand.New(rand.NewSource(42))
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	g := events.Group{ID: "g-r", Key: "rand", Name: "rand", CreatedAt: t0}
	h := &history{t0: t0}
	h.add(0, events.KindGroup, "rand", "admin", &events.GroupCreated{Group: g})
	const users = 6
	for u := 0; u < users; u++ {
		h.add(0, events.KindUser, fmt.Sprintf("u%d", u), "admin", &events.UserCreated{User: user(fmt.Sprintf("id%d", u), fmt.Sprintf("u%d", u), t0)})
	}
	type change struct {
		at  int64
		u   int
		add bool
	}
	var log []change
	at := asof.Millis(t0)
	for i := 0; i < 120; i++ {
		// gaps from 0 ms to about a year, so that intervals land on many levels
		switch rng.Intn(4) {
		case 0:
		case 1:
			at += int64(rng.Intn(1000))
		case 2:
			at += int64(rng.Intn(3_600_000))
		default:
			at += int64(rng.Int63n(31_536_000_000))
		}
		c := change{at: at, u: rng.Intn(users), add: rng.Intn(2) == 0}
		log = append(log, c)
		p := events.Payload(&events.GroupMemberRemoved{Group: g, Username: fmt.Sprintf("u%d", c.u), UserID: fmt.Sprintf("id%d", c.u)})
		if c.add {
			p = &events.GroupMemberAdded{Group: g, Username: fmt.Sprintf("u%d", c.u), UserID: fmt.Sprintf("id%d", c.u)}
		}
		h.add(float64(at-asof.Millis(t0))/1000, events.KindGroup, "rand", "admin", p)
		h.es[len(h.es)-1].OccurredAt = time.UnixMilli(at).UTC() // exact milliseconds
	}
	es := slices.Clone(h.es)
	rng.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
	if err := x.ApplyBatch(ctx, table, es); err != nil {
		t.Fatal(err)
	}
	truth := func(t int64) []string {
		in := map[int]bool{}
		for _, c := range log {
			if c.at <= t {
				in[c.u] = c.add
			}
		}
		out := []string{}
		for u, ok := range in {
			if ok {
				out = append(out, fmt.Sprintf("u%d/id%d", u, u))
			}
		}
		sort.Strings(out)
		return out
	}
	for i, c := range log {
		if i%3 != 0 {
			continue // every third change, to keep the test's reads few
		}
		for _, d := range []int64{-1, 0, 1} {
			at := c.at + d
			got, err := members(t, r, table, "rand", time.UnixMilli(at), 4)
			if err != nil || !slices.Equal(got, truth(at)) {
				t.Fatalf("at %d: %v, %v; the log says %v", at, got, err, truth(at))
			}
		}
	}
}
