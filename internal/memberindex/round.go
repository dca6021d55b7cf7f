package memberindex

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/bounded"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// RoundResult says what a Round did.
type RoundResult struct {
	// Tenants is how many active tenants were looked at, Complete how many of them carry
	// the mark at the end, Worked how many this round worked on, Left how many it had no
	// time for.
	Tenants, Complete, Worked, Left int
}

// Round works on the backfill of every active tenant's write table that does not carry
// the mark yet, until the call's soft deadline (its budget, or ctx's deadline less the
// margin): the long-running projector runs one every little while, the Lambda
// projector's resume-erasures task one per run. A table another process holds the lease
// of is left to it. The tables found complete are remembered, so that a round over
// tenants all complete reads nothing.
func (ix *Indexer) Round(ctx context.Context, rows []dynamo.Tenant) (RoundResult, error) {
	ctx = ix.bounded(ctx)
	var res RoundResult
	var errs []error
	for _, row := range rows {
		if row.Status != dynamo.TenantActive || row.CommandsTable == "" {
			continue
		}
		res.Tenants++
		if _, ok := ix.complete.Load(row.CommandsTable); ok {
			res.Complete++
			continue
		}
		if bounded.Passed(ctx) {
			res.Left++
			continue
		}
		p, err := ix.Step(ctx, row.CommandsTable)
		if err != nil {
			ix.opts.Log.Warn("member index backfill failed", zap.String("tenant", row.SystemID+"/"+row.TenantID), zap.Error(err))
			errs = append(errs, err)
			continue
		}
		if p.Complete {
			res.Complete++
		}
		if p.HeldUntil.IsZero() && p.Segs > 0 {
			res.Worked++
			ix.opts.Log.Info("member index backfill", zap.String("tenant", row.SystemID+"/"+row.TenantID), zap.String("progress", p.String()))
		}
	}
	return res, errors.Join(errs...)
}
