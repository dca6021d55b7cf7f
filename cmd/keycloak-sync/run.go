package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/schollz/progressbar/v3"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/keycloaksync"
	"github.com/ssodir/ssodir/internal/process"
	"github.com/ssodir/ssodir/internal/streams"
)

const usage = `usage:
  keycloak-sync                   run as a service until SIGTERM
  keycloak-sync reconcile [--system S [--tenant T]] [--dry-run]
                                  one full reconcile; --dry-run prints the plan and writes nothing
  keycloak-sync dead-letters list|redrive [--system S [--tenant T]]
                                  records that could not be synced; redrive applies them in order
  keycloak-sync status [--system S [--tenant T]] [-o table|json]
                                  per tenant: last reconcile, drift found and repaired,
                                  parked (realm failing) and why, records waiting
  keycloak-sync --help

Environment: SSO_TABLE_PREFIX, SSO_KEYCLOAK_SYNC_ADDR (default 127.0.0.1:8083),
SSO_SECRET_KEY or SSO_KMS_KEY_ID (to open client secrets and passwords),
SSO_RECONCILE_INTERVAL (default 15m), SSO_RECONCILE_MAX_DELETE_SHARE (default 0.2: a
reconcile refuses to delete more than this share of a realm's managed users),
SSO_STREAM_LEASE (default 10s), SSO_STREAM_POLL (default 250ms),
SSO_STREAM_IDLE_POLL_MAX (default 1s), SSO_STREAM_LEASE_SCAN (default 30s),
SSO_STREAM_CONSUMERS (default 2), SSO_KEYCLOAK_PARK_MAX (default 1h: past it a parked
tenant's records become dead letters, re-driven once its realm answers), SSO_LOG_LEVEL,
SSO_CORS_ORIGINS (browser origins, e.g. the web console's, that may read /metrics,
/healthz, /readyz), AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB,
AWS_ENDPOINT_URL_DYNAMODB_STREAMS.
`

const consumer = "keycloak-sync"

type listening func(addr string)

type app struct {
	cfg        config.KeycloakSync
	log        *zap.Logger
	clients    *dynamo.Clients
	names      dynamo.Names
	tenants    *dynamo.Tenants
	statuses   *dynamo.SyncStatuses
	reg        *prometheus.Registry
	realms     *keycloaksync.Realms
	health     *keycloaksync.Health
	reconciler *keycloaksync.Reconciler
	handler    *keycloaksync.Handler
}

func run(ctx context.Context, args []string, env config.Env, stdout io.Writer, onListen listening) error {
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
		_, err := io.WriteString(stdout, usage)
		return err
	}
	cfg, err := config.LoadKeycloakSync(env)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log, err := process.NewLogger("keycloak-sync", cfg.LogLevel)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	clients, err := process.NewClients(ctx, process.Role("keycloak-sync", args), cfg.Common)
	if err != nil {
		return err
	}
	box, err := process.NewSecrets(ctx, cfg.Common, clients.AWS)
	if err != nil {
		return err
	}
	a := &app{cfg: cfg, log: log, clients: clients, names: dynamo.Names{Prefix: cfg.TablePrefix}, reg: process.NewRegistry()}
	a.tenants = dynamo.NewTenants(clients.DB, a.names)
	metrics, err := keycloak.NewMetrics(a.reg)
	if err != nil {
		return err
	}
	a.statuses = dynamo.NewSyncStatuses(clients.DB, a.names)
	owner := processName()
	if a.health, err = keycloaksync.NewHealth(a.statuses, owner, a.reg, log); err != nil {
		return err
	}
	a.health.WithParkMax(cfg.ParkMax)
	store := dynamo.NewCommandStore(clients.DB, a.names, events.NewRegistry(), 0)
	a.realms = keycloaksync.NewRealms(a.tenants, box, keycloaksync.NewHTTPClient(), metrics, log)
	a.reconciler, err = keycloaksync.NewReconciler(keycloaksync.ReconcilerConfig{
		Realms: a.realms, Tenants: a.tenants, DB: clients.DB, Store: store, Statuses: a.statuses, Health: a.health,
		MaxDeleteShare: cfg.MaxDeleteShare, Owner: owner, Registerer: a.reg, Log: log,
	})
	if err != nil {
		return err
	}
	a.handler = keycloaksync.NewHandler(keycloaksync.HandlerConfig{
		Realms: a.realms, Secrets: box, Registry: events.NewRegistry(), Store: store, Health: a.health, Park: streams.Park,
		Erasures: erasure.NewLedger(a.clients.DB, a.names),
	})

	if len(args) == 0 && config.InLambda(env) {
		return a.lambda(ctx)
	}
	if len(args) == 0 {
		return a.serve(ctx, onListen)
	}
	switch args[0] {
	case "reconcile":
		// A reconcile records its outcome for `keycloak-sync status`, also when no service
		// has created the status table yet.
		if err := dynamo.EnsureSystemTables(ctx, a.clients.DB, process.TableSettings(a.cfg.Common), dynamo.KeycloakSyncStatusTable(a.statuses.Table())); err != nil {
			return fmt.Errorf("prepare the status table: %w", err)
		}
		return a.reconcile(ctx, args[1:], stdout)
	case "dead-letters":
		return deadletters.Command(ctx, args[1:], stdout, deadletters.New(a.clients.DB, a.deadLetterTable(), consumer), a.handler.Apply)
	case "status":
		return a.status(ctx, args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q (see --help)", args[0])
}

func (a *app) deadLetterTable() string { return a.names.DeadLetters() }

// onGap repairs a gap in what was synced (stream data lost, or records an event source
// mapping gave up on) by a full reconcile of the tenant, at once.
func (a *app) onGap(ctx context.Context, gap streams.Gap) error {
	a.log.Error("stream data lost before it was synced: reconciling the tenant",
		zap.String("tenant", gap.Stream.System+"/"+gap.Stream.Tenant), zap.String("shard", gap.ShardID), zap.String("reason", gap.Reason))
	rows, err := a.reconciler.Tenants(ctx, gap.Stream.System, gap.Stream.Tenant)
	if err != nil || len(rows) == 0 {
		return err
	}
	_, err = a.reconciler.Tenant(ctx, rows[0], keycloaksync.Options{})
	return err
}

func (a *app) serve(ctx context.Context, onListen listening) error {
	leases, deadLetters := a.names.StreamLeases(), a.deadLetterTable()
	tctx, cancel := context.WithTimeout(ctx, time.Minute)
	specs := append([]dynamo.TableSpec{dynamo.ConfigTable(a.names.Config()), dynamo.KeycloakSyncStatusTable(a.statuses.Table()), dynamo.ErasuresTable(a.names.Erasures())},
		dynamo.StreamTables(leases, deadLetters)...)
	err := dynamo.EnsureSystemTables(tctx, a.clients.DB, process.TableSettings(a.cfg.Common), specs...)
	cancel()
	if err != nil {
		return fmt.Errorf("prepare tables: %w", err)
	}
	dl := deadletters.New(a.clients.DB, deadLetters, consumer)
	sub, err := streams.NewSubscriber(streams.Config{
		Consumer: consumer, LeaseTable: leases, DeadLetters: dl,
		Source: dynamo.NewTenantStreams(a.tenants), Streams: a.clients.Streams, DB: a.clients.DB,
		OnGap:  a.onGap,
		Logger: a.log, Registerer: a.reg, TimestampAttribute: "recorded_at_ms", LeaseDuration: a.cfg.LeaseDuration,
		// New tenants start projecting within seconds; the Config table is small.
		SourceInterval: 2 * time.Second,
		PollInterval:   a.cfg.PollInterval,
		ShardReadRate:  streams.ShardReadRateFor(a.clients.LocalStreams),
		IdlePollMax:    a.cfg.IdlePollMax, LeaseScanInterval: a.cfg.LeaseScanInterval, Consumers: a.cfg.Consumers,
		// A membership can arrive before its user or group exists in Keycloak (they are
		// other aggregates, synced side by side): give such records minutes, not seconds,
		// before they become dead letters.
		// A realm that fails as a whole parks its tenant (keycloaksync.Health), which does
		// not use up attempts.
		MaxAttempts: 12, RetryBackoff: 500 * time.Millisecond, MaxRetryBackoff: 30 * time.Second,
	})
	if err != nil {
		return err
	}
	return process.Consumer{
		Service: "keycloak-sync", Addr: a.cfg.Addr, Log: a.log, Registry: a.reg, Subscriber: sub,
		Handle:   a.handler.HandleMessage,
		Ready:    func(ctx context.Context) error { return dynamo.Ping(ctx, a.clients.DB, a.names.Config()) },
		OnListen: onListen, CORSOrigins: a.cfg.CORSOrigins,
		Background: []func(context.Context){
			func(ctx context.Context) { a.reconciler.Loop(ctx, a.cfg.ReconcileInterval) },
			func(ctx context.Context) { keycloaksync.RedriveLoop(ctx, dl, a.handler, a.log) },
			// A stopping process clears its parks in the status rows; one that dies lets
			// them lapse (parked_until).
			func(ctx context.Context) { <-ctx.Done(); a.health.Release(context.WithoutCancel(ctx)) },
		},
	}.Run(ctx)
}

func (a *app) reconcile(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(stdout)
	system := fs.String("system", "", "only this system")
	tenant := fs.String("tenant", "", "only this tenant (with --system)")
	dryRun := fs.Bool("dry-run", false, "print the plan, change nothing")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || (*tenant != "" && *system == "") {
		return errors.New("reconcile: usage: reconcile [--system S [--tenant T]] [--dry-run]")
	}
	rows, err := a.reconciler.Tenants(ctx, *system, *tenant)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintln(stdout, "no tenant with Keycloak settings matches")
		return nil
	}
	var failed []error
	for _, row := range rows {
		opts := keycloaksync.Options{DryRun: *dryRun, Out: stdout, Progress: progress(stdout, row.SystemID+"/"+row.TenantID)}
		plan, err := a.reconciler.Tenant(ctx, row, opts)
		switch {
		case err != nil:
			failed = append(failed, fmt.Errorf("%s/%s: %w", row.SystemID, row.TenantID, err))
		case plan.Empty():
			fmt.Fprintf(stdout, "%s/%s: in step, nothing to do\n", row.SystemID, row.TenantID)
		case *dryRun:
			fmt.Fprintf(stdout, "%s/%s: %d change(s) planned (dry run: nothing written)\n", row.SystemID, row.TenantID, len(plan.Actions))
		default:
			fmt.Fprintf(stdout, "%s/%s: %d change(s) applied\n", row.SystemID, row.TenantID, len(plan.Actions))
		}
	}
	return errors.Join(failed...)
}

// progress draws a bar on a terminal; elsewhere it prints nothing (the plan says enough).
func progress(out io.Writer, label string) func(done, total int) {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	var bar *progressbar.ProgressBar
	return func(done, total int) {
		if bar == nil {
			bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(label),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetPredictTime(true))
		}
		_ = bar.Set(done)
	}
}
