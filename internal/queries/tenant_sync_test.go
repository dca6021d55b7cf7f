package queries

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
)

// TestTheTenantSaysWhetherItsRealmTakesRenames: GET of a tenant answers
// keycloak.username_changes as keycloak-sync's last reconcile recorded it in the sync
// status — unknown before any keycloak-sync ran (no table) and before a reconcile read
// the realm, then refused or allowed as the realm's settings changed — read on every GET,
// not held by the tenant cache.
func TestTheTenantSaysWhetherItsRealmTakesRenames(t *testing.T) {
	svc, f := fixture(t, nil, Options{})
	ctx := t.Context()
	says := func(want string) {
		t.Helper()
		tn, err := svc.Tenant(ctx, "acme", "eu")
		if err != nil {
			t.Fatal(err)
		}
		if tn.Keycloak == nil || tn.Keycloak.UsernameChanges != want {
			t.Fatalf("keycloak %+v, want username_changes %q", tn.Keycloak, want)
		}
		b, err := json.Marshal(tn)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"username_changes":"`+want+`"`) {
			t.Fatalf("the answer %s does not say username_changes %q", b, want)
		}
	}
	says("unknown") // no keycloak-sync has made its table

	statuses := dynamo.NewSyncStatuses(f.DB, f.Names)
	if err := dynamo.EnsureTable(ctx, f.DB, dynamo.KeycloakSyncStatusTable(statuses.Table())); err != nil {
		t.Fatal(err)
	}
	says("unknown") // no row
	now := time.Now()
	if err := statuses.RecordParked(ctx, "acme", "eu", true, now, now.Add(time.Minute), "realm unreachable", "ks-1"); err != nil {
		t.Fatal(err)
	}
	says("unknown") // a row that does not say
	if err := statuses.RecordReconcile(ctx, "acme", "eu", dynamo.ReconcileOutcome{At: now, UsernameChanges: "refused"}); err != nil {
		t.Fatal(err)
	}
	says("refused")
	if err := statuses.RecordReconcile(ctx, "acme", "eu", dynamo.ReconcileOutcome{At: now, UsernameChanges: "allowed"}); err != nil {
		t.Fatal(err)
	}
	says("allowed")
	// A reconcile that could not read the settings leaves the last answer.
	if err := statuses.RecordReconcile(ctx, "acme", "eu", dynamo.ReconcileOutcome{At: now}); err != nil {
		t.Fatal(err)
	}
	says("allowed")
}
