package keycloaksync

import (
	"fmt"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
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
