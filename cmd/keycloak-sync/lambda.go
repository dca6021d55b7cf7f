package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/keycloaksync"
	"github.com/ssodir/ssodir/internal/lambdafn"
	"github.com/ssodir/ssodir/internal/process"
)

// reconcileConcurrency bounds the realms one scheduled reconcile works on at once: a
// round fans out per tenant, and one realm's slowness must not hold the others.
const reconcileConcurrency = 8

// lambda runs keycloak-sync as a Lambda function (docs/aws.md, "Lambda mode"): the
// tenants' streams arrive through event source mappings, the reconcile round and the
// re-drive of dead letters on schedules. The handler is the long-running service's.
func (a *app) lambda(ctx context.Context) error {
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	specs := append([]dynamo.TableSpec{dynamo.ConfigTable(a.names.Config()), dynamo.KeycloakSyncStatusTable(a.statuses.Table())},
		dynamo.StreamTables(a.names.StreamLeases(), a.deadLetterTable())...)
	err := dynamo.EnsureSystemTables(tctx, a.clients.DB, process.TableSettings(a.cfg.Common), specs...)
	cancel()
	if err != nil {
		return fmt.Errorf("prepare tables: %w", err)
	}
	dl := deadletters.New(a.clients.DB, a.deadLetterTable(), consumer)
	// Records the mappings give up on reconcile their tenant at once.
	discards, err := esm.NewRecovery(esm.Recovery{Consumer: consumer, Labels: a.names.ParseCommands, OnGap: a.onGap,
		Log: a.log.Named("esm")}, nil)
	if err != nil {
		return err
	}
	lambdafn.Start(&lambdafn.Function{
		Discards: discards,
		Log:      a.log,
		// A membership can come before its user exists in Keycloak (another aggregate,
		// synced beside it): more attempts than the projector before a dead letter.
		Stream: esm.New(esm.Config{Labels: a.names.ParseCommands, DeadLetters: dl, Handle: a.handler.HandleMessage,
			MaxAttempts: 5, Backoff: 500 * time.Millisecond, Log: a.log.Named("esm")}),
		Tasks: map[string]func(context.Context) error{
			"reconcile":            a.reconcileRound,
			"redrive-dead-letters": func(ctx context.Context) error { keycloaksync.Redrive(ctx, dl, a.handler, a.log); return nil },
		},
	})
	return nil
}

// reconcileRound reconciles every tenant with Keycloak settings, a few realms at a time;
// one tenant's failure is logged and does not stop the others.
func (a *app) reconcileRound(ctx context.Context) error {
	rows, err := a.reconciler.Tenants(ctx, "", "")
	if err != nil {
		return err
	}
	var (
		mu     sync.Mutex
		failed []error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reconcileConcurrency)
	for _, row := range rows {
		g.Go(func() error {
			if _, err := a.reconciler.Tenant(gctx, row, keycloaksync.Options{}); err != nil {
				a.log.Warn("reconcile failed", zap.String("tenant", row.SystemID+"/"+row.TenantID), zap.Error(err))
				mu.Lock()
				failed = append(failed, fmt.Errorf("%s/%s: %w", row.SystemID, row.TenantID, err))
				mu.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	a.log.Info("reconcile round done", zap.Int("tenants", len(rows)), zap.Int("failed", len(failed)))
	if len(failed) == len(rows) && len(rows) > 0 {
		return errors.Join(failed...)
	}
	return nil
}
