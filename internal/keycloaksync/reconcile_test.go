package keycloaksync

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestReconcileOffsetsSpreadTenants: a thousand tenants' reconciles start spread over the
// interval, each at the same offset every round, rather than all at once.
func TestReconcileOffsetsSpreadTenants(t *testing.T) {
	const interval = 15 * time.Minute
	const tenants = 1000
	buckets := make([]int, 15) // one a minute
	for i := range tenants {
		key := fmt.Sprintf("sys/tenant-%04d", i)
		o := offset(key, interval)
		if o < 0 || o >= interval {
			t.Fatalf("%s: offset %s outside the interval", key, o)
		}
		if again := offset(key, interval); again != o {
			t.Fatalf("%s: offset %s, then %s: not stable", key, o, again)
		}
		buckets[o/time.Minute]++
	}
	for minute, n := range buckets {
		// An even spread puts 67 in each minute; a burst would put hundreds in one.
		if n < 30 || n > 110 {
			t.Fatalf("minute %d of the interval starts %d of %d reconciles: %v", minute, n, tenants, buckets)
		}
	}
}

// TestOneProcessReconcilesATenantARound: of several keycloak-sync processes, the first to
// claim a tenant reconciles it this round; the claim opens again when it expires.
func TestOneProcessReconcilesATenantARound(t *testing.T) {
	w := newWorld(t)
	if err := dynamo.EnsureTable(t.Context(), w.db, dynamo.KeycloakSyncStatusTable(w.names.KeycloakSyncStatus())); err != nil {
		t.Fatal(err)
	}
	st := dynamo.NewSyncStatuses(w.db, w.names)
	now := time.Now()
	claim := func(owner string, at time.Time) bool {
		ok, err := st.ClaimReconcile(t.Context(), "acme", "t1", owner, at, at.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim("a", now) {
		t.Fatal("the first claim was refused")
	}
	if claim("b", now.Add(time.Second)) {
		t.Fatal("a second process claimed a tenant already claimed")
	}
	if !claim("a", now.Add(2*time.Second)) {
		t.Fatal("the owner could not claim again")
	}
	if !claim("b", now.Add(2*time.Minute)) {
		t.Fatal("an expired claim was not open to another process")
	}
}

// TestAParkedTenantIsNeverClaimed: a park is known to every keycloak-sync process through
// the status row: no process claims the parked tenant's reconcile; a resume by another
// process does not clear it; a park whose process died (not renewed) lapses, and the tenant
// is claimed again; the process that parked clears it when it resumes or stops.
func TestAParkedTenantIsNeverClaimed(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	if err := dynamo.EnsureTable(ctx, w.db, dynamo.KeycloakSyncStatusTable(w.names.KeycloakSyncStatus())); err != nil {
		t.Fatal(err)
	}
	st := dynamo.NewSyncStatuses(w.db, w.names)
	now := time.Now()
	claim := func(owner string, at time.Time) bool {
		ok, err := st.ClaimReconcile(ctx, "acme", "t1", owner, at, at.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	healthA, err := NewHealth(st, "a", prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	healthA.Failed(ctx, "acme", "t1", errors.New("keycloak: 503"), 0)
	for _, owner := range []string{"a", "b"} {
		if claim(owner, now) {
			t.Fatalf("process %s claimed the reconcile of a parked tenant", owner)
		}
	}
	// Another process's resume is not this park's end.
	if err := st.RecordParked(ctx, "acme", "t1", false, time.Time{}, time.Time{}, "", "b"); err != nil {
		t.Fatal(err)
	}
	if claim("b", now) {
		t.Fatal("a resume by another process cleared the park")
	}
	rows, err := st.List(ctx)
	if err != nil || len(rows) != 1 || !rows[0].ParkedNow(now) {
		t.Fatalf("status rows %+v (%v), want the tenant parked", rows, err)
	}
	// Process a dies: its park is not renewed and lapses (forgetAfter past its probe).
	later := now.Add(forgetAfter + 2*minParkFor)
	if rows[0].ParkedNow(later) {
		t.Fatal("a park that was not renewed does not lapse")
	}
	if !claim("b", later) {
		t.Fatal("the tenant of a dead process's lapsed park cannot be claimed")
	}

	// A stopping process clears its parks.
	healthA.Failed(ctx, "acme", "t1", errors.New("keycloak: 503"), 0)
	if claim("b", time.Now()) {
		t.Fatal("claimed while parked again")
	}
	healthA.Release(ctx)
	if !claim("b", time.Now()) {
		t.Fatal("the park of a stopped process was left in the status row")
	}
}

// TestReconcileMetricsPerTenant: /metrics tells, per tenant, what the last reconcile found
// and repaired, and when one last succeeded.
func TestReconcileMetricsPerTenant(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	w.exec(commands.CreateUser{Username: "ann", Email: "ann@example.com"})
	w.exec(commands.CreateUser{Username: "bob", Email: "bob@example.com"})
	row, err := dynamo.NewTenants(w.db, w.names).Get(ctx, w.tenant.System, w.tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	row.UsersTable = w.names.Users(w.tenant.System, w.tenant.ID, 0)
	row.ActivitiesTable = w.names.Activities(w.tenant.System, w.tenant.ID, 0)
	// The read model the reconcile reads the directory from, and the realm the event path
	// filled.
	p := projections.New(w.db, projections.Options{})
	for _, user := range []string{"user#ann", "user#bob"} {
		for _, rec := range w.records(user) {
			env, err := dynamo.DecodeRecord(events.NewRegistry(), rec.NewImage)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Apply(ctx, projections.Tables{Users: row.UsersTable, Activities: row.ActivitiesTable}, env); err != nil {
				t.Fatal(err)
			}
			w.apply(rec)
		}
	}
	bob, ok := w.kc.UserByUsername(testRealm, "bob")
	if !ok {
		t.Fatal("bob is not in the realm")
	}
	if err := w.kc.UpdateUser(testRealm, bob.ID, func(u *keycloaktest.User) { u.Email = "changed@example.com" }); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	r, err := NewReconciler(ReconcilerConfig{Realms: NewRealms(dynamo.NewTenants(w.db, w.names), w.box, NewHTTPClient(), nil, zap.NewNop()),
		DB: w.db, Store: w.store, Registerer: reg, Log: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	drift := func(outcome string) float64 {
		return testutil.ToFloat64(r.lastDrift.WithLabelValues(w.tenant.System, w.tenant.ID, outcome))
	}
	if _, err := r.Tenant(ctx, row, Options{}); err != nil {
		t.Fatal(err)
	}
	if found, repaired := drift("found"), drift("repaired"); found != 1 || repaired != 1 {
		t.Fatalf("after repairing bob's email: found %v, repaired %v; want 1 and 1", found, repaired)
	}
	if u, _ := w.kc.UserByUsername(testRealm, "bob"); u.Email != "bob@example.com" {
		t.Fatalf("bob's email is %q after the reconcile", u.Email)
	}
	if testutil.ToFloat64(r.lastSuccess.WithLabelValues(w.tenant.System, w.tenant.ID)) == 0 {
		t.Fatal("no time of the last successful reconcile")
	}
	if _, err := r.Tenant(ctx, row, Options{}); err != nil {
		t.Fatal(err)
	}
	if found, repaired := drift("found"), drift("repaired"); found != 0 || repaired != 0 {
		t.Fatalf("a reconcile of an unchanged realm: found %v, repaired %v; want 0 and 0", found, repaired)
	}
	if n, err := testutil.GatherAndCount(reg, "ssodir_keycloak_last_reconcile_drift"); err != nil || n != 3 {
		t.Fatalf("%d series of the last reconcile's drift (%v), want found, repaired and stale of the one tenant", n, err)
	}
}
