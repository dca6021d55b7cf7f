package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

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

// reconcileRound is one scheduled invocation of the reconcile round: it goes on from where
// the last invocation stopped, a few realms at a time, until shortly before the
// invocation's deadline (keycloaksync.Reconciler.Round); a new pass over every tenant
// starts at most once per SSO_RECONCILE_INTERVAL. One tenant's failure is logged and does
// not stop the others; an invocation that finds another still working on the round does
// nothing.
func (a *app) reconcileRound(ctx context.Context) error {
	res, err := a.reconciler.Round(ctx, keycloaksync.RoundOptions{Owner: processName() + "/" + uuid.NewString(),
		Interval: a.cfg.ReconcileInterval, Concurrency: reconcileConcurrency})
	if err != nil {
		return err
	}
	if res.Busy {
		a.log.Info("reconcile round: another invocation is working on it")
	}
	return nil
}
