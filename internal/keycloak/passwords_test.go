package keycloak

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

func opener(pw string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return []byte(pw), nil }
}

// resets counts the reset-password requests the double received.
func resets(kc *keycloaktest.Server) int {
	n := 0
	for _, r := range kc.AdminRequests() {
		if r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/reset-password") {
			n++
		}
	}
	return n
}

// TestSyncerSendsAPasswordOncePerChange: Keycloak records which password change it holds
// (ssodir_password_version), so a change delivered again — or an older one delivered late —
// sends nothing, and a realm with a password-history policy never fails the resend that a
// crash between the reset and its mark makes.
func TestSyncerSendsAPasswordOncePerChange(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, keycloaktest.Config{}, nil)
	must(t, f.kc.SetPasswordHistory(realm, 3))
	s := NewSyncer(f.c, SyncerOptions{})
	ann := DirectoryUser{ID: "u1", Username: "ann", Email: "ann@example.com", Active: true, Version: 1}
	first := &PasswordChange{Version: 1, Open: opener("first passphrase")}

	for range 5 {
		must(t, s.UpsertUserPassword(ctx, ann, first))
	}
	u, _ := f.kc.UserByUsername(realm, "ann")
	if n := resets(f.kc); n != 1 {
		t.Fatalf("%d reset-password calls for one change delivered five times, want 1", n)
	}
	if u.Attributes[AttrSsodirPasswordVersion][0] != "1" || u.Attributes[AttrSsodirPasswordPending] != nil {
		t.Fatalf("password marks %v, want version 1 and nothing pending", u.Attributes)
	}

	t.Run("a later change is sent, an older one delivered after it is not", func(t *testing.T) {
		f.kc.ResetRequests()
		ann.Version = 2
		must(t, s.UpsertUserPassword(ctx, ann, &PasswordChange{Version: 2, Open: opener("second passphrase")}))
		must(t, s.UpsertUserPassword(ctx, ann, first))
		if pw, _ := f.kc.LastPassword(realm, u.ID); pw.Value != "second passphrase" || resets(f.kc) != 1 {
			t.Fatalf("password %q after %d resets, want the second one after 1", pw.Value, resets(f.kc))
		}
	})
	t.Run("a reconcile of the user keeps the marks", func(t *testing.T) {
		ann.FirstName = "Ann"
		must(t, s.UpsertUser(ctx, ann))
		if got, _ := f.kc.User(realm, u.ID); got.FirstName != "Ann" || got.Attributes[AttrSsodirPasswordVersion][0] != "2" {
			t.Fatalf("after a profile update: %+v", got)
		}
	})
	t.Run("a crash between the reset and its mark resends once, and the history policy's 400 is success", func(t *testing.T) {
		f.kc.ResetRequests()
		ann.Version = 3
		third := &PasswordChange{Version: 3, Open: opener("third passphrase")}
		// The reset lands; its answer never comes back, and the sync gives up.
		f.kc.Inject(keycloaktest.Fault{Method: http.MethodPut, PathPrefix: keycloaktest.AdminPath(realm, "/users/"+u.ID+"/reset-password"), Hang: true, Apply: true})
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := s.UpsertUserPassword(cctx, ann, third)
		cancel()
		if err == nil {
			t.Fatal("the sync whose reset never answered succeeded")
		}
		if pw, _ := f.kc.LastPassword(realm, u.ID); pw.Value != "third passphrase" {
			t.Fatalf("the lost reset did not land (%q): the test shows nothing", pw.Value)
		}
		for range 3 {
			must(t, s.UpsertUserPassword(ctx, ann, third))
		}
		got, _ := f.kc.User(realm, u.ID)
		if n := resets(f.kc); n != 2 || got.Attributes[AttrSsodirPasswordVersion][0] != "3" || got.Attributes[AttrSsodirPasswordPending] != nil {
			t.Fatalf("%d resets, marks %v: want the lost one and one resend, then version 3", n, got.Attributes)
		}
	})
	t.Run("a password the policy refuses on its first sending stays refused", func(t *testing.T) {
		ann.Version = 4
		again := &PasswordChange{Version: 4, Open: opener("second passphrase")}
		for range 2 {
			if err := s.UpsertUserPassword(ctx, ann, again); !PasswordRecentlyUsed(err) {
				t.Fatalf("a reused password: %v, want the realm's invalidPasswordHistoryMessage", err)
			}
		}
		if pw, _ := f.kc.LastPassword(realm, u.ID); pw.Value != "third passphrase" {
			t.Fatalf("password %q, want the third still", pw.Value)
		}
	})
}
