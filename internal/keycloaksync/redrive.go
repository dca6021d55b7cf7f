package keycloaksync

import (
	"context"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/streams"
)

const (
	// RedriveInterval is how often dead letters are re-driven automatically. Syncing an
	// event again is idempotent (and checked against the write model), so the dead letters
	// of an aggregate flow again by themselves instead of waiting for an operator.
	RedriveInterval = time.Minute
	// redriveConcurrency is how many tenants are re-driven at once, and redriveTimeout how
	// long one tenant's re-drive may take: a slow realm holds up neither the others nor
	// the next round.
	redriveConcurrency = 4
	redriveTimeout     = 2 * time.Minute
)

// RedriveLoop re-drives the dead letters every RedriveInterval until ctx is done, tenant by
// tenant side by side, skipping parked tenants (their realm is failing: their records
// come again when it answers).
func RedriveLoop(ctx context.Context, dl *streams.DeadLetters, h *Handler, log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(RedriveInterval):
		}
		Redrive(ctx, dl, h, log)
	}
}

// Redrive re-drives every tenant's dead letters once.
func Redrive(ctx context.Context, dl *streams.DeadLetters, h *Handler, log *zap.Logger) {
	letters, err := dl.List(ctx, streams.DeadLetterFilter{})
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("list dead letters to re-drive", zap.Error(err))
		}
		return
	}
	var tenants []streams.DeadLetterFilter
	for i, l := range letters {
		if i == 0 || l.System != letters[i-1].System || l.Tenant != letters[i-1].Tenant {
			tenants = append(tenants, streams.DeadLetterFilter{System: l.System, Tenant: l.Tenant})
		}
	}
	var g errgroup.Group
	g.SetLimit(redriveConcurrency)
	for _, f := range tenants {
		if _, parked := h.cfg.Health.Parked(f.System, f.Tenant); parked {
			continue
		}
		g.Go(func() error {
			tctx, cancel := context.WithTimeout(ctx, redriveTimeout)
			defer cancel()
			res, err := dl.Redrive(tctx, f, h.Apply)
			tenant := zap.String("tenant", f.System+"/"+f.Tenant)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("re-drive dead letters", tenant, zap.Error(err))
			case res.Applied > 0 || len(res.Failed) > 0:
				log.Info("re-drove dead letters", tenant, zap.Int("applied", res.Applied), zap.Int("still_failing", len(res.Failed)))
			}
			return nil
		})
	}
	_ = g.Wait()
}
