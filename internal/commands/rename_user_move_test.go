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

	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// crashingUserMoveStore is the real store, except that the first MoveUserMemberships dies
// after a few of its requests: the process running the rename died in the middle of the
// move.
type crashingUserMoveStore struct {
	commands.Store
	requests int64
	crashed  atomic.Bool
}

func (s *crashingUserMoveStore) MoveUserMemberships(ctx context.Context, t commands.Tenant, m commands.UserMove, before func(context.Context) error) error {
	if s.crashed.Load() {
		return s.Store.MoveUserMemberships(ctx, t, m, before)
	}
	err := s.Store.MoveUserMemberships(ctx, t, m, diesAfter(s.requests, before))
	s.crashed.Store(true)
	return err
}

// groupKeys are the keys groupsWithMember makes.
func groupKeys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("g%03d", i)
	}
	return out
}

// inGroups checks that username, and only username of the two names, is a member of
// exactly the groups want in the write model: membership items (with their pointers) and
// pointers both.
func inGroups(t *testing.T, w *world, username, former string, want []string) {
	t.Helper()
	if got := w.groupsOf(username); !slices.Equal(got, want) {
		t.Errorf("groups of %s: %d, want %d", username, len(got), len(want))
	}
	if got := w.groupsOf(former); len(got) != 0 {
		t.Errorf("groups of the former name %s: %v, want none", former, got)
	}
	items := w.items()
	for _, g := range groupKeys(150) {
		members := membersIn(t, items, g)
		if slices.Contains(members, former) {
			t.Errorf("group %s still has a membership of the former name", g)
		}
		if slices.Contains(members, username) != slices.Contains(want, g) {
			t.Errorf("group %s: member %v, want %v", g, slices.Contains(members, username), slices.Contains(want, g))
		}
	}
}

// TestRenameUserInManyGroups renames a person in 150 groups: the same id at the next
// version, a record listing every membership, every membership under the new name (item
// and pointer), none under the old, no move left pending; the old name 404s.
func TestRenameUserInManyGroups(t *testing.T) {
	t.Parallel()
	w := newPrivateWorld(t)
	w.given(append([]any{createUser("ann", "ann@example.com")}, groupsWithMember(150, "ann")...)...)
	before, err := w.real.LoadUser(t.Context(), w.tenant, "ann")
	if err != nil {
		t.Fatal(err)
	}
	u := w.renamed(step{cmd: commands.RenameUser{Username: "ann", NewUsername: "ann.smith@example.com"}, ifMatch: before.State.Version})
	if u.ID != before.State.ID || u.Version != before.State.Version+1 {
		t.Fatalf("renamed = %s v%d, want %s v%d", u.ID, u.Version, before.State.ID, before.State.Version+1)
	}
	p := w.record(events.KindUser, u.Username, u.Version).Payload.(*events.UserRenamed)
	if len(p.Memberships) != 150 {
		t.Fatalf("the record lists %d memberships, want 150", len(p.Memberships))
	}
	agg, err := w.real.LoadUser(t.Context(), w.tenant, u.Username)
	if err != nil || agg.Pending != nil || !agg.Live() {
		t.Fatalf("new name after the rename: pending %+v live %v (%v), want live and not pending", agg.Pending, agg.Live(), err)
	}
	inGroups(t, w, u.Username, "ann", groupKeys(150))
	if _, err := w.exec(t.Context(), step{cmd: commands.SetUserActive{Username: "ann", Active: false}}); apperr.KindOf(err) != apperr.KindNotFound {
		t.Errorf("deactivate the old name: %v, want 404", err)
	}
	// Renamed back, through the same path: still the one person in the 150 groups.
	back := w.renamed(step{cmd: commands.RenameUser{Username: u.Username, NewUsername: "ann"}})
	if back.ID != u.ID || back.Version != u.Version+1 {
		t.Fatalf("renamed back = %s v%d", back.ID, back.Version)
	}
	inGroups(t, w, "ann", u.Username, groupKeys(150))
}

// TestRenameUserMoveThroughACrash renames a person in 150 groups whose move dies after
// its first transactions. The rename is answered as done; the old name is free and 404s
// at once; the write model's reads see every membership under the new name meanwhile;
// commands naming the person wait while the mover's lease runs; once it ran out, a
// removal from a group not yet moved, a members change of another and a create of the
// old name race, one of them finishes the move, and each then does its own work. At the
// end the person is in every group but the two left, under the new name only; the new
// user of the old name is in none.
func TestRenameUserMoveThroughACrash(t *testing.T) {
	t.Parallel()
	w := newPrivateWorld(t)
	w.given(append([]any{createUser("ann", "ann@example.com"), createUser("late", "late@example.com")},
		groupsWithMember(150, "ann")...)...)
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	// 150 memberships are 8 transactions; the mover dies after 2 requests (or before any
	// transaction, when retries count).
	store := &crashingUserMoveStore{Store: w.real, requests: 2}
	d := commands.Deps{Store: store, Now: clock, NewID: uuid.NewString}
	meta := func() commands.Meta {
		return commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "c"}
	}
	u, err := commands.NewRenameUserHandler(d).Handle(t.Context(), w.tenant, commands.RenameUser{Username: "ann", NewUsername: "ann.b"}, meta())
	if err != nil {
		t.Fatalf("rename: %v", err)
	}
	if !store.crashed.Load() {
		t.Fatal("the move did not run")
	}
	agg, err := w.real.LoadUser(t.Context(), w.tenant, "ann.b")
	if err != nil || agg.Pending == nil || agg.Pending.Version != u.Version {
		t.Fatalf("ann.b not pending at v%d: %+v (%v)", u.Version, agg.Pending, err)
	}
	moved := w.groupsOf("ann.b")
	if len(moved) == 150 {
		t.Fatal("every membership moved before the crash")
	}
	unmoved := slices.DeleteFunc(groupKeys(150), func(g string) bool { return slices.Contains(moved, g) })

	// The write model's readers see the person in every group under the new name.
	for _, g := range []string{unmoved[0], unmoved[len(unmoved)-1], groupKeys(150)[0]} {
		cur, err := w.real.CurrentMemberships(t.Context(), w.tenant, g, []string{"ann.b"})
		if err != nil || cur["ann.b"].UserID != u.ID {
			t.Errorf("current membership of ann.b in %s during the move: %+v (%v)", g, cur, err)
		}
	}
	if _, err := commands.NewAddMemberHandler(d).Handle(t.Context(), w.tenant, addMember(unmoved[0], "ann"), meta()); apperr.KindOf(err) != apperr.KindNotFound {
		t.Errorf("join of the old name during the move: %v, want 404", err)
	}
	// A member of a group being moved who is someone else is not held up.
	if _, err := commands.NewAddMemberHandler(d).Handle(t.Context(), w.tenant, addMember(unmoved[1], "late"), meta()); err != nil {
		t.Errorf("join of another user during the move: %v", err)
	}
	// While the mover's lease runs, commands naming the person wait.
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := commands.NewRemoveMemberHandler(d).Handle(short, w.tenant,
		commands.RemoveMember{Group: unmoved[0], Username: "ann.b"}, meta()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a removal during the move answered %v, want it to wait", err)
	}

	offset.Store(int64(31 * time.Second))
	var wg sync.WaitGroup
	errs := make([]error, 3)
	run := func(i int, f func() error) {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = untilAvailable(f) }()
	}
	run(0, func() error {
		_, err := commands.NewRemoveMemberHandler(d).Handle(t.Context(), w.tenant, commands.RemoveMember{Group: unmoved[0], Username: "ann.b"}, meta())
		return err
	})
	run(1, func() error {
		_, err := commands.NewChangeMembersHandler(d).Handle(t.Context(), w.tenant,
			commands.ChangeMembers{Group: unmoved[len(unmoved)-1], Remove: []string{"ann.b"}}, meta())
		return err
	})
	run(2, func() error {
		_, err := commands.NewCreateUserHandler(d, w.box).Handle(t.Context(), w.tenant, createUser("ann", "ann2@example.com"), meta())
		return err
	})
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	if agg, err := w.real.LoadUser(t.Context(), w.tenant, "ann.b"); err != nil || agg.Pending != nil {
		t.Fatalf("ann.b still pending after the racers: %+v (%v)", agg.Pending, err)
	}
	want := slices.DeleteFunc(groupKeys(150), func(g string) bool { return g == unmoved[0] || g == unmoved[len(unmoved)-1] })
	inGroups(t, w, "ann.b", "ann", want)
	if got := w.groupsOf("ann"); len(got) != 0 {
		t.Errorf("the new ann is in %v, want none", got)
	}
	if !slices.Contains(membersOf(t, w, unmoved[1]), "late") {
		t.Errorf("late's join of %s is lost", unmoved[1])
	}
}

// TestRenameUserRacesGroupCommands runs a rename of a person in 40 groups beside a
// removal of the person from one group by the old name, a join of another user to a
// second group, a group rename of a third and a delete of a fourth. Whatever the order,
// the record and the write model agree: the person is under the new name exactly in the
// groups the record lists that still live (the renamed one under its new key), and
// nowhere under the old name.
func TestRenameUserRacesGroupCommands(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.given(append([]any{createUser("bob", "bob@example.com"), createUser("eve", "eve@example.com")},
				groupsWithMember(40, "bob")...)...)
			var wg sync.WaitGroup
			errs := make([]error, 5)
			run := func(i int, s step) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = untilAvailable(func() error { _, err := w.exec(t.Context(), s); return err })
				}()
			}
			run(0, step{cmd: commands.RenameUser{Username: "bob", NewUsername: "robert"}})
			run(1, step{cmd: commands.RemoveMember{Group: "g001", Username: "bob"}})
			run(2, step{cmd: commands.AddMember{Group: "g002", Username: "eve"}})
			run(3, step{cmd: commands.RenameGroup{Name: "g003", NewName: "h003"}})
			run(4, step{cmd: commands.DeleteGroup{Name: "g004"}})
			wg.Wait()
			if errs[0] != nil || errs[2] != nil || errs[3] != nil || errs[4] != nil {
				t.Fatalf("errors: %v", errs)
			}
			if errs[1] != nil && apperr.KindOf(errs[1]) != apperr.KindNotFound {
				t.Fatalf("removal by the old name: %v, want done or 404", errs[1])
			}
			u, err := w.real.LoadUser(t.Context(), w.tenant, "robert")
			if err != nil || !u.Live() || u.Pending != nil {
				t.Fatalf("robert: %+v (%v)", u, err)
			}
			p := w.record(events.KindUser, "robert", u.State.Version).Payload.(*events.UserRenamed)
			listed := map[string]bool{}
			for _, m := range p.Memberships {
				listed[m.GroupKey] = true
			}
			// Removed before the rename read it (listed: no), or refused after (404, listed).
			if listed["g001"] != (errs[1] != nil) {
				t.Errorf("g001 listed %v, removal answered %v", listed["g001"], errs[1])
			}
			var want []string
			for _, g := range groupKeys(40) {
				switch {
				case g == "g004" || (g == "g001" && errs[1] == nil):
				case g == "g003":
					want = append(want, "h003")
				default:
					want = append(want, g)
				}
			}
			slices.Sort(want)
			if got := w.groupsOf("robert"); !slices.Equal(got, want) {
				t.Errorf("groups of robert = %v, want %v", got, want)
			}
			if got := w.groupsOf("bob"); len(got) != 0 {
				t.Errorf("groups of bob = %v, want none", got)
			}
			for _, g := range append(want, "g004", "g003") {
				members := membersOf(t, w, g)
				if slices.Contains(members, "bob") {
					t.Errorf("%s has a membership of the old name", g)
				}
				cur, err := w.real.CurrentMemberships(t.Context(), w.tenant, g, []string{"robert"})
				if err != nil {
					t.Fatal(err)
				}
				if _, in := cur["robert"]; in != slices.Contains(want, g) {
					t.Errorf("%s: robert a current member %v, want %v", g, in, slices.Contains(want, g))
				}
			}
			if !slices.Contains(membersOf(t, w, "g002"), "eve") {
				t.Error("eve's join of g002 is lost")
			}
		})
	}
}
