package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/eventbridge"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/memberindex"
	"github.com/ssodir/ssodir/internal/process"
	"github.com/ssodir/ssodir/internal/progress"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/projector"
	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/webhooks"
)

const usage = `usage:
  projector                      run as a service until SIGTERM
  projector replay --system S --tenant T [--dry-run] [--keep-old]
                                 rebuild a tenant's views from its command log
  projector dead-letters list    [--system S --tenant T]
  projector dead-letters redrive [--system S --tenant T]
  projector erasures reapply --system S --tenant T [--commands-table N --users-table N
                                 --activities-table N] [--idempotency-table N
                                 --dead-letters-table N --sync-status-table N --events-table N]
                                 erase again, from restored tables, everyone the
                                 erasure ledger has erased
  projector --help

Environment: SSO_TABLE_PREFIX, SSO_PROJECTOR_ADDR (default 127.0.0.1:8082),
SSO_ACTIVITY_RETENTION (default 2160h; 0 keeps forever), SSO_STREAM_LEASE (default
10s: how long a silent process keeps its shards), SSO_STREAM_POLL (default 250ms:
the pause after an empty stream page), SSO_STREAM_IDLE_POLL_MAX (default 1s: the
longest pause on an idle stream), SSO_STREAM_LEASE_SCAN (default 30s), SSO_STREAM_CONSUMERS
(default 2: consumers sharing the Streams budgets), SSO_LOG_LEVEL, SSO_CORS_ORIGINS (browser
origins, e.g. the web console's, that may read /metrics, /healthz, /readyz),
SSO_PROJECTOR_WRITES (puts: a conditional PutItem per view item, the default on AWS;
transactions: 25 at a time, the default against a local endpoint), SSO_STAGE,
SSO_TABLE_PITR, SSO_TABLE_DELETION_PROTECTION, SSO_TABLE_KMS_KEY (a replay's new tables),
SSO_SYSTEM_TABLES (create or existing), SSO_PROGRESS_TOKEN (the token query APIs present to
GET /v1/applied; unset: the feed refuses everyone), SSO_PROGRESS_MAX_SUBSCRIBERS (default 64),
SSO_PROJECTOR_FEED_URL (the feed's URL written in the heartbeat row; default from the listener),
SSO_ERASURE_SETTLE (default 30s: the wait between an erasure's two passes),
SSO_EVENTS_RETENTION (default 720h: how long the change feed keeps a change),
SSO_WEBHOOK_KEY (the command API's, to read the webhooks' secrets; default: derived from
SSO_SECRET_KEY; without either, no webhook is delivered), SSO_WEBHOOKS_ALLOW_PRIVATE (true: webhooks may reach http, private and loopback
addresses; development and tests),
SSO_HISTORY_RETENTION (as the command API's: the expiry scheduler's removals' records),
SSO_EVENTBRIDGE_BUS (an EventBridge bus, name or ARN, every change also goes to; unset: none),
AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_DYNAMODB_STREAMS,
AWS_ENDPOINT_URL_EVENTBRIDGE.
`

// consumer names the projector's leases, checkpoints and dead letters.
const consumer = "projector"

type listening func(addr string)

// app is what every subcommand shares.
type app struct {
	cfg       config.Projector
	log       *zap.Logger
	clients   *dynamo.Clients
	names     dynamo.Names
	tenants   *dynamo.Tenants
	handler   *projector.Handler
	projector *projections.Projector
	eraser    *erasure.Eraser
	// indexer backfills the member index of tenants from before it (memberindex.go).
	indexer *memberindex.Indexer
	// bus publishes the change feed to SSO_EVENTBRIDGE_BUS; nil without one.
	bus *eventbridge.Publisher
	// hooks is the long-running process's webhook deliverer once it runs (nil before, and
	// in Lambda mode): an append wakes it.
	hooks atomic.Pointer[webhooks.Deliverer]
}

func run(ctx context.Context, args []string, env config.Env, stdout io.Writer, onListen listening) error {
	if len(args) > 0 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
		_, err := io.WriteString(stdout, usage)
		return err
	}
	a, err := newApp(ctx, args, env)
	if err != nil {
		return err
	}
	defer func() { _ = a.log.Sync() }()

	if len(args) == 0 && config.InLambda(env) {
		return a.lambda(ctx)
	}
	if len(args) == 0 {
		return a.serve(ctx, onListen)
	}
	switch args[0] {
	case "replay":
		return a.replay(ctx, args[1:], stdout)
	case "dead-letters":
		return a.deadLetters(ctx, args[1:], stdout)
	case "erasures":
		return a.erasures(ctx, args[1:], stdout)
	}
	return fmt.Errorf("unknown command %q (see --help)", args[0])
}

// newApp reads the configuration from env and builds what every subcommand shares.
func newApp(ctx context.Context, args []string, env config.Env) (*app, error) {
	cfg, err := config.LoadProjector(env)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	log, err := process.NewLogger("projector", cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	clients, err := process.NewClients(ctx, process.Role("projector", args), cfg.Common)
	if err != nil {
		return nil, err
	}
	a := &app{cfg: cfg, log: log, clients: clients, names: dynamo.Names{Prefix: cfg.TablePrefix}}
	a.tenants = dynamo.NewTenants(clients.DB, a.names)
	a.projector = projections.New(clients.DB, projections.Options{Retention: cfg.ActivityRetention, SinglePuts: cfg.SinglePuts})
	a.handler = projector.NewHandler(a.tenants, a.projector, events.NewRegistry(), log)
	filter := erasure.NewFilter(erasure.NewLedger(clients.DB, a.names), 0)
	a.eraser = erasure.NewEraser(clients.DB, a.names, a.tenants, events.NewRegistry(),
		erasure.Options{Settle: cfg.ErasureSettle, Filter: filter, Log: log})
	a.handler.Erase(a.eraser, filter)
	a.indexer = memberindex.New(clients.DB, events.NewRegistry(), memberindex.Options{Log: log.Named("memberindex")})
	if a.bus, err = a.busPublisher(); err != nil {
		return nil, err
	}
	feedOpts := changefeed.Options{Retention: cfg.EventsRetention, OnAppend: func(system, tenant string) {
		if a.bus != nil {
			a.bus.Notify()
		}
		if d := a.hooks.Load(); d != nil {
			d.Notify(system, tenant)
		}
	}}
	a.handler.Feed(changefeed.NewAppender(clients.DB, changefeed.TableName(a.names), feedOpts), clients.DB)
	a.handler.Index(asof.New(clients.DB))
	return a, nil
}

func (a *app) leaseTable() string      { return a.names.StreamLeases() }
func (a *app) deadLetterTable() string { return a.names.DeadLetters() }

func (a *app) ensureTables(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	specs := append([]dynamo.TableSpec{dynamo.ConfigTable(a.names.Config()), dynamo.ErasuresTable(a.names.Erasures()),
		changefeed.Table(changefeed.TableName(a.names))}, dynamo.StreamTables(a.leaseTable(), a.deadLetterTable())...)
	if err := dynamo.EnsureSystemTables(ctx, a.clients.DB, process.TableSettings(a.cfg.Common), specs...); err != nil {
		return err
	}
	// The erasure filter reads one ledger item per erased id: those of entries written
	// before the items existed are written once.
	return a.eraser.Ledger().IndexOnce(ctx)
}

func (a *app) serve(ctx context.Context, onListen listening) error {
	if err := a.ensureTables(ctx); err != nil {
		return fmt.Errorf("prepare tables: %w", err)
	}
	reg := process.NewRegistry()
	// The feed's URL goes into this process's heartbeat row once the listener is bound,
	// so that query APIs find every projector without configuration.
	var feedURL atomic.Pointer[string]
	if a.cfg.FeedURL != "" {
		feedURL.Store(&a.cfg.FeedURL)
	}
	listened := func(addr string) {
		if feedURL.Load() == nil {
			u := feedURLOf(addr)
			feedURL.Store(&u)
		}
		if onListen != nil {
			onListen(addr)
		}
	}
	sub, err := streams.NewSubscriber(streams.Config{
		Consumer: consumer,
		Address: func() string {
			if u := feedURL.Load(); u != nil {
				return *u
			}
			return ""
		},
		LeaseTable:         a.leaseTable(),
		DeadLetters:        deadletters.New(a.clients.DB, a.deadLetterTable(), consumer),
		Source:             dynamo.NewTenantStreams(a.tenants),
		Streams:            a.clients.Streams,
		DB:                 a.clients.DB,
		OnGap:              a.handler.OnGap,
		Logger:             a.log,
		Registerer:         reg,
		TimestampAttribute: "recorded_at_ms",
		LeaseDuration:      a.cfg.LeaseDuration,
		// New tenants start projecting within seconds; the Config table is small.
		SourceInterval: 2 * time.Second,
		MaxInFlight:    256,
		PollInterval:   a.cfg.PollInterval,
		ShardReadRate:  streams.ShardReadRateFor(a.clients.LocalStreams),
		IdlePollMax:    a.cfg.IdlePollMax, LeaseScanInterval: a.cfg.LeaseScanInterval, Consumers: a.cfg.Consumers,
	})
	if err != nil {
		return err
	}
	// Query APIs follow this feed (found in the heartbeat rows, with SSO_PROGRESS_TOKEN)
	// to wake the X-Min-Version reads waiting on what the projector writes.
	if a.cfg.ProgressToken == "" {
		a.log.Warn("SSO_PROGRESS_TOKEN is not set: the progress feed refuses every query API, whose X-Min-Version reads poll")
	}
	feed := progress.NewFeed(progress.FeedConfig{Token: a.cfg.ProgressToken, MaxSubscribers: a.cfg.ProgressMaxSubscribers})
	a.handler.Publish(feed)
	deliverWebhooks, err := a.deliverWebhooks(ctx, reg)
	if err != nil {
		return err
	}
	return process.Consumer{
		Service: "projector", Addr: a.cfg.Addr, Log: a.log, Registry: reg, Subscriber: sub,
		Handle:   a.handler.HandleMessage,
		Ready:    func(ctx context.Context) error { return dynamo.Ping(ctx, a.clients.DB, a.names.Config()) },
		OnListen: listened, CORSOrigins: a.cfg.CORSOrigins, NoCORSPaths: []string{progress.Path},
		Routes: func(e *echo.Echo) {
			e.GET(progress.Path, func(c echo.Context) error { return feed.Serve(c.Response(), c.Request()) })
		},
		// The feed's streams end with the service, so that its server can shut down.
		Background: []func(ctx context.Context){
			func(ctx context.Context) { <-ctx.Done(); feed.Close() },
			a.resumeErasures,
			a.backfillMemberIndex,
			deliverWebhooks,
			a.runExpiries,
			a.publishToBus,
		},
	}.Run(ctx)
}

// feedURLOf is the URL of the listener bound at addr as other hosts reach it: the host
// name stands in for an address that means every interface.
func feedURLOf(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		if name, err := os.Hostname(); err == nil {
			host = name
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// tenantFlags parses --system and --tenant (and extra flags) of a subcommand.
func tenantFlags(name string, args []string, out io.Writer, extra func(*flag.FlagSet)) (system, tenant string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&system, "system", "", "system id")
	fs.StringVar(&tenant, "tenant", "", "tenant id")
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return "", "", err
	}
	if fs.NArg() > 0 {
		return "", "", fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if system == "" && tenant != "" {
		return "", "", fmt.Errorf("%s: --tenant needs --system", name)
	}
	return system, tenant, nil
}

func (a *app) deadLetters(ctx context.Context, args []string, stdout io.Writer) error {
	if err := a.ensureTables(ctx); err != nil {
		return err
	}
	return deadletters.Command(ctx, args, stdout, deadletters.New(a.clients.DB, a.deadLetterTable(), consumer), a.handler.Apply)
}
