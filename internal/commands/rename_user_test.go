package commands_test

import (
	"slices"
	"testing"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// renamed runs a rename that must be accepted.
func (w *world) renamed(st step) events.User {
	w.t.Helper()
	out, err := w.exec(w.t.Context(), st)
	if err != nil {
		w.t.Fatalf("rename %+v: %v", st.cmd, err)
	}
	return out.(events.User)
}

func (w *world) groupsOf(username string) []string {
	w.t.Helper()
	_, groups, err := w.real.UserMemberships(w.t.Context(), w.tenant, username)
	if err != nil {
		w.t.Fatal(err)
	}
	slices.Sort(groups)
	return groups
}

func (w *world) membersOf(group string) map[string]string {
	w.t.Helper()
	ms, err := w.real.GroupMembers(w.t.Context(), w.tenant, group)
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range ms {
		out[m.Username] = m.UserID
	}
	return out
}

func TestRenameUserKeepsThePersonAndFreesTheOldName(t *testing.T) {
	w := newWorld(t)
	w.given(
		commands.CreateUser{Username: "ann", Email: "ann@example.com", FirstName: "Ann"},
		commands.CreateGroup{Name: "Admins"}, commands.CreateGroup{Name: "ops"},
		commands.AddMember{Group: "admins", Username: "ann"}, commands.AddMember{Group: "ops", Username: "ann"},
		commands.UpdateUser{Username: "ann", LastName: ptr("Smith")},
	)
	before, err := w.real.LoadUser(t.Context(), w.tenant, "ann")
	if err != nil {
		t.Fatal(err)
	}
	u := w.renamed(step{cmd: commands.RenameUser{Username: "ann", NewUsername: "Ann.Smith@Example.com"}, ifMatch: before.State.Version})

	if u.ID != before.State.ID || u.Username != "ann.smith@example.com" || u.Version != before.State.Version+1 {
		t.Fatalf("renamed user = %s %q v%d, want %s %q v%d", u.ID, u.Username, u.Version, before.State.ID, "ann.smith@example.com", before.State.Version+1)
	}
	if len(u.FormerNames) != 1 || u.FormerNames[0].Username != "ann" || !u.FormerNames[0].Until.Equal(u.NamedAt) {
		t.Errorf("former names = %+v, want ann until %s", u.FormerNames, u.NamedAt)
	}
	e := w.record(events.KindUser, u.Username, u.Version)
	p, ok := e.Payload.(*events.UserRenamed)
	if e.Type != events.UserRenamedType || !ok {
		t.Fatalf("record = %s %T, want user.renamed", e.Type, e.Payload)
	}
	if ch := e.Changes["username"]; ch.Old != "ann" || ch.New != u.Username || len(e.Changes) != 1 {
		t.Errorf("changes = %+v, want only username ann → %s", e.Changes, u.Username)
	}
	if p.PreviousUsername != "ann" || p.PreviousVersion != before.State.Version || len(p.Memberships) != 2 {
		t.Errorf("payload = %+v", p)
	}
	old, err := w.real.LoadUser(t.Context(), w.tenant, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if old.Live() || old.State.Version != before.State.Version+1 {
		t.Errorf("old name = live %v v%d, want a tombstone at v%d", old.Live(), old.State.Version, before.State.Version+1)
	}
	for _, g := range []string{"admins", "ops"} {
		if got := w.membersOf(g); len(got) != 1 || got[u.Username] != u.ID {
			t.Errorf("members of %s = %v, want only %s", g, got, u.Username)
		}
	}
	if got := w.groupsOf(u.Username); !slices.Equal(got, []string{"admins", "ops"}) {
		t.Errorf("groups of the new name = %v", got)
	}
	if got := w.groupsOf("ann"); len(got) != 0 {
		t.Errorf("groups of the old name = %v, want none", got)
	}

	// The old name 404s and is free; the email stays the person's.
	if _, err := w.exec(t.Context(), step{cmd: commands.SetUserActive{Username: "ann", Active: false}}); apperr.KindOf(err) != apperr.KindNotFound {
		t.Errorf("deactivate the old name: %v, want 404", err)
	}
	if _, err := w.exec(t.Context(), step{cmd: commands.CreateUser{Username: "other", Email: "ann@example.com"}}); apperr.CodeOf(err) != apperr.CodeEmailTaken {
		t.Errorf("create with the person's email: %v, want email_taken", err)
	}
	w.given(commands.CreateUser{Username: "ann", Email: "new.ann@example.com"},
		commands.UpdateUser{Username: u.Username, Email: ptr("ann.s@example.com")},
		commands.CreateUser{Username: "third", Email: "ann@example.com"})
	again, err := w.real.LoadUser(t.Context(), w.tenant, "ann")
	if err != nil {
		t.Fatal(err)
	}
	if again.State.ID == u.ID || again.State.Version != before.State.Version+2 {
		t.Errorf("new ann = %s v%d, want a new id at v%d", again.State.ID, again.State.Version, before.State.Version+2)
	}
	if got := w.membersOf("admins"); len(got) != 1 {
		t.Errorf("members of admins after the old name was taken again = %v", got)
	}
	// The memberships are the person's under the new name: removing works, once.
	w.given(commands.RemoveMember{Group: "ops", Username: u.Username})
	if got := w.membersOf("ops"); len(got) != 0 {
		t.Errorf("members of ops = %v, want none", got)
	}
	w.given(commands.DeleteUser{Username: u.Username})
	if got := w.membersOf("admins"); len(got) != 0 {
		t.Errorf("members of admins after the renamed user's delete = %v, want none", got)
	}
}

func TestRenameUserRefusals(t *testing.T) {
	w := newWorld(t)
	w.given(commands.CreateUser{Username: "ann"}, commands.CreateUser{Username: "bob"})
	cases := []struct {
		name string
		st   step
		want string
	}{
		{"a rename onto a live user is username_taken", step{cmd: commands.RenameUser{Username: "ann", NewUsername: "BOB"}}, apperr.CodeUsernameTaken},
		{"a stale If-Match is version_mismatch", step{cmd: commands.RenameUser{Username: "ann", NewUsername: "carl"}, ifMatch: 7}, apperr.CodeVersionMismatch},
		{"an unknown user is not_found", step{cmd: commands.RenameUser{Username: "nobody", NewUsername: "carl"}}, apperr.CodeNotFound},
		{"a new name breaking the rule is validation_failed", step{cmd: commands.RenameUser{Username: "ann", NewUsername: "a b"}}, apperr.CodeValidationFailed},
		{"an empty new name is validation_failed", step{cmd: commands.RenameUser{Username: "ann", NewUsername: ""}}, apperr.CodeValidationFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := w.exec(t.Context(), c.st)
			if apperr.CodeOf(err) != c.want {
				t.Fatalf("err = %v, want %s", err, c.want)
			}
		})
	}
	for _, name := range []string{"ann", "bob"} {
		u, err := w.real.LoadUser(t.Context(), w.tenant, name)
		if err != nil || !u.Live() || u.State.Version != 1 {
			t.Errorf("%s after the refusals = live %v v%d (%v), want unchanged", name, u.Live(), u.State.Version, err)
		}
	}
	// The same name is no change: no new version.
	u := w.renamed(step{cmd: commands.RenameUser{Username: "ann", NewUsername: "ANN"}})
	if u.Version != 1 {
		t.Errorf("rename to the same name = v%d, want v1", u.Version)
	}
}

func TestRenameUserOntoADeletedNameContinuesItsVersions(t *testing.T) {
	w := newWorld(t)
	w.given(commands.CreateUser{Username: "old"},
		commands.UpdateUser{Username: "old", FirstName: ptr("a")}, commands.UpdateUser{Username: "old", FirstName: ptr("b")},
		commands.DeleteUser{Username: "old"}, // old: tombstone v4
		commands.CreateUser{Username: "ann"})
	u := w.renamed(step{cmd: commands.RenameUser{Username: "ann", NewUsername: "old"}})
	if u.Version != 5 {
		t.Fatalf("renamed onto a name deleted at v4: v%d, want v5", u.Version)
	}
	if e := w.record(events.KindUser, "old", 5); e.Type != events.UserRenamedType {
		t.Errorf("old v5 = %s", e.Type)
	}
	// And back: the person's own former name, now a tombstone at v2.
	back := w.renamed(step{cmd: commands.RenameUser{Username: "old", NewUsername: "ann"}})
	if back.Version != 6 || back.ID != u.ID || len(back.FormerNames) != 2 {
		t.Errorf("renamed back = v%d %s former %+v, want v6, same id, two former names", back.Version, back.ID, back.FormerNames)
	}
}
