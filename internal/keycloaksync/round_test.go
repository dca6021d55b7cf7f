package keycloaksync

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// TestLambdaRoundReachesEveryTenant: in Lambda mode a reconcile round is a scheduled
// invocation with a deadline. With 1,000 tenants (1,000 realms on the Keycloak double) and
// invocations far too short for all of them, each invocation goes on from where the last
// stopped, so one pass reaches every realm; the next pass waits for the interval, and an
// invocation that finds the round held by another does nothing.
func TestLambdaRoundReachesEveryTenant(t *testing.T) {
	const tenants = 1000
	w := newWorld(t)
	ctx := t.Context()
	if err := dynamo.EnsureTable(ctx, w.db, dynamo.KeycloakSyncStatusTable(w.names.KeycloakSyncStatus())); err != nil {
		t.Fatal(err)
	}
	st := dynamo.NewSyncStatuses(w.db, w.names)
	rows := dynamo.NewTenants(w.db, w.names)
	// Every tenant reads its directory from the world's (empty) read table.
	users := w.names.Users(w.tenant.System, w.tenant.ID, 0)
	first, err := rows.Get(ctx, w.tenant.System, w.tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	first.UsersTable = users
	if err := rows.Put(ctx, first, first.RowVersion); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < tenants; i++ {
		tenant, realm := fmt.Sprintf("t%04d", i), fmt.Sprintf("realm%04d", i)
		w.kc.AddRealm(realm, "ssodir-sync", "sync-secret")
		secret, err := w.box.Encrypt(ctx, []byte("sync-secret"), "client_secret:acme/"+tenant)
		if err != nil {
			t.Fatal(err)
		}
		if err := rows.Put(ctx, dynamo.Tenant{SystemID: "acme", TenantID: tenant, Status: dynamo.TenantActive, KeycloakURL: w.kc.URL(),
			KeycloakRealm: realm, ClientID: "ssodir-sync", ClientSecret: secret, UsersTable: users}, 0); err != nil {
			t.Fatal(err)
		}
	}
	health, err := NewHealth(nil, "test", prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReconciler(ReconcilerConfig{Realms: NewRealms(rows, w.box, NewHTTPClient(), nil, zap.NewNop()), Tenants: rows,
		DB: w.db, Store: w.store, Statuses: st, Health: health, Registerer: prometheus.NewRegistry(), Log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	// Every realm answers its reads after 25 ms, so that a reconcile takes about as long as
	// a modest realm's and 1,000 of them need several invocations, also on an idle machine;
	// an invocation is long enough that a loaded one does not cut one realm's reconcile twice.
	w.kc.Inject(keycloaktest.Fault{Method: "GET", PathPrefix: "/admin/realms/", Times: 1 << 30, Delay: 25 * time.Millisecond})
	interval := time.Duration(0)
	invoke := func(owner string) RoundResult {
		t.Helper()
		// Far too short for 1,000 realms.
		ictx, cancel := context.WithTimeout(ctx, 4*time.Second)
		defer cancel()
		res, err := r.Round(ictx, RoundOptions{Owner: owner, Interval: interval, Concurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	reached := func() (n int) {
		statuses, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range statuses {
			if s.LastReconcileAt != "" && s.LastError == "" {
				n++
			}
		}
		return n
	}

	// Rounds (passes) follow each other without a pause; every realm is reconciled before
	// the second ends.
	invocations, passes := 0, 0
	for passes < 2 && reached() < tenants {
		if invocations == 1000 {
			t.Fatalf("%d invocations, %d passes, and %d of %d tenants reconciled", invocations, passes, reached(), tenants)
		}
		if invoke(fmt.Sprintf("invocation-%d", invocations)).PassEnded {
			passes++
		}
		invocations++
	}
	if n := reached(); n != tenants {
		t.Fatalf("two passes reconciled %d of %d tenants", n, tenants)
	}
	if invocations < 2 {
		t.Fatal("one invocation reconciled every tenant: the test shows nothing of a pass that goes on across invocations")
	}

	interval = time.Hour
	// The pass under way ends (unless the last invocation above ended one already).
	for res := (RoundResult{}); !res.PassEnded && !res.NotDue; {
		res = invoke("end of the pass")
	}
	if res := invoke("too-early"); !res.NotDue || res.Reconciled != 0 {
		t.Fatalf("an invocation within the interval: %+v, want nothing due", res)
	}
	if _, ok, err := st.ClaimRound(ctx, "still-running", time.Now(), time.Now().Add(time.Hour)); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if res := invoke("overlapping"); !res.Busy || res.Reconciled != 0 {
		t.Fatalf("an invocation while another holds the round: %+v, want busy", res)
	}
}
