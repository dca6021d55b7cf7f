package keycloaksync

import (
	"fmt"
	"testing"
	"time"
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
