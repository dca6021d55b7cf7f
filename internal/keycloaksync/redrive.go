package keycloaksync

import (
	"context"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/deadletters"
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
func RedriveLoop(ctx context.Context, dl *deadletters.Store, h *Handler, log *zap.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(RedriveInterval):
		}
		Redrive(ctx, dl, h, log)
	}
}

// Redrive re-drives every tenant's dead letters once. It reads one marker per tenant to
// find them, and each tenant's re-drive pages aggregate by aggregate within its budget
// (going on where it stopped the next time).
func Redrive(ctx context.Context, dl *deadletters.Store, h *Handler, log *zap.Logger) {
	var g errgroup.Group
	g.SetLimit(redriveConcurrency)
	err := dl.Tenants(ctx, deadletters.Filter{}, func(t deadletters.Tenant) error {
		if _, parked := h.cfg.Health.Parked(t.System, t.Tenant); parked {
			return nil
		}
		g.Go(func() error {
			res, err := dl.Redrive(ctx, deadletters.Filter{System: t.System, Tenant: t.Tenant}, h.Apply, redriveTimeout)
			tenant := zap.String("tenant", t.System+"/"+t.Tenant)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("re-drive dead letters", tenant, zap.Error(err))
			case res.Applied > 0 || res.FailedCount > 0:
				log.Info("re-drove dead letters", tenant, zap.Int("applied", res.Applied), zap.Int("still_failing", res.FailedCount),
					zap.Bool("more", res.More))
			}
			return nil
		})
		return nil
	})
	if err != nil && ctx.Err() == nil {
		log.Warn("find dead letters to re-drive", zap.Error(err))
	}
	_ = g.Wait()
}
