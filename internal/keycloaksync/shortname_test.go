package keycloaksync

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/keycloak"
)

// TestARealmThatRefusesShortUsernamesSaysSo: the directory allows 1–2 character usernames
// (API.md), while Keycloak's default user profile wants at least 3. A realm that keeps that
// default refuses the user; the record fails with ErrUsernameRefused, whose text (the dead
// letter's reason) says what to change in the realm, and the re-drive after the change
// creates the user. A rename to a short name is refused the same way, in place.
func TestARealmThatRefusesShortUsernamesSaysSo(t *testing.T) {
	w := newWorld(t)
	if err := w.kc.SetUsernameMinLength(testRealm, 3); err != nil {
		t.Fatal(err)
	}
	w.exec(commands.CreateUser{Username: "al", Email: "al@example.com"})
	recs := w.records("user#al")
	err := w.handler.Apply(context.Background(), recs[0])
	if !errors.Is(err, keycloak.ErrUsernameRefused) || !strings.Contains(err.Error(), "User profile") {
		t.Fatalf("a 2-character username in a realm with the default profile: %v, want ErrUsernameRefused naming the setting", err)
	}
	if strings.Contains(err.Error(), "al@example.com") {
		t.Errorf("the reason names the user: %v", err)
	}
	if users := w.kc.Users(testRealm); len(users) != 0 {
		t.Fatalf("the realm holds %+v after the refusal", users)
	}
	if err := w.kc.SetUsernameMinLength(testRealm, 1); err != nil {
		t.Fatal(err)
	}
	w.apply(recs...) // the re-drive
	if _, ok := w.kc.UserByUsername(testRealm, "al"); !ok {
		t.Fatal("the re-drive after the realm allows short usernames did not create the user")
	}

	if err := w.kc.SetUsernameMinLength(testRealm, 3); err != nil {
		t.Fatal(err)
	}
	if err := w.kc.AllowEditUsername(testRealm, true); err != nil {
		t.Fatal(err)
	}
	w.exec(commands.CreateUser{Username: "alice", Email: "alice@example.com"})
	w.apply(w.records("user#alice")...)
	w.exec(commands.RenameUser{Username: "alice", NewUsername: "ab"})
	rename := w.records("user#ab")
	if err := w.handler.Apply(context.Background(), rename[len(rename)-1]); !errors.Is(err, keycloak.ErrUsernameRefused) {
		t.Fatalf("a rename to a 2-character name: %v, want ErrUsernameRefused", err)
	}
	if _, ok := w.kc.UserByUsername(testRealm, "alice"); !ok {
		t.Fatal("the refused rename changed the Keycloak user")
	}
}
