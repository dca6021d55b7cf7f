package keycloak

import (
	"errors"
	"net/http"
	"testing"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

func writes(f *fixture) int {
	n := 0
	for _, r := range f.kc.AdminRequests() {
		if r.Method != http.MethodGet {
			n++
		}
	}
	return n
}

func TestSyncerUsers(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, keycloaktest.Config{}, nil)
	s := NewSyncer(f.c, SyncerOptions{})
	jdoe := DirectoryUser{ID: "u1", Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", Active: true,
		Attributes: map[string][]string{"dept": {"eng"}}, Groups: []string{"ignored"}}

	must(t, s.UpsertUser(ctx, jdoe))
	u, ok := f.kc.UserByUsername(realm, "jdoe")
	if !ok || u.Attributes[AttrSsodirID][0] != "u1" || u.Attributes["dept"][0] != "eng" || !u.Enabled {
		t.Fatalf("created user: %+v", u)
	}

	t.Run("an event delivered twice writes nothing the second time", func(t *testing.T) {
		f.kc.ResetRequests()
		must(t, s.UpsertUser(ctx, jdoe))
		if n := writes(f); n != 0 {
			t.Fatalf("%d writes for an unchanged user", n)
		}
	})
	t.Run("a changed email is sent", func(t *testing.T) {
		jdoe.Email = "jane@example.com"
		must(t, s.UpsertUser(ctx, jdoe))
		if got, _ := f.kc.User(realm, u.ID); got.Email != "jane@example.com" || got.FirstName != "Jane" {
			t.Fatalf("after update: %+v", got)
		}
	})
	t.Run("a user recreated behind the cache's back is found by ssodir_id", func(t *testing.T) {
		must(t, f.kc.DeleteUser(realm, u.ID))
		id, err := f.kc.CreateUser(realm, keycloaktest.User{Username: "jdoe", Email: "old@example.com", Enabled: true,
			Attributes: map[string][]string{AttrSsodirID: {"u1"}}})
		must(t, err)
		must(t, s.UpsertUser(ctx, jdoe))
		if got, _ := f.kc.User(realm, id); got.Email != "jane@example.com" {
			t.Fatalf("the recreated user was not updated: %+v", got)
		}
		u.ID = id
	})
	t.Run("a password is set on the user found by ssodir_id", func(t *testing.T) {
		must(t, s.UpsertUserPassword(ctx, jdoe, &PasswordChange{Version: 1, Open: opener("a long passphrase")}))
		if pw, ok := f.kc.LastPassword(realm, u.ID); !ok || pw.Value != "a long passphrase" || pw.Temporary {
			t.Fatalf("password: %+v", pw)
		}
	})
	t.Run("a username held by an unmanaged user is a conflict and that user is untouched", func(t *testing.T) {
		_, err := f.kc.CreateUser(realm, keycloaktest.User{Username: "admin", Email: "admin@example.com", Enabled: true})
		must(t, err)
		err = s.UpsertUser(ctx, DirectoryUser{ID: "u2", Username: "admin", Email: "other@example.com", Active: true})
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("err = %v, want ErrConflict", err)
		}
		if got, _ := f.kc.UserByUsername(realm, "admin"); got.Email != "admin@example.com" || got.Attributes[AttrSsodirID] != nil {
			t.Fatalf("the unmanaged user was changed: %+v", got)
		}
	})
	t.Run("on_delete=disable disables, and again changes nothing", func(t *testing.T) {
		must(t, s.DeleteUser(ctx, "u1", 9, OnDeleteDisable))
		if got, _ := f.kc.User(realm, u.ID); got.Enabled {
			t.Fatalf("not disabled: %+v", got)
		}
		f.kc.ResetRequests()
		must(t, s.DeleteUser(ctx, "u1", 9, OnDeleteDisable))
		if n := writes(f); n != 0 {
			t.Fatalf("%d writes for an already disabled user", n)
		}
	})
	t.Run("on_delete=delete deletes, and again is fine", func(t *testing.T) {
		must(t, s.DeleteUser(ctx, "u1", 9, OnDeleteDelete))
		if _, ok := f.kc.User(realm, u.ID); ok {
			t.Fatal("not deleted")
		}
		must(t, s.DeleteUser(ctx, "u1", 9, OnDeleteDelete))
	})
}

func TestSyncerGroupsAndMemberships(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, keycloaktest.Config{}, nil)
	s := NewSyncer(f.c, SyncerOptions{})
	must(t, s.UpsertGroup(ctx, DirectoryGroup{ID: "g1", Name: "admins", Description: "Admins"}))
	must(t, s.UpsertUser(ctx, DirectoryUser{ID: "u1", Username: "jdoe", Active: true}))
	g, _ := f.kc.GroupByName(realm, "admins")
	u, _ := f.kc.UserByUsername(realm, "jdoe")

	must(t, s.AddMember(ctx, "u1", "g1"))
	must(t, s.AddMember(ctx, "u1", "g1"))
	if got, _ := f.kc.GroupByName(realm, "admins"); len(got.Members) != 1 || got.Members[0] != u.ID {
		t.Fatalf("members: %v", got.Members)
	}

	must(t, s.UpsertGroup(ctx, DirectoryGroup{ID: "g1", Name: "admins", Description: "Administrators"}))
	if got, _ := f.kc.GroupByName(realm, "admins"); got.Description != "Administrators" || got.Attributes[AttrSsodirID][0] != "g1" {
		t.Fatalf("group after update: %+v", got)
	}

	// The group is recreated behind the Syncer's back: its cached id is stale.
	must(t, f.kc.DeleteGroup(realm, g.ID))
	newID, err := f.kc.CreateGroup(realm, keycloaktest.Group{Name: "admins", Attributes: map[string][]string{AttrSsodirID: {"g1"}}})
	must(t, err)
	must(t, s.AddMember(ctx, "u1", "g1"))
	if got, _ := f.kc.User(realm, u.ID); len(got.Groups) != 1 || got.Groups[0] != newID {
		t.Fatalf("membership after a stale cache: %v, want [%s]", got.Groups, newID)
	}

	must(t, s.RemoveMember(ctx, "u1", "g1"))
	must(t, s.RemoveMember(ctx, "u1", "g1"))
	if got, _ := f.kc.User(realm, u.ID); len(got.Groups) != 0 {
		t.Fatalf("still a member: %v", got.Groups)
	}
	if err := s.AddMember(ctx, "u-missing", "g1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("joining a user not in Keycloak: %v, want ErrNotFound", err)
	}
	must(t, s.RemoveMember(ctx, "u-missing", "g1"))

	must(t, s.DeleteGroup(ctx, "g1"))
	if _, ok := f.kc.GroupByName(realm, "admins"); ok {
		t.Fatal("group not deleted")
	}
	must(t, s.DeleteGroup(ctx, "g1"))
}
