package keycloaksync

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
)

// TestTheStatusSaysWhetherTheRealmTakesRenames: each reconcile reads the realm's settings
// and records in the tenant's sync status whether it lets usernames change — refused while
// "Edit username" is off (Keycloak's default, where a rename waits as a dead letter),
// allowed once it is on.
func TestTheStatusSaysWhetherTheRealmTakesRenames(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	if err := dynamo.EnsureTable(ctx, w.db, dynamo.KeycloakSyncStatusTable(w.names.KeycloakSyncStatus())); err != nil {
		t.Fatal(err)
	}
	st := dynamo.NewSyncStatuses(w.db, w.names)
	rows := dynamo.NewTenants(w.db, w.names)
	row, err := rows.Get(ctx, w.tenant.System, w.tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	row.UsersTable = w.names.Users(w.tenant.System, w.tenant.ID, 0)
	r, err := NewReconciler(ReconcilerConfig{Realms: NewRealms(rows, w.box, NewHTTPClient(), nil, zap.NewNop()),
		DB: w.db, Store: w.store, Statuses: st, Registerer: prometheus.NewRegistry(), Log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	status := func() string {
		t.Helper()
		if _, err := r.Tenant(ctx, row, Options{}); err != nil {
			t.Fatal(err)
		}
		all, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range all {
			if s.SystemID == w.tenant.System && s.TenantID == w.tenant.ID {
				return s.UsernameChanges
			}
		}
		t.Fatal("no status row")
		return ""
	}
	if got := status(); got != "refused" {
		t.Errorf("a realm without Edit username: %q, want refused", got)
	}
	if err := w.kc.AllowEditUsername(testRealm, true); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != "allowed" {
		t.Errorf("a realm with Edit username: %q, want allowed", got)
	}
}
