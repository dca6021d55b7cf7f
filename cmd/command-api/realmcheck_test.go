package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// TestPutKeycloakSaysWhetherTheRealmTakesRenames: PUT /keycloak reads the realm's settings
// with the credentials it was given and answers whether the realm lets usernames change:
// refused while "Edit username" is off (Keycloak's default: renames would wait as dead
// letters), allowed once it is on, unknown when the realm cannot be asked. The settings
// are saved whatever the answer.
func TestPutKeycloakSaysWhetherTheRealmTakesRenames(t *testing.T) {
	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	kc.AddRealm("acme", "ssodir-sync", "sync-secret")
	a := startApp(t, testEnv(t))
	a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": "t1"}).want(t, http.StatusCreated)
	put := func(url, secret string) string {
		t.Helper()
		var out struct {
			Keycloak struct {
				Realm           string `json:"realm"`
				UsernameChanges string `json:"username_changes"`
			} `json:"keycloak"`
		}
		a.do(t, "PUT", "/v1/systems/acme/tenants/t1/keycloak", map[string]any{"url": url, "realm": "acme",
			"client_id": "ssodir-sync", "client_secret": secret}).want(t, http.StatusOK).decode(t, &out)
		if out.Keycloak.Realm != "acme" {
			t.Fatalf("the answer's realm %q", out.Keycloak.Realm)
		}
		return out.Keycloak.UsernameChanges
	}
	if got := put(kc.URL(), "sync-secret"); got != "refused" {
		t.Errorf("a realm without Edit username: %q, want refused", got)
	}
	if err := kc.AllowEditUsername("acme", true); err != nil {
		t.Fatal(err)
	}
	if got := put(kc.URL(), "sync-secret"); got != "allowed" {
		t.Errorf("a realm with Edit username: %q, want allowed", got)
	}
	if got := put(kc.URL(), "wrong-secret"); got != "unknown" {
		t.Errorf("credentials the realm refuses: %q, want unknown", got)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	if got := put(gone.URL, "sync-secret"); got != "unknown" {
		t.Errorf("a Keycloak that does not answer: %q, want unknown", got)
	}
}
