package commands_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// crashingMoveStore is the real store, except that the first MoveMembers dies after a few
// of its requests: the process running the rename died in the middle of the move.
type crashingMoveStore struct {
	commands.Store
	requests int64
	crashed  atomic.Bool
}

func (s *crashingMoveStore) MoveMembers(ctx context.Context, t commands.Tenant, m commands.MembersMove, before func(context.Context) error) error {
	if s.crashed.Load() {
		return s.Store.MoveMembers(ctx, t, m, before)
	}
	err := s.Store.MoveMembers(ctx, t, m, diesAfter(s.requests, before))
	s.crashed.Store(true)
	return err
}

// diesAfter is before for a mover whose process dies after requests requests.
func diesAfter(requests int64, before func(context.Context) error) func(context.Context) error {
	var n atomic.Int64
	return func(ctx context.Context) error {
		if n.Add(1) > requests {
			return errors.New("the process died")
		}
		return before(ctx)
	}
}

// untilAvailable runs f again while it answers 503 (a command that waited its bound for
// another writer's move), as a client does.
func untilAvailable(f func() error) error {
	for {
		err := f()
		if apperr.KindOf(err) != apperr.KindUnavailable {
			return err
		}
	}
}

// TestRenameGroupMovesManyMembersThroughACrash renames a group of 200 members whose
// move dies after its first requests. The rename is answered as done; the old name is
// free and 404s at once; the write model's reads see every membership under the new name
// meanwhile; a members change of the group and a member's rename wait for the move while
// its lease runs, and once it ran out, racing each other, finish it (the rename of a
// member whose items had not moved yet finishes it from the old key's tombstone) and then
// do their own work. At the end every membership is under the new key with its pointer,
// nothing is left under the old one, and the old name can be created afresh, empty.
func TestRenameGroupMovesManyMembersThroughACrash(t *testing.T) {
	t.Parallel()
	w := newPrivateWorld(t)
	members := names("m", 200)
	w.given(append(usersBatch(append(slices.Clone(members), "late")), createGroup("Big"),
		commands.ChangeMembers{Group: "big", Add: members})...)
	before, err := w.real.LoadGroup(t.Context(), w.tenant, "big")
	if err != nil {
		t.Fatal(err)
	}
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	// 200 members are 8 requests a phase: the mover dies while writing the memberships
	// under the new key, after every pointer to it (or earlier, when retries count).
	store := &crashingMoveStore{Store: w.real, requests: 11}
	d := commands.Deps{Store: store, Now: clock, NewID: uuid.NewString}
	meta := func() commands.Meta {
		return commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "c"}
	}

	g, err := commands.NewRenameGroupHandler(d).Handle(t.Context(), w.tenant, commands.RenameGroup{Name: "big", NewName: "Huge"}, meta())
	if err != nil || g.Version != before.State.Version+1 || g.ID != before.State.ID {
		t.Fatalf("rename answered %+v, %v; want %s at v%d", g, err, before.State.ID, before.State.Version+1)
	}
	if !store.crashed.Load() {
		t.Fatal("the move did not run")
	}
	if p := w.record(events.KindGroup, "huge", g.Version).Payload.(*events.GroupRenamed); len(p.Members) != len(members) {
		t.Fatalf("the rename's record lists %d members, want %d", len(p.Members), len(members))
	}
	agg, err := w.real.LoadGroup(t.Context(), w.tenant, "huge")
	if err != nil || agg.Pending == nil || agg.Pending.Version != g.Version {
		t.Fatalf("huge not pending at v%d: %+v (%v)", g.Version, agg.Pending, err)
	}
	// Under load a batch's retries also count as requests, so the mover may die before any
	// membership is under the new key; it never finishes.
	if moved := w.membersOf("huge"); len(moved) == len(members) {
		t.Fatalf("%d memberships moved before the crash, want not all", len(moved))
	}
	// The old name is free at once; the write model's readers see the members moved.
	if _, err := commands.NewAddMemberHandler(d).Handle(t.Context(), w.tenant, addMember("big", "late"), meta()); apperr.KindOf(err) != apperr.KindNotFound {
		t.Errorf("join the old name during the move: %v, want 404", err)
	}
	current, err := w.real.CurrentMemberships(t.Context(), w.tenant, "huge", members)
	if err != nil || len(current) != len(members) {
		t.Errorf("current memberships of huge during the move: %d (%v), want %d", len(current), err, len(members))
	}
	if old, err := w.real.CurrentMemberships(t.Context(), w.tenant, "big", members); err != nil || len(old) != 0 {
		t.Errorf("current memberships of the old name: %d (%v), want none", len(old), err)
	}

	// While the mover's lease runs, commands that meet the move wait for it.
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := commands.NewChangeMembersHandler(d).Handle(short, w.tenant,
		commands.ChangeMembers{Group: "huge", Add: []string{"late"}}, meta()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a members change during the move answered %v, want it to wait", err)
	}
	last := members[len(members)-1] // in a batch the dead mover never wrote
	if _, err := commands.NewRenameUserHandler(d).Handle(short, w.tenant,
		commands.RenameUser{Username: last, NewUsername: last + ".x"}, meta()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a member's rename during the move answered %v, want it to wait", err)
	}

	// Once the lease ran out, both race: one finishes the move, the other waits for it.
	offset.Store(int64(31 * time.Second))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		errs[0] = untilAvailable(func() error {
			_, err := commands.NewChangeMembersHandler(d).Handle(t.Context(), w.tenant,
				commands.ChangeMembers{Group: "huge", Add: []string{"late"}, Remove: []string{members[1]}}, meta())
			return err
		})
	}()
	go func() {
		defer wg.Done()
		errs[1] = untilAvailable(func() error {
			_, err := commands.NewRenameUserHandler(d).Handle(t.Context(), w.tenant,
				commands.RenameUser{Username: last, NewUsername: last + ".x"}, meta())
			return err
		})
	}()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	want := slices.Concat([]string{members[0]}, members[2:len(members)-1], []string{last + ".x", "late"})
	slices.Sort(want)
	if got := membersOf(t, w, "huge"); !slices.Equal(got, want) {
		t.Errorf("members of huge: %d, want %d (missing %v, extra %v)", len(got), len(want), missing(want, got), missing(got, want))
	}
	if got := membersOf(t, w, "big"); len(got) != 0 {
		t.Errorf("members left under the old name: %v", got)
	}
	ids := w.membersOf("huge")
	users, err := w.real.LoadUsers(t.Context(), w.tenant, want)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range want {
		if ids[u] != users[u].State.ID || ids[u] == "" {
			t.Errorf("%s's membership has user id %q, want %q", u, ids[u], users[u].State.ID)
		}
	}
	notPending(t, w, "huge")
	w.given(createGroup("big"))
	if got := membersOf(t, w, "big"); len(got) != 0 {
		t.Errorf("the new big has members %v", got)
	}
}

// missing are the names of want not in got.
func missing(want, got []string) []string {
	var out []string
	for _, u := range want {
		if !slices.Contains(got, u) {
			out = append(out, u)
		}
	}
	return out
}

// renamingStore is the real store, except that after the group rename first read the
// members, hook runs (once).
type renamingStore struct {
	commands.Store
	once sync.Once
	hook func()
}

func (s *renamingStore) GroupMemberStates(ctx context.Context, t commands.Tenant, key string, limit int) ([]commands.GroupMember, error) {
	out, err := s.Store.GroupMemberStates(ctx, t, key, limit)
	s.once.Do(s.hook)
	return out, err
}

// TestRenameGroupAfterAMemberRenamed: a member renamed after a group rename read the
// members (and before it committed) makes the group rename decide again, so the member
// moves under the new name, and nothing is left of the old username.
func TestRenameGroupAfterAMemberRenamed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.given(append(users("ann", "bob"), createGroup("ops"), addMember("ops", "ann"), addMember("ops", "bob"))...)
	d := commands.Deps{Store: &renamingStore{Store: w.real, hook: func() {
		w.given(commands.RenameUser{Username: "ann", NewUsername: "ann.x"})
	}}, Now: time.Now, NewID: uuid.NewString}
	meta := commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "c"}
	g, err := commands.NewRenameGroupHandler(d).Handle(t.Context(), w.tenant, commands.RenameGroup{Name: "ops", NewName: "sre"}, meta)
	if err != nil {
		t.Fatal(err)
	}
	if got := membersOf(t, w, "sre"); !slices.Equal(got, []string{"ann.x", "bob"}) {
		t.Errorf("members of sre: %v, want ann.x and bob", got)
	}
	if got := membersOf(t, w, "ops"); len(got) != 0 {
		t.Errorf("members left under ops: %v", got)
	}
	p := w.record(events.KindGroup, "sre", g.Version).Payload.(*events.GroupRenamed)
	var listed []string
	for _, m := range p.Members {
		listed = append(listed, m.Username)
	}
	if !slices.Equal(listed, []string{"ann.x", "bob"}) {
		t.Errorf("the rename's record lists %v, want ann.x and bob", listed)
	}
}

// TestRenameGroupAfterAMemberDeleted: a member deleted after a group rename read the
// members (and before it committed) makes the rename decide again (the count of user
// deletes moved): its record does not name the deleted person, and nothing of theirs is
// moved.
func TestRenameGroupAfterAMemberDeleted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.given(append(users("ann", "bob"), createGroup("ops"), addMember("ops", "ann"), addMember("ops", "bob"))...)
	d := commands.Deps{Store: &renamingStore{Store: w.real, hook: func() {
		w.given(commands.DeleteUser{Username: "bob"})
	}}, Now: time.Now, NewID: uuid.NewString}
	meta := commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "c"}
	g, err := commands.NewRenameGroupHandler(d).Handle(t.Context(), w.tenant, commands.RenameGroup{Name: "ops", NewName: "sre"}, meta)
	if err != nil {
		t.Fatal(err)
	}
	p := w.record(events.KindGroup, "sre", g.Version).Payload.(*events.GroupRenamed)
	if len(p.Members) != 1 || p.Members[0].Username != "ann" {
		t.Errorf("the rename's record lists %+v, want only ann", p.Members)
	}
	if got := membersOf(t, w, "sre"); !slices.Equal(got, []string{"ann"}) {
		t.Errorf("members of sre: %v, want ann", got)
	}
	if got := membersOf(t, w, "ops"); len(got) != 0 {
		t.Errorf("members left under ops: %v", got)
	}
}
