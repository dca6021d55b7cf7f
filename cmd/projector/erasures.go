package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/erasure"
)

// erasures is `projector erasures reapply`: the erasure ledger re-applied to restored
// tables (docs/erasure.md, "Backups").
func (a *app) erasures(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "reapply" {
		return fmt.Errorf("usage: projector erasures reapply --system S --tenant T [--commands-table N --users-table N --activities-table N] [--idempotency-table N --dead-letters-table N --sync-status-table N --events-table N]")
	}
	fs := flag.NewFlagSet("erasures reapply", flag.ContinueOnError)
	fs.SetOutput(stdout)
	system := fs.String("system", "", "system id")
	tenant := fs.String("tenant", "", "tenant id")
	var r erasure.Restored
	fs.StringVar(&r.CommandsTable, "commands-table", "", "the restored write table (default: the tenant's)")
	fs.StringVar(&r.UsersTable, "users-table", "", "the restored read table (default: the tenant's)")
	fs.StringVar(&r.ActivitiesTable, "activities-table", "", "the restored activity table (default: the tenant's)")
	fs.StringVar(&r.IdempotencyTable, "idempotency-table", "", "a restored copy of the stage's Idempotency-Key table (default: the stage's)")
	fs.StringVar(&r.DeadLettersTable, "dead-letters-table", "", "a restored copy of the stage's dead-letter table (default: the stage's)")
	fs.StringVar(&r.SyncStatusTable, "sync-status-table", "", "a restored copy of the stage's Keycloak sync status table (default: the stage's)")
	fs.StringVar(&r.EventsTable, "events-table", "", "a restored copy of the stage's change feed table, {p}_events (default: the stage's)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *system == "" || *tenant == "" {
		return fmt.Errorf("erasures reapply: --system and --tenant are required")
	}
	res, err := a.eraser.Reapply(ctx, *system, *tenant, r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%d erasures in the ledger of %s/%s; %d erased users found again and erased\n", res.Erasures, *system, *tenant, res.Users)
	return err
}

// resumeEvery is how often the long-running projector looks for stalled erasures.
const resumeEvery = 30 * time.Second

// resumeErasures resumes, until ctx ends, the erasures that nothing has worked on for
// their bound (a record dead-lettered, a shard lost with its parked record): the
// stream record normally carries the erasure out (docs/erasure.md, "The bound").
func (a *app) resumeErasures(ctx context.Context) {
	stalled := erasure.StalledAfter(a.cfg.ErasureSettle)
	every(ctx, resumeEvery, func() {
		res, err := a.eraser.ResumePending(ctx, stalled)
		if err != nil && ctx.Err() == nil {
			a.log.Warn("erasures: resume failed", zap.Error(err))
		}
		if res.Resumed > 0 {
			a.log.Info("stalled erasures resumed", zap.Int("resumed", res.Resumed), zap.Int("finished", res.Finished))
		}
	})
}
