package keycloaksync

import (
	"context"
	"errors"
	"testing"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// TestAGroupRenameRenamesTheKeycloakGroupInPlace: the Keycloak group keeps its id (role
// mappings, links) and its members. While another group of the realm holds the new name
// Keycloak refuses (409); the record then fails and leaves the realm as it was — no
// second group, no delete — until the name is free.
func TestAGroupRenameRenamesTheKeycloakGroupInPlace(t *testing.T) {
	w := newWorld(t)
	w.exec(commands.CreateUser{Username: "ann", Email: "ann@example.com"})
	w.exec(commands.CreateGroup{Name: "Staff", Description: "everyone"})
	w.exec(commands.AddMember{Group: "staff", Username: "ann"})
	w.apply(w.records("user#ann")...)
	groupRecs := w.records("group#staff")
	w.apply(groupRecs[0]) // the group; its membership record comes only after the rename
	before, ok := w.kc.GroupByName(testRealm, "Staff")
	if !ok || len(before.Members) != 0 {
		t.Fatalf("before the rename the realm holds %+v", before)
	}
	squatter, err := w.kc.CreateGroup(testRealm, keycloaktest.Group{Name: "Team"})
	if err != nil {
		t.Fatal(err)
	}

	w.exec(commands.RenameGroup{Name: "staff", NewName: "Team"})
	rename := w.records("group#team")
	if len(rename) != 1 {
		t.Fatalf("records of the new name: %d, want the rename's", len(rename))
	}
	err = w.handler.Apply(context.Background(), rename[0])
	if !errors.Is(err, keycloak.ErrConflict) {
		t.Fatalf("the rename onto a name another Keycloak group holds: %v, want a conflict", err)
	}
	if g, ok := w.kc.GroupByName(testRealm, "Staff"); !ok || g.ID != before.ID || len(w.kc.Groups(testRealm)) != 2 {
		t.Fatalf("after the refusal the realm holds %+v, want Staff unchanged beside Team", w.kc.Groups(testRealm))
	}

	if err := w.kc.DeleteGroup(testRealm, squatter); err != nil {
		t.Fatal(err)
	}
	w.apply(rename...) // the re-drive
	groups := w.kc.Groups(testRealm)
	if len(groups) != 1 || groups[0].ID != before.ID || groups[0].Name != "Team" || groups[0].Description != "everyone" {
		t.Fatalf("after the re-drive the realm holds %+v, want the Keycloak group %s renamed in place", groups, before.ID)
	}
	ann, _ := w.kc.UserByUsername(testRealm, "ann")
	if len(groups[0].Members) != 1 || groups[0].Members[0] != ann.ID {
		t.Errorf("members after the rename: %v, want ann", groups[0].Members)
	}
	// The records of the old name, delivered late or again, change nothing.
	w.apply(groupRecs...)
	if groups := w.kc.Groups(testRealm); len(groups) != 1 || groups[0].Name != "Team" || len(groups[0].Members) != 1 {
		t.Fatalf("after the old name's records again the realm holds %+v", groups)
	}
	// A change of case is a rename in place too.
	w.exec(commands.RenameGroup{Name: "team", NewName: "TEAM"})
	w.apply(w.records("group#team")...)
	if groups := w.kc.Groups(testRealm); len(groups) != 1 || groups[0].ID != before.ID || groups[0].Name != "TEAM" {
		t.Fatalf("after a change of case the realm holds %+v", groups)
	}
}
