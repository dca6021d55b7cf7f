package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ssodir/ssodir/internal/servicetest"
)

// A provisioning answered 202 is followed on the query API until the tenant is active; the
// user is told it is provisioning, and the output is the active tenant.
func TestTenantsCreateWaitsForAnAcceptedTenant(t *testing.T) {
	t.Parallel()
	const provisioning = `{"system_id":"acme","tenant_id":"eu","status":"provisioning","keycloak":null,"created_at":"2026-11-23T10:00:00Z","updated_at":"2026-11-23T10:00:00Z"}`
	const active = `{"system_id":"acme","tenant_id":"eu","status":"active","keycloak":null,"created_at":"2026-11-23T10:00:00Z","updated_at":"2026-11-23T10:00:01Z"}`
	command := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/systems/acme/tenants" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(provisioning))
	}))
	defer command.Close()
	var gets atomic.Int32
	query := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/systems/acme/tenants/eu" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		body := provisioning
		if gets.Add(1) >= 2 {
			body = active
		}
		_, _ = w.Write([]byte(body))
	}))
	defer query.Close()

	c := newCtl(t, &servicetest.Services{CommandURL: command.URL, QueryURL: query.URL})
	r := c.run("", "tenants", "create", "eu", "-o", "json", "--wait", "30s")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	if !strings.Contains(r.errOut, "provisioning") {
		t.Errorf("the user was not told the tenant is provisioning: %q", r.errOut)
	}
	if got := decodeJSON[map[string]any](t, r.out); got["status"] != "active" {
		t.Errorf("output %s, want the active tenant", r.out)
	}
	if n := gets.Load(); n < 2 {
		t.Errorf("%d GETs of the tenant, want it polled until active", n)
	}

	// --wait too short for a tenant that stays provisioning: a failure, not a hang.
	gets.Store(-1000)
	r = c.run("", "tenants", "create", "eu", "--wait", "1500ms")
	if r.code == 0 {
		t.Fatalf("a tenant still provisioning after --wait exited 0\n%s%s", r.out, r.errOut)
	}
}
