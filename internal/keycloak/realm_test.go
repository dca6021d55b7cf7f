package keycloak

import (
	"testing"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// TestUsernameChangesReadsTheRealm: the realm representation says whether usernames may
// change — refused by default, as in Keycloak, allowed once "Edit username" is on — and a
// service account that may not view the realm learns nothing (unknown, not refused).
func TestUsernameChangesReadsTheRealm(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	ask := func() UsernameChanges {
		t.Helper()
		got, err := f.c.UsernameChanges(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := ask(); got != UsernameChangesRefused {
		t.Errorf("a new realm: %q, want refused", got)
	}
	must(t, f.kc.AllowEditUsername(realm, true))
	if got := ask(); got != UsernameChangesAllowed {
		t.Errorf("Edit username on: %q, want allowed", got)
	}
	must(t, f.kc.SetViewRealm(realm, false))
	if got := ask(); got != UsernameChangesUnknown {
		t.Errorf("without view-realm: %q, want unknown", got)
	}
	bad := New(ClientConfig{BaseURL: f.kc.URL(), Realm: realm, ClientID: clientID, ClientSecret: "wrong"}, nil)
	if got, err := bad.UsernameChanges(t.Context()); err == nil || got != UsernameChangesUnknown {
		t.Errorf("a refused client: %q, %v; want unknown and the error", got, err)
	}
}
