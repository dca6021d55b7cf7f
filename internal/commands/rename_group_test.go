package commands_test

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// renamedGroup runs a group rename that must be accepted.
func (w *world) renamedGroup(st step) events.Group {
	w.t.Helper()
	out, err := w.exec(w.t.Context(), st)
	if err != nil {
		w.t.Fatalf("rename %+v: %v", st.cmd, err)
	}
	return out.(events.Group)
}

func TestRenameGroupKeepsTheGroupAndFreesTheOldName(t *testing.T) {
	w := newWorld(t)
	w.given(
		commands.CreateUser{Username: "ann"}, commands.CreateUser{Username: "bob"},
		commands.CreateGroup{Name: "Ops", Description: "on call"},
		commands.AddMember{Group: "ops", Username: "ann"}, commands.AddMember{Group: "ops", Username: "bob"},
	)
	before, err := w.real.LoadGroup(t.Context(), w.tenant, "ops")
	if err != nil {
		t.Fatal(err)
	}
	g := w.renamedGroup(step{cmd: commands.RenameGroup{Name: "OPS", NewName: "Site Reliability"}, ifMatch: before.State.Version})

	if g.ID != before.State.ID || g.Key != "site reliability" || g.Name != "Site Reliability" || g.Version != before.State.Version+1 ||
		g.Description != "on call" {
		t.Fatalf("renamed group = %+v, want %s %q v%d", g, before.State.ID, "site reliability", before.State.Version+1)
	}
	if len(g.FormerNames) != 1 || g.FormerNames[0].Name != "Ops" || g.FormerNames[0].Key != "ops" || !g.FormerNames[0].Until.Equal(g.NamedAt) {
		t.Errorf("former names = %+v, want Ops until %s", g.FormerNames, g.NamedAt)
	}
	e := w.record(events.KindGroup, g.Key, g.Version)
	p, ok := e.Payload.(*events.GroupRenamed)
	if e.Type != events.GroupRenamedType || !ok {
		t.Fatalf("record = %s %T, want group.renamed", e.Type, e.Payload)
	}
	if ch := e.Changes["name"]; ch.Old != "Ops" || ch.New != "Site Reliability" || len(e.Changes) != 1 {
		t.Errorf("changes = %+v, want only name Ops → Site Reliability", e.Changes)
	}
	if p.PreviousName != "Ops" || p.PreviousKey != "ops" || p.PreviousVersion != before.State.Version || len(p.Members) != 2 {
		t.Errorf("payload = %+v", p)
	}
	old, err := w.real.LoadGroup(t.Context(), w.tenant, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if old.Live() || old.State.Version != before.State.Version+1 {
		t.Errorf("old name = live %v v%d, want a tombstone at v%d", old.Live(), old.State.Version, before.State.Version+1)
	}
	if got := w.membersOf(g.Key); len(got) != 2 || got["ann"] == "" || got["bob"] == "" {
		t.Errorf("members under the new name = %v, want ann and bob", got)
	}
	if got := w.membersOf("ops"); len(got) != 0 {
		t.Errorf("members under the old name = %v, want none", got)
	}
	for _, u := range []string{"ann", "bob"} {
		if got := w.groupsOf(u); !slices.Equal(got, []string{g.Key}) {
			t.Errorf("groups of %s = %v, want only %q", u, got, g.Key)
		}
	}

	// The old name 404s at once and is free; the memberships are the group's under the
	// new name: removing works, and a later delete takes what is left.
	if _, err := w.exec(t.Context(), step{cmd: commands.AddMember{Group: "ops", Username: "ann"}}); apperr.KindOf(err) != apperr.KindNotFound {
		t.Errorf("join the old name: %v, want 404", err)
	}
	w.given(commands.CreateGroup{Name: "ops"})
	again, err := w.real.LoadGroup(t.Context(), w.tenant, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if again.State.ID == g.ID || again.State.Version != before.State.Version+2 {
		t.Errorf("new ops = %s v%d, want a new id at v%d", again.State.ID, again.State.Version, before.State.Version+2)
	}
	w.given(commands.RemoveMember{Group: "site reliability", Username: "ann"})
	if got := w.membersOf(g.Key); len(got) != 1 {
		t.Errorf("members after a removal = %v, want bob", got)
	}
	w.given(commands.DeleteUser{Username: "bob"})
	if got := w.membersOf(g.Key); len(got) != 0 {
		t.Errorf("members after bob's delete = %v, want none", got)
	}
}

func TestRenameGroupRefusals(t *testing.T) {
	w := newWorld(t)
	w.given(commands.CreateGroup{Name: "ops"}, commands.CreateGroup{Name: "Admins"})
	cases := []struct {
		name string
		st   step
		want string
	}{
		{"a rename onto a live group is group_exists", step{cmd: commands.RenameGroup{Name: "ops", NewName: "ADMINS"}}, apperr.CodeGroupExists},
		{"a stale If-Match is version_mismatch", step{cmd: commands.RenameGroup{Name: "ops", NewName: "dev"}, ifMatch: 7}, apperr.CodeVersionMismatch},
		{"an unknown group is not_found", step{cmd: commands.RenameGroup{Name: "nobody", NewName: "dev"}}, apperr.CodeNotFound},
		{"a new name breaking the rule is validation_failed", step{cmd: commands.RenameGroup{Name: "ops", NewName: "a/b"}}, apperr.CodeValidationFailed},
		{"an empty new name is validation_failed", step{cmd: commands.RenameGroup{Name: "ops", NewName: ""}}, apperr.CodeValidationFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.exec(t.Context(), c.st)
			if apperr.CodeOf(err) != c.want {
				t.Fatalf("err = %v, want %s", err, c.want)
			}
		})
	}
	for _, key := range []string{"ops", "admins"} {
		g, err := w.real.LoadGroup(t.Context(), w.tenant, key)
		if err != nil || !g.Live() || g.State.Version != 1 {
			t.Errorf("%s after the refusals = live %v v%d (%v), want unchanged", key, g.Live(), g.State.Version, err)
		}
	}
	// The same name is no change; a change of case keeps the key and the members.
	if g := w.renamedGroup(step{cmd: commands.RenameGroup{Name: "OPS", NewName: "ops"}}); g.Version != 1 {
		t.Errorf("rename to the same name = v%d, want v1", g.Version)
	}
	w.given(commands.CreateUser{Username: "ann"}, commands.AddMember{Group: "ops", Username: "ann"})
	g := w.renamedGroup(step{cmd: commands.RenameGroup{Name: "ops", NewName: "OPS"}, ifMatch: 2})
	if g.Key != "ops" || g.Name != "OPS" || g.Version != 3 || len(g.FormerNames) != 0 {
		t.Errorf("change of case = %+v, want key ops, name OPS, v3, no former names", g)
	}
	if got := w.membersOf("ops"); len(got) != 1 {
		t.Errorf("members after a change of case = %v, want ann", got)
	}
	if e := w.record(events.KindGroup, "ops", 3); e.Type != events.GroupRenamedType || e.Changes["name"].New != "OPS" {
		t.Errorf("record v3 = %s %+v", e.Type, e.Changes)
	}
}

func TestRenameGroupOfTooManyMembersIsRefused(t *testing.T) {
	defer commands.SetRenameBounds(5, events.MemberListBytes)()
	w := newWorld(t)
	names := []string{"u0", "u1", "u2", "u3", "u4", "u5"}
	w.given(append(usersBatch(names), commands.CreateGroup{Name: "big"}, commands.ChangeMembers{Group: "big", Add: names[1:]})...)
	// At the limit the rename moves everyone.
	g := w.renamedGroup(step{cmd: commands.RenameGroup{Name: "big", NewName: "large"}})
	if got := w.membersOf(g.Key); len(got) != 5 {
		t.Fatalf("members after the rename = %d, want 5", len(got))
	}
	w.given(commands.AddMember{Group: "large", Username: names[0]})
	if _, err := w.exec(t.Context(), step{cmd: commands.RenameGroup{Name: "large", NewName: "huge"}}); apperr.CodeOf(err) != apperr.CodeValidationFailed {
		t.Fatalf("rename of a group past the limit: %v, want validation_failed", err)
	}
	if got := w.membersOf("large"); len(got) != 6 {
		t.Errorf("members after the refusal = %d, want 6", len(got))
	}
	// A record that would not fit is refused the same way, whatever the count.
	defer commands.SetRenameBounds(100, 200)()
	if _, err := w.exec(t.Context(), step{cmd: commands.RenameGroup{Name: "large", NewName: "huge"}}); apperr.CodeOf(err) != apperr.CodeValidationFailed {
		t.Fatalf("rename whose record is too large: %v, want validation_failed", err)
	}
}

func TestRenameGroupOntoADeletedNameContinuesItsVersions(t *testing.T) {
	w := newWorld(t)
	w.given(commands.CreateUser{Username: "ann"}, commands.CreateUser{Username: "bob"},
		commands.CreateGroup{Name: "old"}, commands.AddMember{Group: "old", Username: "bob"},
		commands.DeleteGroup{Name: "old"}, // old: tombstone v3
		commands.CreateGroup{Name: "new"}, commands.AddMember{Group: "new", Username: "ann"})
	g := w.renamedGroup(step{cmd: commands.RenameGroup{Name: "new", NewName: "old"}})
	if g.Version != 4 || g.LastDeletedVersion != 3 {
		t.Fatalf("renamed onto a name deleted at v3: v%d last deleted v%d, want v4, v3", g.Version, g.LastDeletedVersion)
	}
	if got := w.membersOf("old"); len(got) != 1 || got["ann"] == "" {
		t.Errorf("members of old = %v, want only ann", got)
	}
	back := w.renamedGroup(step{cmd: commands.RenameGroup{Name: "old", NewName: "new"}})
	if back.Version != 5 || back.ID != g.ID || len(back.FormerNames) != 2 {
		t.Errorf("renamed back = v%d %s former %+v, want v5 (past v4), same id, two former names", back.Version, back.ID, back.FormerNames)
	}
}

// TestRenameGroupRacesMembersChanges runs a rename beside joins, a members change and a
// leave of the old name and a user rename of a member: every join that was accepted is a membership of
// the group under its new name, nothing stays under the old one, and every user's group
// pointers name the new key.
func TestRenameGroupRacesMembersChanges(t *testing.T) {
	w := newWorld(t)
	var names []string
	for i := range 14 {
		names = append(names, fmt.Sprintf("m%02d", i))
	}
	w.given(append(usersBatch(names), commands.CreateGroup{Name: "team"},
		commands.ChangeMembers{Group: "team", Add: names[:4]})...)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		joined = map[string]bool{names[0]: true, names[1]: true, names[2]: true, names[3]: true}
		errs   []error
	)
	run := func(f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	run(func() error {
		_, err := w.exec(t.Context(), step{cmd: commands.ChangeMembers{Group: "team", Add: names[12:]}})
		switch {
		case err == nil:
			mu.Lock()
			joined[names[12]], joined[names[13]] = true, true
			mu.Unlock()
		case apperr.KindOf(err) != apperr.KindNotFound:
			return fmt.Errorf("members change: %w", err)
		}
		return nil
	})
	for _, u := range names[4:12] {
		run(func() error {
			_, err := w.exec(t.Context(), step{cmd: commands.AddMember{Group: "team", Username: u}})
			switch {
			case err == nil:
				mu.Lock()
				joined[u] = true
				mu.Unlock()
			case apperr.KindOf(err) != apperr.KindNotFound:
				return fmt.Errorf("join %s: %w", u, err)
			}
			return nil
		})
	}
	run(func() error {
		_, err := w.exec(t.Context(), step{cmd: commands.RemoveMember{Group: "team", Username: names[0]}})
		if err == nil {
			mu.Lock()
			delete(joined, names[0])
			mu.Unlock()
		} else if apperr.KindOf(err) != apperr.KindNotFound {
			return fmt.Errorf("leave: %w", err)
		}
		return nil
	})
	renamedUser := names[1] + ".x"
	run(func() error {
		_, err := w.exec(t.Context(), step{cmd: commands.RenameUser{Username: names[1], NewUsername: renamedUser}})
		return err
	})
	run(func() error {
		_, err := w.exec(t.Context(), step{cmd: commands.RenameGroup{Name: "team", NewName: "Crew"}})
		return err
	})
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if joined[names[1]] {
		delete(joined, names[1])
		joined[renamedUser] = true
	}
	got := w.membersOf("crew")
	if want := slices.Sorted(maps.Keys(joined)); !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
		t.Errorf("members of crew = %v, want %v", slices.Sorted(maps.Keys(got)), want)
	}
	if left := w.membersOf("team"); len(left) != 0 {
		t.Errorf("members left under the old name: %v", left)
	}
	for u := range joined {
		if gs := w.groupsOf(u); !slices.Equal(gs, []string{"crew"}) {
			t.Errorf("groups of %s = %v, want [crew]", u, gs)
		}
	}
}
