package keycloaksync

import (
	"context"
	"errors"
	"testing"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/keycloak"
)

// TestARenameRenamesTheKeycloakUserInPlace: the Keycloak user keeps its id (sessions,
// links, credentials) and its groups. A realm that does not allow editing usernames (as
// Keycloak's default) refuses; the record then fails with ErrUsernameReadOnly and leaves
// the realm as it was — no second user, no delete — until the realm allows it.
func TestARenameRenamesTheKeycloakUserInPlace(t *testing.T) {
	w := newWorld(t)
	w.exec(commands.CreateUser{Username: "ann", Email: "ann@example.com", FirstName: "Ann"})
	w.exec(commands.CreateGroup{Name: "Staff"})
	w.exec(commands.AddMember{Group: "staff", Username: "ann"})
	w.apply(w.records("user#ann")...)
	groupRecs := w.records("group#staff")
	w.apply(groupRecs[0]) // the group; its membership record comes only after the rename
	before, ok := w.kc.UserByUsername(testRealm, "ann")
	if !ok || len(before.Groups) != 0 {
		t.Fatalf("before the rename the realm holds %+v", before)
	}

	w.exec(commands.RenameUser{Username: "ann", NewUsername: "ann.smith"})
	rename := w.records("user#ann.smith")
	if len(rename) != 1 {
		t.Fatalf("records of the new name: %d, want the rename's", len(rename))
	}
	err := w.handler.Apply(context.Background(), rename[0])
	if !errors.Is(err, keycloak.ErrUsernameReadOnly) {
		t.Fatalf("the rename in a realm without editUsernameAllowed: %v, want ErrUsernameReadOnly", err)
	}
	if users := w.kc.Users(testRealm); len(users) != 1 || users[0].ID != before.ID || users[0].Username != "ann" {
		t.Fatalf("after the refusal the realm holds %+v, want ann unchanged", users)
	}

	if err := w.kc.AllowEditUsername(testRealm, true); err != nil {
		t.Fatal(err)
	}
	w.apply(rename...) // the re-drive
	users := w.kc.Users(testRealm)
	if len(users) != 1 || users[0].ID != before.ID || users[0].Username != "ann.smith" || users[0].FirstName != "Ann" {
		t.Fatalf("after the re-drive the realm holds %+v, want the Keycloak user %s renamed in place", users, before.ID)
	}
	if len(users[0].Groups) != 1 {
		t.Errorf("groups after the rename: %v, want staff", users[0].Groups)
	}
	// The records of the old name, delivered late or again, change nothing.
	w.apply(groupRecs[1:]...)
	w.apply(w.records("user#ann")...)
	if users := w.kc.Users(testRealm); len(users) != 1 || users[0].Username != "ann.smith" || len(users[0].Groups) != 1 {
		t.Fatalf("after the old name's records again the realm holds %+v", users)
	}
}
