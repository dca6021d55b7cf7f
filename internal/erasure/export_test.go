package erasure

import (
	"context"
	"time"
)

// TakeLease takes an erasure's lease for owner until until, as a call of Step does.
func (l *Ledger) TakeLease(ctx context.Context, system, tenant, id, owner string, until time.Time) (bool, time.Time, error) {
	return l.takeLease(ctx, system, tenant, id, owner, time.Now(), until)
}

// EntryKey is the key of an erasure's ledger entry.
var EntryKey = key
