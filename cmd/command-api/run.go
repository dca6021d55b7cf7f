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
	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/commandapi"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/openapi"
	"github.com/ssodir/ssodir/internal/process"
	"github.com/ssodir/ssodir/internal/scim"
	"github.com/ssodir/ssodir/internal/scimtoken"
	"github.com/ssodir/ssodir/internal/webhooks"
)

const usage = `usage: command-api [--help]

Serves ssodir's command API (API.md, "Command API") until SIGTERM.

       command-api backfill-lookups --system S --tenant T

Writes the lookup items (by id, by external id) of the tenant's users and groups created
before ssodir kept them, so that the SCIM endpoints find them; once per such tenant, safe
to run again and while the services run.

Environment:
  SSO_COMMAND_ADDR          listen address (default 127.0.0.1:8080)
  SSO_TABLE_PREFIX          table prefix (default mbcsso_dev)
  SSO_SECRET_KEY            base64 32-byte key for passwords and client secrets, or
  SSO_KMS_KEY_ID            an AWS KMS key id for envelope encryption
  SSO_IDEMPOTENCY_KEY       base64 key of at least 32 bytes for the HMAC that fingerprints
                            Idempotency-Key requests (default: derived from SSO_SECRET_KEY
                            with HKDF; required with SSO_KMS_KEY_ID alone). It is never
                            stored, so a fingerprint kept in the database cannot be
                            brute-forced back to the password in a request body.
  SSO_SCIM_TOKEN_KEY        base64 key of at least 32 bytes for the HMAC under which SCIM
                            tokens are stored (default: derived from SSO_SECRET_KEY with
                            HKDF; required with SSO_KMS_KEY_ID alone). Changing it revokes
                            every SCIM token.
  SSO_BOOTSTRAP_TOKEN       development token with all scopes (off when unset)
  SSO_OIDC_ISSUER, SSO_OIDC_AUDIENCE   JWT validation
  SSO_HISTORY_RETENTION     TTL of config#<version> records (default 0: keep)
  SSO_PROVISION_WAIT        how long POST /tenants waits for the tables before answering
                            202 provisioning (default 5s)
  SSO_PROVISION_RESUME      how often tenants left provisioning are finished (default 30s)
  SSO_CORS_ORIGINS          browser origins allowed to call the API
  SSO_STAGE, SSO_TABLE_PITR, SSO_TABLE_DELETION_PROTECTION, SSO_TABLE_KMS_KEY
                            settings of the tenants' tables (docs/aws.md)
  SSO_SYSTEM_TABLES         create (default) or existing (a stage's stack made them)
  SSO_WEBHOOK_KEY           base64 key of at least 32 bytes that encrypts the webhooks'
                            secrets (default: derived from SSO_SECRET_KEY with HKDF; without
                            either, no webhook routes); the projector needs the same
  SSO_WEBHOOKS_ALLOW_PRIVATE  true: webhooks may be http and reach private and loopback
                            addresses (development and tests; default false)
  <VARIABLE>_SECRET_ARN     read SSO_IDEMPOTENCY_KEY (or another key) from Secrets Manager
  SSO_LOG_LEVEL             debug|info|warn|error (default info)
  AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB, AWS credential chain
`

// hooks let tests start the real service: learn the bound address (they listen on port 0)
// and read the logs. The zero value is production.
type hooks struct {
	// onRoutes learns every route the service serves.
	onRoutes func([]*echo.Route)
	onListen func(addr string)
	// logs receives the JSON log lines instead of stderr.
	logs io.Writer
}

func run(ctx context.Context, args []string, env config.Env, stdout io.Writer, h hooks) error {
	if len(args) > 0 && args[0] == "backfill-lookups" {
		return backfillLookups(ctx, args[1:], env, stdout)
	}
	for _, a := range args {
		if a == "--help" || a == "-h" || a == "help" {
			_, err := io.WriteString(stdout, usage)
			return err
		}
		return fmt.Errorf("unknown argument %q (see --help)", a)
	}
	cfg, err := config.LoadCommandAPI(env)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	log, err := process.NewLoggerTo("command-api", cfg.LogLevel, h.logs)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	lambda := config.InLambda(env)
	if lambda {
		// A function is frozen between invocations: the scheduled task resume-provisioning
		// finishes tenants left provisioning, not a background loop.
		cfg.ProvisionResume = -1
	}
	e, err := newServer(ctx, cfg, log)
	if err != nil {
		return err
	}
	if h.onRoutes != nil {
		h.onRoutes(e.Routes())
	}
	if lambda {
		return runLambda(ctx, cfg, log, e)
	}
	return process.HTTPService{Addr: cfg.Addr, Log: log, Echo: e, OnListen: h.onListen}.Run(ctx)
}

// newServer is the command API's echo instance, ready to serve but not listening; the
// shared tables exist when it returns.
func newServer(ctx context.Context, cfg config.CommandAPI, log *zap.Logger) (*echo.Echo, error) {
	clients, err := process.NewClients(ctx, "command-api", cfg.Common)
	if err != nil {
		return nil, err
	}
	box, err := process.NewSecrets(ctx, cfg.Common, clients.AWS)
	if err != nil {
		return nil, err
	}
	fingerprintKey := cfg.IdempotencyKey
	if fingerprintKey == nil {
		if fingerprintKey, err = commands.DeriveFingerprintKey(cfg.SecretKey); err != nil {
			return nil, err
		}
	}
	fingerprints, err := commands.NewFingerprinter(fingerprintKey)
	if err != nil {
		return nil, err
	}
	scimKey := cfg.ScimTokenKey
	if scimKey == nil {
		if scimKey, err = scimtoken.DeriveKey(cfg.SecretKey); err != nil {
			return nil, err
		}
	}
	scimHasher, err := scimtoken.NewHasher(scimKey)
	if err != nil {
		return nil, err
	}
	names := dynamo.Names{Prefix: cfg.TablePrefix}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = dynamo.EnsureSharedTables(startCtx, clients.DB, names, process.TableSettings(cfg.Common))
	if err == nil {
		// Webhooks live in the change feed's table (internal/webhooks).
		err = dynamo.EnsureSystemTables(startCtx, clients.DB, process.TableSettings(cfg.Common), changefeed.Table(changefeed.TableName(names)))
	}
	cancel()
	if err != nil {
		return nil, fmt.Errorf("prepare shared tables: %w", err)
	}
	authn, err := auth.New(ctx, auth.Config{BootstrapToken: cfg.BootstrapToken, OIDCIssuer: cfg.OIDCIssuer, OIDCAudience: cfg.OIDCAudience},
		&http.Client{Timeout: 10 * time.Second}, log)
	if err != nil {
		return nil, err
	}

	reg := process.NewRegistry()
	e := httpapi.NewEcho(httpapi.Options{Log: log, Metrics: httpapi.NewMetrics(reg), Service: "command-api", CORSOrigins: cfg.CORSOrigins})
	store := dynamo.NewCommandStore(clients.DB, names, events.NewRegistry(), cfg.HistoryRetention)
	tenants := dynamo.NewTenantStore(clients.DB, names).WithTableSettings(process.TableSettings(cfg.Common)).WithTableQuota(cfg.TableQuota)
	if cfg.Lambda.Enabled() {
		tenants.WithMappings(process.NewMappings(clients.AWS, cfg.Lambda, log))
	}
	gate := commands.NewTenantGate(tenants)
	// The SCIM port reads a token's row once a minute per process, not on every request;
	// a revocation through this process forgets it here at once (auth.ScimTokenCache).
	scimTokens := auth.NewScimTokenCache(dynamo.NewScimTokenStore(clients.DB, names), 0, time.Now)
	var hooks *webhooks.Store
	if hookBox, err := webhooks.NewBox(cfg.WebhookKey, cfg.SecretKey); err != nil {
		log.Warn("no webhook routes: SSO_WEBHOOK_KEY is not set", zap.Error(err))
	} else {
		hooks = webhooks.NewStore(clients.DB, changefeed.TableName(names), hookBox, cfg.EventsRetention, nil)
	}
	commandapi.Register(e, commandapi.Deps{
		Auth:         authn,
		Store:        store,
		Tenants:      tenants,
		TenantGate:   gate,
		Secrets:      box,
		Clock:        time.Now,
		Fingerprints: fingerprints,
		ScimTokens:   scimTokens, ScimTokenHasher: scimHasher,
		Log:     log.Named("commands"),
		Context: ctx, ProvisionWait: cfg.ProvisionWait, ProvisionResume: cfg.ProvisionResume,
		Webhooks:      hooks,
		WebhookPolicy: webhooks.Policy{AllowPrivate: cfg.WebhooksAllowPrivate},
		RealmCheck: func(ctx context.Context, k commands.KeycloakSettings) string {
			got, err := keycloak.CheckUsernameChanges(ctx, k.URL, k.Realm, k.ClientID, k.ClientSecret)
			if err != nil {
				log.Info("PUT /keycloak could not read the realm's settings", zap.String("realm", k.Realm), zap.Error(err))
			}
			return string(got)
		},
	})
	scim.Register(e, scim.Deps{
		Auth:       authn,
		ScimTokens: auth.ScimTokens{Hasher: scimHasher, Store: scimTokens, Now: time.Now},
		Store:      store,
		Secrets:    box,
		Gate:       gate,
		Clock:      time.Now,
		Log:        log.Named("scim"),
	})
	httpapi.RegisterProbes(e, func(ctx context.Context) error { return dynamo.Ping(ctx, clients.DB, names.Config()) }, reg)
	openapi.Register(e)
	return e, nil
}
