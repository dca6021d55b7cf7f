package commands_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

func users(names ...string) []any {
	var steps []any
	for _, n := range names {
		steps = append(steps, createUser(n, n+"@example.com"))
	}
	return steps
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

// membersOf is the usernames with a membership item in the group, and a failure for every
// membership without its user's group pointer or the other way round.
func membersOf(t *testing.T, w *world, key string) []string {
	t.Helper()
	return membersIn(t, w.items(), key)
}

// membersIn is membersOf over items already scanned, so that a check of many groups
// scans the table once.
func membersIn(t *testing.T, items []map[string]types.AttributeValue, key string) []string {
	t.Helper()
	members, pointers := map[string]bool{}, map[string]bool{}
	for _, it := range items {
		id, sk := s(it, "id"), s(it, "sk")
		switch {
		case id == dynamo.GroupID(key) && dynamo.IsMemberSK(sk):
			members[sk[len("member#"):]] = true
		case sk == dynamo.GroupPointerSK(key):
			pointers[id[len("user#"):]] = true
		}
	}
	for u := range members {
		if !pointers[u] {
			t.Errorf("%s's membership of %s has no group pointer", u, key)
		}
	}
	for u := range pointers {
		if !members[u] {
			t.Errorf("%s has a group pointer to %s but no membership", u, key)
		}
	}
	out := make([]string, 0, len(members))
	for u := range members {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

func notPending(t *testing.T, w *world, key string) {
	t.Helper()
	g, err := w.real.LoadGroup(t.Context(), w.tenant, key)
	if err != nil || g.Pending != nil {
		t.Errorf("group %s still marked with a pending members change %+v (%v)", key, g.Pending, err)
	}
}

func TestChangeMembers(t *testing.T) {
	admins := createGroup("Admins")
	many := names("u", 1000)
	runCases(t, []commandCase{
		{
			name:  "adding and removing many members records one group.members_changed at one version",
			given: append(users("ann", "bob", "cid", "dan"), admins, addMember("admins", "ann"), addMember("admins", "bob")),
			when:  step{cmd: commands.ChangeMembers{Group: "ADMINS", Add: []string{"Dan", "cid", "ann", "dan"}, Remove: []string{"bob"}}},
			then: []event{{events.GroupMembersChangedType, "admins", 4, map[string]any{
				"added": []string{"cid", "dan"}, "removed": []string{"bob"}, "name": "Admins",
				"changes": []string{"members_added", "members_removed"},
			}}},
			version: 4,
			also: func(t *testing.T, w *world, _ any) {
				if got := membersOf(t, w, "admins"); !slices.Equal(got, []string{"ann", "cid", "dan"}) {
					t.Errorf("members %v, want ann, cid, dan", got)
				}
				notPending(t, w, "admins")
				e := w.record(events.KindGroup, "admins", 4).Payload.(*events.GroupMembersChanged)
				for _, m := range e.Added {
					u, _ := w.real.LoadUser(t.Context(), w.tenant, m.Username)
					if m.UserID != u.State.ID || m.MembershipRev != 1 {
						t.Errorf("added %+v, want user id %s and revision 1", m, u.State.ID)
					}
				}
				if e.Removed[0].UserID == "" {
					t.Error("a removed member carries no user id")
				}
			},
		},
		{
			name:    "a change that changes nothing records nothing and answers the group's version",
			given:   append(users("ann", "bob"), admins, addMember("admins", "ann")),
			when:    step{cmd: commands.ChangeMembers{Group: "admins", Add: []string{"ann"}, Remove: []string{"bob"}}},
			version: 2,
		},
		{
			name:  "unknown and deleted users are named in one 404 and nothing changes",
			given: append(users("ann", "bob", "gone"), admins, commands.DeleteUser{Username: "gone"}),
			when:  step{cmd: commands.ChangeMembers{Group: "admins", Add: []string{"ann", "nobody", "gone"}, Remove: []string{"bob", "ghost"}}},
			err:   apperr.CodeNotFound,
			also: func(t *testing.T, w *world, _ any) {
				if got := membersOf(t, w, "admins"); len(got) != 0 {
					t.Errorf("members %v after a refused change", got)
				}
			},
		},
		{
			name:  "an unknown group is not found",
			given: users("ann"),
			when:  step{cmd: commands.ChangeMembers{Group: "nobody", Add: []string{"ann"}}},
			err:   apperr.CodeNotFound,
		},
		{
			name:   "more than 1000 usernames are refused",
			given:  []any{admins},
			when:   step{cmd: commands.ChangeMembers{Group: "admins", Add: names("a", 600), Remove: names("r", 401)}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"add"},
		},
		{
			name:   "malformed usernames and a user both added and removed are refused, each named",
			given:  []any{admins},
			when:   step{cmd: commands.ChangeMembers{Group: "admins", Add: []string{"ok", "not ok", "Both"}, Remove: []string{"both", ""}}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"add[1]", "remove[0]", "remove[1]"},
		},
		{
			name:  "a stale If-Match of the group is refused",
			given: append(users("ann"), admins, commands.UpdateGroup{Name: "admins", Description: ptr("x")}),
			when:  ifMatch(1, commands.ChangeMembers{Group: "admins", Add: []string{"ann"}}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name:  "a thousand members, far more than a transaction holds, are added at one version",
			given: append(usersBatch(many), admins),
			when:  step{cmd: commands.ChangeMembers{Group: "admins", Add: many}},
			then:  []event{{events.GroupMembersChangedType, "admins", 2, nil}},
			also: func(t *testing.T, w *world, _ any) {
				if got := membersOf(t, w, "admins"); !slices.Equal(got, many) {
					t.Errorf("%d members, want %d", len(got), len(many))
				}
				notPending(t, w, "admins")
			},
		},
		{
			name: "the members a change added go with the user's delete, and a re-created user is no member",
			given: append(users("ann"), admins, commands.ChangeMembers{Group: "admins", Add: []string{"ann"}},
				commands.DeleteUser{Username: "ann"}, createUser("ann", "")),
			when: step{cmd: commands.ChangeMembers{Group: "admins", Add: []string{"ann"}}},
			then: []event{{events.GroupMembersChangedType, "admins", 3, map[string]any{"added": []string{"ann"}}}},
			also: func(t *testing.T, w *world, _ any) {
				u, _ := w.real.LoadUser(t.Context(), w.tenant, "ann")
				e := w.record(events.KindGroup, "admins", 3).Payload.(*events.GroupMembersChanged)
				// The change decided revision 1 for the first incarnation without taking it;
				// its delete took 1, covering it, and the new incarnation's addition orders
				// above.
				if u.State.DeletedMembershipRev != 1 || e.Added[0].MembershipRev != 2 {
					t.Errorf("deleted revision %d and new addition's %d, want 1 and 2", u.State.DeletedMembershipRev, e.Added[0].MembershipRev)
				}
				first := w.record(events.KindGroup, "admins", 2).Payload.(*events.GroupMembersChanged)
				if first.Added[0].MembershipRev > u.State.DeletedMembershipRev {
					t.Errorf("the first addition's revision %d is above the delete's %d: the delete would not cover it", first.Added[0].MembershipRev, u.State.DeletedMembershipRev)
				}
			},
		},
	})
}

// usersBatch creates many users in one step each, but quickly: the case's given runs them
// one by one, so they are made side by side here by a single step that runs them all.
func usersBatch(names []string) []any {
	return []any{manyUsers(names)}
}

// manyUsers is a given step that creates every user of its list, 16 at a time.
type manyUsers []string

// manyGroups is a given step that creates every group of its list, 16 at a time.
type manyGroups []string

func (w *world) createMany(ctx context.Context, list []string) error {
	return w.execMany(ctx, list, func(u string) any { return createUser(u, "") })
}

// execMany runs the command of each name, 16 at a time, and answers the first failure.
func (w *world) execMany(ctx context.Context, list []string, cmd func(string) any) error {
	g := make(chan struct{}, 16)
	var (
		wg    sync.WaitGroup
		first atomic.Value
	)
	for _, n := range list {
		wg.Add(1)
		g <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-g }()
			if _, err := w.exec(ctx, step{cmd: cmd(n)}); err != nil {
				first.CompareAndSwap(nil, err)
			}
		}()
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return err
	}
	return nil
}

// pendingStore is the real store, except that the first WriteMembers does nothing and
// fails: the writer died right after its change was recorded.
type pendingStore struct {
	commands.Store
	failed atomic.Bool
}

func (s *pendingStore) WriteMembers(ctx context.Context, t commands.Tenant, w commands.MembersWrite, before func(context.Context) error) error {
	if s.failed.CompareAndSwap(false, true) {
		return errors.New("the process died")
	}
	return s.Store.WriteMembers(ctx, t, w, before)
}

// TestPendingMembersChange checks a members change whose writer died after recording it:
// the change is answered as done, the Keycloak sync's read of the write model sees it, a
// command on the group waits for the writer's lease, and once it ran out the next command
// writes the items and then decides on the complete state.
func TestPendingMembersChange(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.given(append(users("ann", "bob", "cid"), createGroup("ops"), addMember("ops", "bob"))...)
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	d := commands.Deps{Store: &pendingStore{Store: w.real}, Now: clock, NewID: uuid.NewString}
	meta := func() commands.Meta {
		return commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "c"}
	}

	g, err := commands.NewChangeMembersHandler(d).Handle(t.Context(), w.tenant,
		commands.ChangeMembers{Group: "ops", Add: []string{"ann"}, Remove: []string{"bob"}}, meta())
	if err != nil || g.Version != 3 {
		t.Fatalf("the recorded change answered v%d, %v; want v3", g.Version, err)
	}
	if got := membersOf(t, w, "ops"); !slices.Equal(got, []string{"bob"}) {
		t.Fatalf("members %v, want the items untouched by the dead writer", got)
	}
	if agg, _ := w.real.LoadGroup(t.Context(), w.tenant, "ops"); agg.Pending == nil || agg.Pending.Version != 3 {
		t.Fatalf("group not marked pending at v3: %+v", agg.Pending)
	}
	for user, want := range map[string]bool{"ann": true, "bob": false} {
		_, ok, err := w.real.CurrentMembership(t.Context(), w.tenant, "ops", user)
		if err != nil || ok != want {
			t.Errorf("the write model's current membership of %s is %v (%v), want %v", user, ok, err, want)
		}
	}

	// While the writer's lease runs, a command on the group waits for it.
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := commands.NewAddMemberHandler(d).Handle(short, w.tenant, addMember("ops", "cid"), meta()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a command during the writer's lease answered %v, want it to wait", err)
	}

	// Once the lease ran out, the next command writes the change's items, then its own.
	offset.Store(int64(31 * time.Second))
	v, err := commands.NewAddMemberHandler(d).Handle(t.Context(), w.tenant, addMember("ops", "cid"), meta())
	if err != nil || v != 4 {
		t.Fatalf("the command after the lease answered v%d, %v; want v4", v, err)
	}
	if got := membersOf(t, w, "ops"); !slices.Equal(got, []string{"ann", "cid"}) {
		t.Errorf("members %v, want ann and cid", got)
	}
	notPending(t, w, "ops")
}

// racingStore is the real store for a members change that a user delete overtakes:
// after the change has read its users (so ann is live when it decides), the hook runs.
type racingStore struct {
	commands.Store
	once      sync.Once
	afterRead func()
	// afterAppend runs once, after the change's transaction committed.
	appended    sync.Once
	afterAppend func()
	// beforeFinish runs once, before the change clears its pending mark.
	finish sync.Once
	onDone func()
}

func (s *racingStore) LoadUsers(ctx context.Context, t commands.Tenant, usernames []string) (map[string]commands.UserAggregate, error) {
	out, err := s.Store.LoadUsers(ctx, t, usernames)
	if s.afterRead != nil {
		s.once.Do(s.afterRead)
	}
	return out, err
}

func (s *racingStore) Append(ctx context.Context, t commands.Tenant, c commands.Change) error {
	err := s.Store.Append(ctx, t, c)
	if err == nil && s.afterAppend != nil {
		s.appended.Do(s.afterAppend)
	}
	return err
}

func (s *racingStore) FinishMembers(ctx context.Context, t commands.Tenant, key string, l commands.MembersLease) error {
	if s.onDone != nil {
		s.finish.Do(s.onDone)
	}
	return s.Store.FinishMembers(ctx, t, key, l)
}

// pausedStore is the real store for a user delete that is paused after reading the user's
// groups, until released.
type pausedStore struct {
	commands.Store
	once    sync.Once
	read    chan struct{}
	release chan struct{}
}

func (s *pausedStore) UserMemberships(ctx context.Context, t commands.Tenant, username string) (int64, []string, error) {
	rev, groups, err := s.Store.UserMemberships(ctx, t, username)
	s.once.Do(func() {
		close(s.read)
		<-s.release
	})
	return rev, groups, err
}

// TestMembersChangeRacesUserDelete deletes a user a members change adds while the change
// is being made, at the two moments that matter: no membership of the deleted user is
// left in the write model, and the addition's revision is covered by the delete's. A
// change of a few users checks each of them again after writing; one of many checks the
// tenant's count of user deletes, and only when it moved each user.
func TestMembersChangeRacesUserDelete(t *testing.T) {
	t.Parallel()
	for _, size := range []struct {
		name   string
		others []string
	}{{"two users", []string{"bob"}}, {"forty users", append([]string{"bob"}, names("u", 39)...)}} {
		t.Run(size.name, func(t *testing.T) {
			t.Parallel()
			racesUserDelete(t, size.others)
		})
	}
}

// racesUserDelete adds ann and others to a group while ann is deleted.
func racesUserDelete(t *testing.T, others []string) {
	check := func(t *testing.T, w *world) {
		t.Helper()
		if got := membersOf(t, w, "ops"); !slices.Equal(got, others) {
			t.Errorf("members %v, want %v: the deleted user's membership is left", got, others)
		}
		noMemberships(t, w, "ann")
		notPending(t, w, "ops")
		tomb, _ := w.real.LoadUser(t.Context(), w.tenant, "ann")
		e := w.record(events.KindGroup, "ops", 2).Payload.(*events.GroupMembersChanged)
		for _, m := range e.Added {
			if m.Username == "ann" && m.MembershipRev > tomb.State.DeletedMembershipRev {
				t.Errorf("ann's addition has revision %d, above her delete's %d", m.MembershipRev, tomb.State.DeletedMembershipRev)
			}
		}
	}
	d := func(s commands.Store) commands.Deps {
		return commands.Deps{Store: s, Now: time.Now, NewID: uuid.NewString}
	}
	meta := func() commands.Meta {
		return commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "c"}
	}
	change := commands.ChangeMembers{Group: "ops", Add: append([]string{"ann"}, others...)}
	given := func(w *world) {
		w.given(append(usersBatch(append([]string{"ann"}, others...)), createGroup("ops"))...)
	}

	t.Run("the user is deleted between the change's transaction and its writes", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		given(w)
		rs := &racingStore{Store: w.real}
		rs.afterAppend = func() {
			if _, err := commands.NewDeleteUserHandler(d(w.real)).Handle(t.Context(), w.tenant, commands.DeleteUser{Username: "ann"}, meta()); err != nil {
				t.Errorf("delete: %v", err)
			}
		}
		if _, err := commands.NewChangeMembersHandler(d(rs)).Handle(t.Context(), w.tenant, change, meta()); err != nil {
			t.Fatal(err)
		}
		check(t, w)
	})
	// A delete (an erasure) between the change's read and its transaction makes the change
	// decide again (the transaction conditions on the counts of user deletes covering its
	// users), so that no record of the group names a user deleted before it was written:
	// an erasure's sweep of the group histories, done by then, would not see it.
	t.Run("the user is deleted between the change's read and its transaction", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		given(w)
		rs := &racingStore{Store: w.real}
		rs.afterRead = func() {
			if _, err := commands.NewDeleteUserHandler(d(w.real)).Handle(t.Context(), w.tenant, commands.DeleteUser{Username: "ann"}, meta()); err != nil {
				t.Errorf("delete: %v", err)
			}
		}
		_, err := commands.NewChangeMembersHandler(d(rs)).Handle(t.Context(), w.tenant, change, meta())
		if apperr.CodeOf(err) != apperr.CodeNotFound {
			t.Fatalf("the change answered %v, want not found: ann was deleted before it committed", err)
		}
		if g, err := w.real.LoadGroup(t.Context(), w.tenant, "ops"); err != nil || g.State.Version != 1 {
			t.Errorf("the group is at version %d (%v), want 1: nothing recorded", g.State.Version, err)
		}
		if got := membersOf(t, w, "ops"); len(got) != 0 {
			t.Errorf("members %v, want none", got)
		}
		noMemberships(t, w, "ann")
	})
	t.Run("the user's delete read her groups before the change wrote and commits after it", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t)
		given(w)
		ps := &pausedStore{Store: w.real, read: make(chan struct{}), release: make(chan struct{})}
		deleted := make(chan error, 1)
		go func() {
			_, err := commands.NewDeleteUserHandler(d(ps)).Handle(t.Context(), w.tenant, commands.DeleteUser{Username: "ann"}, meta())
			deleted <- err
		}()
		<-ps.read
		// The change decides, writes, checks that ann lives (she does), then the delete
		// commits with the groups it read before.
		rs := &racingStore{Store: w.real, onDone: func() { close(ps.release) }}
		if _, err := commands.NewChangeMembersHandler(d(rs)).Handle(t.Context(), w.tenant, change, meta()); err != nil {
			t.Fatal(err)
		}
		if err := <-deleted; err != nil {
			t.Fatalf("delete: %v", err)
		}
		check(t, w)
	})
}

// readCountingStore is the real store, counting the users LoadUsers reads.
type readCountingStore struct {
	commands.Store
	users atomic.Int64
}

func (s *readCountingStore) LoadUsers(ctx context.Context, t commands.Tenant, usernames []string) (map[string]commands.UserAggregate, error) {
	s.users.Add(int64(len(usernames)))
	return s.Store.LoadUsers(ctx, t, usernames)
}

// TestMembersChangeOfManyChecksTheDeleteCount: a change that adds many users, with no user
// deleted meanwhile, reads them once (to decide), not a second time after writing; every
// user delete and erasure raises the count it reads instead, and nothing else does.
func TestMembersChangeOfManyChecksTheDeleteCount(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	many := names("m", 40)
	w.given(append(usersBatch(append([]string{"ann", "bob", "cid"}, many...)), createGroup("ops"))...)
	ctx := t.Context()
	deletes := func() int64 {
		t.Helper()
		n, err := w.real.UserDeletes(ctx, w.tenant)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := deletes(); n != 0 {
		t.Fatalf("the count of user deletes is %d before any delete", n)
	}
	d := commands.Deps{Store: w.real, Now: time.Now, NewID: uuid.NewString}
	meta := func() commands.Meta {
		return commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "c"}
	}
	if _, err := commands.NewUpdateUserHandler(d).Handle(ctx, w.tenant, commands.UpdateUser{Username: "bob", FirstName: ptr("Robert")}, meta()); err != nil {
		t.Fatal(err)
	}
	rs := &readCountingStore{Store: w.real}
	if _, err := commands.NewChangeMembersHandler(commands.Deps{Store: rs, Now: time.Now, NewID: uuid.NewString}).Handle(ctx, w.tenant,
		commands.ChangeMembers{Group: "ops", Add: many}, meta()); err != nil {
		t.Fatal(err)
	}
	if got := membersOf(t, w, "ops"); !slices.Equal(got, many) {
		t.Fatalf("members %v, want %v", got, many)
	}
	if n := rs.users.Load(); n != int64(len(many)) {
		t.Errorf("the change read %d users, want %d: each once, to decide", n, len(many))
	}
	if n := deletes(); n != 0 {
		t.Errorf("the count of user deletes is %d after creates, an update and a members change", n)
	}
	if _, err := commands.NewDeleteUserHandler(d).Handle(ctx, w.tenant, commands.DeleteUser{Username: "ann"}, meta()); err != nil {
		t.Fatal(err)
	}
	if _, err := commands.NewEraseUserHandler(d).Handle(ctx, w.tenant, commands.EraseUser{Username: "cid", Reason: "request of the person", ErasureID: uuid.NewString()}, meta()); err != nil {
		t.Fatal(err)
	}
	if n := deletes(); n != 2 {
		t.Errorf("the count of user deletes is %d after a delete and an erasure, want 2", n)
	}
}

// TestLoadUsersNamesEachUserOnce: a list naming a user twice is read as if it named it once
// (BatchGetItem refuses a request with a key twice).
func TestLoadUsersNamesEachUserOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	if err := w.createMany(ctx, []string{"ann", "bob"}); err != nil {
		t.Fatal(err)
	}
	got, err := w.real.LoadUsers(ctx, w.tenant, []string{"ann", "bob", "ann", "nobody", "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["ann"].State.Username != "ann" || got["bob"].State.Username != "bob" {
		t.Fatalf("LoadUsers = %v, want ann and bob", got)
	}
}
