package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/auth"
	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/console"
	"github.com/ssodir/ssodir/internal/devsignin"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/lambdafn"
	"github.com/ssodir/ssodir/internal/openapi"
	"github.com/ssodir/ssodir/internal/process"
	"github.com/ssodir/ssodir/internal/queries"
	"github.com/ssodir/ssodir/internal/streams"
)

const usage = `usage: query-api [--help]

Serves ssodir's query API (API.md, "Query API") until SIGTERM. It only reads.

Environment:
  SSO_QUERY_ADDR            listen address (default 127.0.0.1:8081)
  SSO_TABLE_PREFIX          table prefix (default mbcsso_dev)
  SSO_CURSOR_KEY            base64 key of at least 32 bytes that signs pagination
                            cursors (required; shared by every query-api instance). The
                            query API never reads SSO_SECRET_KEY or SSO_KMS_KEY_ID.
  SSO_PROGRESS_TOKEN        service token of the projectors' progress feeds; with it the
                            query API follows every projector found in the heartbeat
                            rows, without it X-Min-Version reads poll
  SSO_MIN_VERSION_WAITERS   X-Min-Version reads that may wait at once (default 512)
  SSO_MIN_VERSION_WAITERS_PER_TENANT   the same per tenant (default 128); beyond
                            either cap a read is answered 503 with Retry-After at once
  SSO_BOOTSTRAP_TOKEN       development token with all scopes (off when unset); with
                            it, POST /console/dev-codes (with that token) mints one-time
                            console sign-in codes, redeemed once within a minute
  SSO_OIDC_ISSUER, SSO_OIDC_AUDIENCE   JWT validation
  SSO_CORS_ORIGINS          browser origins allowed to call the API
  SSO_CONSOLE_CLIENT_ID     public OIDC client the web console (/console/) signs in with
  SSO_CONSOLE_COMMAND_API, SSO_CONSOLE_PROJECTOR, SSO_CONSOLE_KEYCLOAK_SYNC
                            http(s) base URLs at which a browser reaches the command API,
                            the projector and keycloak-sync; the console uses these and
                            nothing a link says, and may connect only to them (CSP). Unset:
                            the user may type loopback addresses on the sign-in page.
  SSO_CONSOLE_READ_TIMEOUT  how long the console waits for a read before it says so and
                            offers to try again (default 15s)
  SSO_EVENTS_RETENTION      how long a change-feed cursor stays valid (default 720h; GET
                            /events answers 410 cursor_expired after it)
  SSO_LOG_LEVEL             debug|info|warn|error (default info)
  AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS credential chain
`

// hooks let tests start the real service: learn the bound address (they listen on port 0),
// shorten the X-Min-Version wait and see the reads it makes. The zero value is production.
type hooks struct {
	// onRoutes learns every route the service serves.
	onRoutes       func([]*echo.Route)
	onListen       func(addr string)
	minVersionWait time.Duration
	// wrapDB, when set, wraps the DynamoDB client the queries use.
	wrapDB func(queries.DB) queries.DB
}

// feedStaleAfter leaves out a projector whose heartbeat row has not moved for this long (one
// that died with no peer to delete its row).
const feedStaleAfter = time.Minute

func run(ctx context.Context, args []string, env config.Env, stdout io.Writer, h hooks) error {
	if len(args) > 0 {
		switch args[0] {
		case "--help", "-h", "help":
			_, err := io.WriteString(stdout, usage)
			return err
		}
		return fmt.Errorf("unknown argument %q (see --help)", args[0])
	}
	cfg, err := config.LoadQueryAPI(env)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log, err := process.NewLogger("query-api", cfg.LogLevel)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	if cfg.SecretKeySet {
		log.Warn("SSO_SECRET_KEY is set but the query API never uses it: remove it from this process's environment")
	}

	if config.InLambda(env) {
		// X-Min-Version by polling only: no projector feed in Lambda mode.
		cfg.ProgressToken = ""
	}
	e, err := newServer(ctx, cfg, log, h)
	if err != nil {
		return err
	}
	if h.onRoutes != nil {
		h.onRoutes(e.Routes())
	}
	if config.InLambda(env) {
		lambdafn.Start(&lambdafn.Function{HTTP: e, Log: log})
		return nil
	}
	return process.HTTPService{Addr: cfg.Addr, Log: log, Echo: e, OnListen: h.onListen}.Run(ctx)
}

// newServer is the query API's echo instance, ready to serve but not listening.
func newServer(ctx context.Context, cfg config.QueryAPI, log *zap.Logger, h hooks) (*echo.Echo, error) {
	clients, err := process.NewClients(ctx, "query-api", cfg.Common)
	if err != nil {
		return nil, err
	}
	names := dynamo.Names{Prefix: cfg.TablePrefix}
	var db queries.DB = clients.DB
	if h.wrapDB != nil {
		db = h.wrapDB(db)
	}
	svc, err := queries.New(db, names, cfg.CursorKey, queries.Options{
		MinVersionWait: h.minVersionWait, MaxWaiters: cfg.MaxWaiters, MaxTenantWaiters: cfg.MaxTenantWaiters,
		EventsRetention:  cfg.EventsRetention,
		HistoryRetention: cfg.HistoryRetention,
	})
	if err != nil {
		return nil, err
	}
	if cfg.ProgressToken != "" {
		// Every projector publishes its feed's URL in its heartbeat row.
		svc.FollowProjectors(ctx, &http.Client{}, cfg.ProgressToken, func(ctx context.Context) ([]string, error) {
			return streams.OwnerAddresses(ctx, clients.DB, names.StreamLeases(), "projector", feedStaleAfter)
		}, log)
	} else {
		log.Info("SSO_PROGRESS_TOKEN is not set: X-Min-Version reads poll the read tables instead of following the projectors")
	}
	authn, err := auth.New(ctx, auth.Config{BootstrapToken: cfg.BootstrapToken, OIDCIssuer: cfg.OIDCIssuer, OIDCAudience: cfg.OIDCAudience},
		&http.Client{Timeout: 10 * time.Second}, log)
	if err != nil {
		return nil, err
	}

	reg := process.NewRegistry()
	reg.MustRegister(svc.Collectors()...)
	e := httpapi.NewEcho(httpapi.Options{Log: log, Metrics: httpapi.NewMetrics(reg), Service: "query-api", CORSOrigins: cfg.CORSOrigins})
	queries.NewHandlers(svc).Register(e, httpapi.RequireScope(authn, auth.ScopeRead))
	httpapi.RegisterProbes(e, func(ctx context.Context) error { return dynamo.Ping(ctx, clients.DB, names.Config()) }, reg)
	openapi.Register(e)
	if err := console.Register(e, console.Config{OIDCIssuer: cfg.OIDCIssuer, ClientID: cfg.ConsoleClientID,
		CommandAPI: cfg.ConsoleCommandAPI, Projector: cfg.ConsoleProjector, KeycloakSync: cfg.ConsoleKeycloakSync,
		ReadTimeout: cfg.ConsoleReadTimeout}); err != nil {
		return nil, err
	}
	if cfg.BootstrapToken != "" {
		// make run's console link carries a one-time code, never the token itself.
		devsignin.Register(e, devsignin.New(cfg.BootstrapToken, nil), httpapi.RequireScope(authn, auth.ScopeRead))
	}

	return e, nil
}
