package expiry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/expiry"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// clock is a settable clock shared by the handlers and the schedulers of a test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// world is one tenant's write side on DynamoDB Local with its own shared tables (so the
// due index and the scheduler's mark are the test's alone), and a clock the test moves.
type world struct {
	t      *testing.T
	names  dynamo.Names
	store  *dynamo.CommandStore
	tenant commands.Tenant
	clock  *clock
	deps   commands.Deps
	due    *dynamo.Expiries
}

func newWorld(t *testing.T, start time.Time) *world {
	t.Helper()
	local := dynamotest.Current(t)
	db := local.DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("exp")}
	if err := dynamo.EnsureSharedTables(t.Context(), db, names, dynamo.TableSettings{}); err != nil {
		t.Fatalf("shared tables: %v", err)
	}
	tenant := commands.Tenant{System: "acme", ID: dynamotest.UniqueName("t")}
	if err := dynamo.NewTenantStore(db, names).EnsureTables(t.Context(), tenant.System, tenant.ID); err != nil {
		t.Fatalf("tenant tables: %v", err)
	}
	t.Cleanup(func() {
		for _, name := range []string{names.Commands(tenant.System, tenant.ID), names.Users(tenant.System, tenant.ID, 0),
			names.Activities(tenant.System, tenant.ID, 0), names.Config(), names.Idempotency(), names.ScimTokens(),
			names.Erasures(), names.StreamLeases()} {
			if err := dynamo.DeleteTable(context.Background(), db, name); err != nil {
				t.Errorf("clean up: %v", err)
			}
		}
	})
	c := &clock{now: start}
	store := dynamo.NewCommandStore(db, names, events.NewRegistry(), 0)
	return &world{t: t, names: names, store: store, tenant: tenant, clock: c,
		deps: commands.Deps{Store: store, Now: c.Now, NewID: uuid.NewString}, due: dynamo.NewExpiries(db, names)}
}

func (w *world) meta() commands.Meta {
	return commands.Meta{Actor: "admin", CommandID: uuid.NewString()}
}

func (w *world) scheduler(owner string, now func() time.Time) *expiry.Scheduler {
	return &expiry.Scheduler{Due: w.due, Find: w.store, Remove: commands.NewRemoveMemberHandler(commands.Deps{Store: w.store, Now: now, NewID: uuid.NewString}),
		Now: now, Owner: owner}
}

func (w *world) user(name string) {
	w.t.Helper()
	if _, err := commands.NewCreateUserHandler(w.deps, nil).Handle(w.t.Context(), w.tenant, commands.CreateUser{Username: name}, w.meta()); err != nil {
		w.t.Fatalf("create user %s: %v", name, err)
	}
}

func (w *world) group(name string) {
	w.t.Helper()
	if _, err := commands.NewCreateGroupHandler(w.deps).Handle(w.t.Context(), w.tenant, commands.CreateGroup{Name: name}, w.meta()); err != nil {
		w.t.Fatalf("create group %s: %v", name, err)
	}
}

func (w *world) add(group, user string, at *time.Time) {
	w.t.Helper()
	cmd := commands.AddMember{Group: group, Username: user}
	if at != nil {
		cmd.Expiry = &commands.ExpiryChange{At: at}
	}
	if _, err := commands.NewAddMemberHandler(w.deps).Handle(w.t.Context(), w.tenant, cmd, w.meta()); err != nil {
		w.t.Fatalf("add %s to %s: %v", user, group, err)
	}
}

func (w *world) version(group string) int64 {
	w.t.Helper()
	g, err := w.store.LoadGroup(w.t.Context(), w.tenant, group)
	if err != nil {
		w.t.Fatal(err)
	}
	return g.State.Version
}

func (w *world) isMember(group, user string) bool {
	w.t.Helper()
	ms, err := w.store.Memberships(w.t.Context(), w.tenant, group, []string{user})
	if err != nil {
		w.t.Fatal(err)
	}
	return ms[user] != ""
}

// record is the group's history record at version v.
func (w *world) record(group string, v int64) events.Envelope {
	w.t.Helper()
	e, err := w.store.LoadRecord(w.t.Context(), w.tenant, events.KindGroup, group, v)
	if err != nil {
		w.t.Fatalf("record %s v%d: %v", group, v, err)
	}
	return e
}

func (w *world) sweep(s *expiry.Scheduler) expiry.Result {
	w.t.Helper()
	res, err := s.Sweep(w.t.Context())
	if err != nil {
		w.t.Fatalf("sweep: %v", err)
	}
	return res
}

// expectRemovedByExpiry checks that version v of the group is the scheduler's removal of user.
func (w *world) expectRemovedByExpiry(group, user string, v int64) {
	w.t.Helper()
	e := w.record(group, v)
	p, ok := e.Payload.(*events.GroupMemberRemoved)
	if !ok || p.Username != user || e.Actor != expiry.Actor {
		w.t.Fatalf("%s v%d = %s by %s, want group.member_removed of %s by %s", group, v, e.Type, e.Actor, user, expiry.Actor)
	}
}

func ptr(t time.Time) *time.Time { return &t }

var t0 = time.Date(2030, 3, 31, 9, 50, 0, 0, time.UTC)

func TestExpiryRemovesOnTime(t *testing.T) {
	w := newWorld(t, t0)
	w.user("ann")
	w.group("ops")
	at := t0.Add(10 * time.Minute)
	w.add("ops", "ann", ptr(at))
	added := w.version("ops")
	if e := w.record("ops", added); e.Payload.(*events.GroupMemberAdded).ExpiresAt == nil || !e.Payload.(*events.GroupMemberAdded).ExpiresAt.Equal(at) {
		t.Fatalf("the log's member_added has expires_at %v, want %v", e.Payload.(*events.GroupMemberAdded).ExpiresAt, at)
	}
	s := w.scheduler("one", w.clock.Now)

	w.clock.Set(at.Add(-time.Second))
	w.sweep(s)
	if !w.isMember("ops", "ann") || w.version("ops") != added {
		t.Fatal("removed before its instant")
	}
	w.clock.Set(at)
	if res := w.sweep(s); res.Done != 1 {
		t.Fatalf("sweep at the instant = %+v, want 1 done", res)
	}
	if w.isMember("ops", "ann") || w.version("ops") != added+1 {
		t.Fatalf("member %v at v%d after the expiry, want removed at v%d", w.isMember("ops", "ann"), w.version("ops"), added+1)
	}
	w.expectRemovedByExpiry("ops", "ann", added+1)
	w.clock.Set(at.Add(time.Minute))
	w.sweep(s)
	if w.version("ops") != added+1 {
		t.Fatalf("a second sweep recorded v%d", w.version("ops"))
	}
}

func TestExpiryRenewWins(t *testing.T) {
	w := newWorld(t, t0)
	w.user("ann")
	w.group("ops")
	first, second := t0.Add(10*time.Minute), t0.Add(3*time.Hour)
	w.add("ops", "ann", ptr(first))
	w.add("ops", "ann", ptr(second)) // already a member: renews
	renewed := w.version("ops")
	e := w.record("ops", renewed)
	if p, ok := e.Payload.(*events.GroupMemberExpirySet); !ok || p.ExpiresAt == nil || !p.ExpiresAt.Equal(second) || p.Previous == nil || !p.Previous.Equal(first) {
		t.Fatalf("renewal recorded %s %+v", e.Type, e.Payload)
	}
	s := w.scheduler("one", w.clock.Now)
	w.clock.Set(first.Add(time.Minute))
	w.sweep(s)
	if !w.isMember("ops", "ann") || w.version("ops") != renewed {
		t.Fatal("the first expiry removed a renewed member")
	}
	w.clock.Set(second.Add(30 * time.Second))
	w.sweep(s)
	if w.isMember("ops", "ann") {
		t.Fatal("not removed at the renewed expiry")
	}
	w.expectRemovedByExpiry("ops", "ann", renewed+1)

	// Clearing the expiry: the membership goes on.
	w.user("bob")
	w.add("ops", "bob", ptr(second.Add(time.Hour)))
	w.add("ops", "bob", nil) // no expires_at given: nothing changes
	before := w.version("ops")
	if _, err := commands.NewAddMemberHandler(w.deps).Handle(t.Context(), w.tenant,
		commands.AddMember{Group: "ops", Username: "bob", Expiry: &commands.ExpiryChange{}}, w.meta()); err != nil {
		t.Fatal(err)
	}
	if w.version("ops") != before+1 {
		t.Fatal("clearing the expiry recorded nothing")
	}
	w.clock.Set(second.Add(2 * time.Hour))
	w.sweep(s)
	if !w.isMember("ops", "bob") {
		t.Fatal("a cleared expiry removed the member")
	}
}

func TestExpiryManualRemoveWins(t *testing.T) {
	w := newWorld(t, t0)
	w.user("ann")
	w.group("ops")
	at := t0.Add(10 * time.Minute)
	w.add("ops", "ann", ptr(at))
	if _, err := commands.NewRemoveMemberHandler(w.deps).Handle(t.Context(), w.tenant, commands.RemoveMember{Group: "ops", Username: "ann"}, w.meta()); err != nil {
		t.Fatal(err)
	}
	w.add("ops", "ann", nil) // back, for good
	v := w.version("ops")
	w.clock.Set(at.Add(time.Minute))
	if res := w.sweep(w.scheduler("one", w.clock.Now)); res.Done != 1 {
		t.Fatalf("sweep = %+v, want the stale entry done", res)
	}
	if !w.isMember("ops", "ann") || w.version("ops") != v {
		t.Fatalf("the expiry of an ended membership removed the new one (v%d, want v%d)", w.version("ops"), v)
	}
}

func TestExpiryExactlyOnceWithTwoSchedulers(t *testing.T) {
	w := newWorld(t, t0)
	w.group("ops")
	users := []string{"u1", "u2", "u3", "u4", "u5", "u6"}
	at := t0.Add(10 * time.Minute)
	for _, u := range users {
		w.user(u)
		w.add("ops", u, ptr(at))
	}
	before := w.version("ops")
	// The second scheduler's clock runs past the first's lease: both sweep at once.
	w.clock.Set(at.Add(time.Second))
	a := w.scheduler("a", w.clock.Now)
	b := w.scheduler("b", func() time.Time { return w.clock.Now().Add(expiry.DefaultLease + time.Minute) })
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, s := range []*expiry.Scheduler{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = s.Sweep(t.Context()) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.sweep(a) // whatever one left, done now
	if got, want := w.version("ops"), before+int64(len(users)); got != want {
		t.Fatalf("group at v%d after the expiries, want v%d (one removal each)", got, want)
	}
	removed := map[string]int{}
	for v := before + 1; v <= before+int64(len(users)); v++ {
		e := w.record("ops", v)
		if p, ok := e.Payload.(*events.GroupMemberRemoved); ok && e.Actor == expiry.Actor {
			removed[p.Username]++
		}
	}
	for _, u := range users {
		if removed[u] != 1 || w.isMember("ops", u) {
			t.Errorf("%s removed %d times (member now: %v), want once", u, removed[u], w.isMember("ops", u))
		}
	}
}

func TestExpiryOverAnOutage(t *testing.T) {
	w := newWorld(t, t0)
	w.group("ops")
	w.user("ann")
	w.user("bob")
	s := w.scheduler("one", w.clock.Now)
	w.sweep(s) // a scheduler ran once, then every process stopped
	annAt, bobAt := t0.Add(20*time.Minute), t0.Add(5*time.Hour)
	w.add("ops", "ann", ptr(annAt))
	w.add("ops", "bob", ptr(bobAt))
	v := w.version("ops")

	// Back two days later: a new scheduler catches up, once.
	w.clock.Set(t0.Add(48 * time.Hour))
	late := w.scheduler("two", w.clock.Now)
	if res := w.sweep(late); res.Done != 2 {
		t.Fatalf("catch-up sweep = %+v, want 2 done", res)
	}
	if w.isMember("ops", "ann") || w.isMember("ops", "bob") || w.version("ops") != v+2 {
		t.Fatalf("after the catch-up: ann %v, bob %v, v%d (want neither, v%d)", w.isMember("ops", "ann"), w.isMember("ops", "bob"), w.version("ops"), v+2)
	}
	w.expectRemovedByExpiry("ops", "ann", v+1)
	w.expectRemovedByExpiry("ops", "bob", v+2)
	w.sweep(late)
	if w.version("ops") != v+2 {
		t.Fatal("a second sweep removed again")
	}
	mark, err := w.due.Mark(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := w.clock.Now().Add(-time.Hour - expiry.DefaultGrace).Truncate(time.Hour); mark.Before(want) {
		t.Fatalf("mark %v after the catch-up, want at least %v", mark, want)
	}
}

func TestExpiryMustBeFuture(t *testing.T) {
	w := newWorld(t, t0)
	w.user("ann")
	w.group("ops")
	_, err := commands.NewAddMemberHandler(w.deps).Handle(t.Context(), w.tenant,
		commands.AddMember{Group: "ops", Username: "ann", Expiry: &commands.ExpiryChange{At: ptr(t0.Add(-time.Second))}}, w.meta())
	if err == nil {
		t.Fatal("an expiry in the past was accepted")
	}
}
