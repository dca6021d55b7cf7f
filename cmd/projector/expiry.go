package main

import (
	"context"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/expiry"
)

// expiries is the scheduler that ends expiring memberships on time (internal/expiry,
// docs/expiry.md): the long-running projector sweeps every expiry.DefaultInterval (one
// process at a time, by the scheduler's lease); in Lambda mode the stage's schedule
// invokes the "expire-memberships" task every minute.
func (a *app) expiries() *expiry.Scheduler {
	store := dynamo.NewCommandStore(a.clients.DB, a.names, events.NewRegistry(), a.cfg.HistoryRetention)
	return &expiry.Scheduler{
		Due:    dynamo.NewExpiries(a.clients.DB, a.names),
		Find:   store,
		Remove: commands.NewRemoveMemberHandler(commands.Deps{Store: store, Now: nowUTC, NewID: uuid.NewString, Log: a.log}),
		Log:    a.log.Named("expiry"),
	}
}

// runExpiries is the long-running process's background sweep.
func (a *app) runExpiries(ctx context.Context) { a.expiries().Run(ctx, 0) }

// expireOnce is the Lambda task: one sweep.
func (a *app) expireOnce(ctx context.Context) error {
	res, err := a.expiries().Sweep(ctx)
	if res.Done > 0 || res.Failed > 0 {
		a.log.Info("expiries swept", zap.Int("done", res.Done), zap.Int("left_for_the_next_run", res.Failed))
	}
	return err
}

func nowUTC() time.Time { return time.Now().UTC() }
