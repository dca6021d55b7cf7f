package main

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// indexMembersEvery is how often the long-running projector looks for tenants whose
// member index is not complete yet (tenants from before it; docs/erasure.md, "The member
// index"). A round that finds them all complete reads the tenant list and nothing else.
const indexMembersEvery = time.Minute

// backfillMemberIndex runs, until ctx ends, a bounded round of the member index's backfill
// every indexMembersEvery: each round works on the tenants without the mark for at most
// the indexer's budget, and a lease keeps two projectors off one tenant.
func (a *app) backfillMemberIndex(ctx context.Context) {
	every(ctx, indexMembersEvery, func() {
		if err := a.memberIndexRound(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("member index backfill: round failed", zap.Error(err))
		}
	})
}

// every runs round every d (the first after d) until ctx ends.
func every(ctx context.Context, d time.Duration, round func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		round()
	}
}

// memberIndexRound is one bounded round of the backfill over the stage's tenants.
func (a *app) memberIndexRound(ctx context.Context) error {
	rows, err := a.tenants.List(ctx)
	if err != nil {
		return err
	}
	res, err := a.indexer.Round(ctx, rows)
	if res.Worked > 0 || res.Left > 0 {
		a.log.Info("member index backfill round", zap.Int("tenants", res.Tenants), zap.Int("complete", res.Complete),
			zap.Int("worked_on", res.Worked), zap.Int("left_for_the_next_round", res.Left))
	}
	return err
}
