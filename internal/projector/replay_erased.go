package projector

import (
	"context"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
)

// erasedLives gives the as-of index of the new read table the life items of the people
// erased in the tenant, from what each erasure kept in its ledger entry: their user
// partitions, which the index would rebuild them from, are gone, while the rewritten group
// records still pair their memberships by the hash of their id. Without the life item an
// erased member's intervals would not end at the user's deletion.
func (r *Replayer) erasedLives(ctx context.Context, row dynamo.Tenant, users string) error {
	lives, err := erasure.NewLedger(r.db, r.names).AsOfLives(ctx, row.SystemID, row.TenantID)
	if dynamo.IsTableMissing(err) {
		return nil // no ledger in this stage: nobody was erased
	}
	if err != nil {
		return err
	}
	return asof.PutErasedLives(ctx, r.db, users, lives)
}
