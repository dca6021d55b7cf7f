package config

import (
	"regexp"
	"strconv"
	"time"
)

// CommandAPI is cmd/command-api's configuration.
type CommandAPI struct {
	Common
	HTTP
	HistoryRetention time.Duration
	// IdempotencyKey keys the HMAC that fingerprints Idempotency-Key requests
	// (SSO_IDEMPOTENCY_KEY, base64, at least 32 bytes); nil means "derive it from
	// SecretKey". It is never stored, so the fingerprints kept in the database (whose
	// bodies may hold passwords) cannot be brute-forced offline. Every instance must share
	// it, so with only a KMS key configured it is required.
	IdempotencyKey []byte
	// ScimTokenKey keys the HMAC under which SCIM tokens are stored (SSO_SCIM_TOKEN_KEY,
	// base64, at least 32 bytes); nil means "derive it from SecretKey". Every instance must
	// share it, so with only a KMS key configured it is required; changing it revokes every
	// SCIM token.
	ScimTokenKey []byte
	// ProvisionWait is how long POST /tenants waits for a new tenant's tables before it
	// answers 202 and lets the provisioning finish in the background (SSO_PROVISION_WAIT,
	// default 5s, at most 1m).
	ProvisionWait time.Duration
	// ProvisionResume is how often the command API looks for tenants left provisioning
	// (by a process that stopped mid-way) and finishes them (SSO_PROVISION_RESUME,
	// default 30s; it also looks once at start).
	ProvisionResume time.Duration
	// Lambda is Lambda mode's mapping settings (SSO_LAMBDA_*).
	Lambda Lambda
	// TableQuota is how many tables the stage may have (SSO_TABLE_QUOTA; unset: no quota
	// of ours): a tenant whose tables would pass it is refused as table_quota_exceeded
	// before any is made (dynamo.TenantStore.WithTableQuota).
	TableQuota int
}

// LoadCommandAPI reads CommandAPI from env.
func LoadCommandAPI(env Env) (CommandAPI, error) {
	r := &reader{env: env}
	c := CommandAPI{Common: r.common(keyRequired), HTTP: r.http("SSO_COMMAND_ADDR", "127.0.0.1:8080")}
	c.HistoryRetention = r.duration("SSO_HISTORY_RETENTION", 0)
	c.IdempotencyKey = r.key("SSO_IDEMPOTENCY_KEY")
	if c.IdempotencyKey == nil && c.SecretKey == nil && c.KMSKeyID != "" {
		r.fail("SSO_IDEMPOTENCY_KEY is required when only SSO_KMS_KEY_ID is set (request fingerprints must match on every instance)")
	}
	c.ScimTokenKey = r.key("SSO_SCIM_TOKEN_KEY")
	if c.ScimTokenKey == nil && c.SecretKey == nil && c.KMSKeyID != "" {
		r.fail("SSO_SCIM_TOKEN_KEY is required when only SSO_KMS_KEY_ID is set (SCIM tokens must verify on every instance)")
	}
	c.ProvisionWait = r.duration("SSO_PROVISION_WAIT", 5*time.Second)
	if c.ProvisionWait < time.Millisecond || c.ProvisionWait > time.Minute {
		r.fail("SSO_PROVISION_WAIT: must be between 1ms and 1m (a request is not held for minutes)")
	}
	c.ProvisionResume = r.duration("SSO_PROVISION_RESUME", 30*time.Second)
	if c.ProvisionResume < 100*time.Millisecond {
		r.fail("SSO_PROVISION_RESUME: must be at least 100ms")
	}
	c.Lambda = r.lambda()
	c.TableQuota = r.positive("SSO_TABLE_QUOTA", 0)
	return c, r.err()
}

// QueryAPI is cmd/query-api's configuration. It never reads SSO_SECRET_KEY or
// SSO_KMS_KEY_ID: the query API does not need the key that opens passwords and client
// secrets, so it must not hold it.
type QueryAPI struct {
	Common
	HTTP
	// CursorKey signs pagination cursors (SSO_CURSOR_KEY, base64, at least 32 bytes).
	// Every instance must share it.
	CursorKey []byte
	// SecretKeySet reports that SSO_SECRET_KEY is in the environment anyway, so that the
	// process can warn that it should not be.
	SecretKeySet bool
	// MaxWaiters and MaxTenantWaiters cap the X-Min-Version reads waiting at once in the
	// process (SSO_MIN_VERSION_WAITERS, default 512) and per tenant
	// (SSO_MIN_VERSION_WAITERS_PER_TENANT, default 128); beyond them a read is answered
	// 503 with Retry-After at once.
	MaxWaiters, MaxTenantWaiters int
	// HistoryRetention is the command API's SSO_HISTORY_RETENTION (0: history kept): an
	// as-of read of an instant older than now minus it is refused (docs/history.md).
	HistoryRetention time.Duration
	// ConsoleClientID is the public OIDC client the web console signs in with
	// (SSO_CONSOLE_CLIENT_ID, Authorization Code with PKCE against SSO_OIDC_ISSUER); empty
	// means the console offers the development token only.
	ConsoleClientID string
	// ConsoleCommandAPI, ConsoleProjector and ConsoleKeycloakSync are the addresses the web
	// console sends writes to and reads operations from (SSO_CONSOLE_COMMAND_API,
	// SSO_CONSOLE_PROJECTOR, SSO_CONSOLE_KEYCLOAK_SYNC: http(s) base URLs as a browser
	// reaches them). The console takes them from its server and from nowhere else, and its
	// Content-Security-Policy lets it connect only there; empty: the user types loopback
	// addresses on the sign-in page (development).
	ConsoleCommandAPI, ConsoleProjector, ConsoleKeycloakSync string
	// ConsoleReadTimeout is how long the console waits for an answer to a read before it
	// says so and offers to try again (SSO_CONSOLE_READ_TIMEOUT, default 15s).
	ConsoleReadTimeout time.Duration
	// ProgressToken is the service credential the projectors' progress feeds ask for
	// (SSO_PROGRESS_TOKEN); the feeds are found in the projectors' heartbeat rows. Empty:
	// no feed is followed, and X-Min-Version reads poll the read table.
	ProgressToken string
}

// LoadQueryAPI reads QueryAPI from env.
func LoadQueryAPI(env Env) (QueryAPI, error) {
	r := &reader{env: env}
	c := QueryAPI{Common: r.common(keyNotRead), HTTP: r.http("SSO_QUERY_ADDR", "127.0.0.1:8081")}
	if c.CursorKey = r.key("SSO_CURSOR_KEY"); c.CursorKey == nil {
		r.fail("SSO_CURSOR_KEY is required (base64, at least 32 bytes; the query API's own key for signing cursors)")
	}
	_, c.SecretKeySet = env("SSO_SECRET_KEY")
	c.MaxWaiters = r.positive("SSO_MIN_VERSION_WAITERS", 512)
	c.MaxTenantWaiters = r.positive("SSO_MIN_VERSION_WAITERS_PER_TENANT", 128)
	c.HistoryRetention = r.duration("SSO_HISTORY_RETENTION", 0)
	c.ConsoleClientID = r.str("SSO_CONSOLE_CLIENT_ID", "")
	c.ConsoleCommandAPI = r.baseURL("SSO_CONSOLE_COMMAND_API")
	c.ConsoleProjector = r.baseURL("SSO_CONSOLE_PROJECTOR")
	c.ConsoleKeycloakSync = r.baseURL("SSO_CONSOLE_KEYCLOAK_SYNC")
	c.ConsoleReadTimeout = r.duration("SSO_CONSOLE_READ_TIMEOUT", 15*time.Second)
	if c.ConsoleReadTimeout < time.Second || c.ConsoleReadTimeout > 5*time.Minute {
		r.fail("SSO_CONSOLE_READ_TIMEOUT: must be between 1s and 5m")
	}
	c.ProgressToken = r.str("SSO_PROGRESS_TOKEN", "")
	if c.ConsoleClientID != "" && c.OIDCIssuer == "" {
		r.fail("SSO_CONSOLE_CLIENT_ID needs SSO_OIDC_ISSUER (the issuer the console signs in at)")
	}
	return c, r.err()
}

// Projector is cmd/projector's configuration.
type Projector struct {
	Common
	Addr              string
	ActivityRetention time.Duration
	Stream
	// CORSOrigins may read /metrics, /healthz and /readyz from a browser (the web console).
	CORSOrigins []string
	// ErasureSettle is the wait between an erasure's two passes over the read side
	// (SSO_ERASURE_SETTLE, default 30s, at least 10s: more than the erasure filter's
	// cache; docs/erasure.md).
	ErasureSettle time.Duration
	// ProgressToken is what a follower of the progress feed (GET /v1/applied) must present
	// (SSO_PROGRESS_TOKEN, shared with the query APIs); empty: the feed refuses everyone.
	ProgressToken string
	// ProgressMaxSubscribers caps the feed's streams at once (SSO_PROGRESS_MAX_SUBSCRIBERS,
	// default 64); beyond it a follower gets 503.
	ProgressMaxSubscribers int
	// FeedURL is the URL query APIs reach this projector's probe listener at, published in
	// its heartbeat row (SSO_PROJECTOR_FEED_URL); empty: http:// and the listener's
	// address, with the host name when it listens on every interface.
	FeedURL string
	// SinglePuts (SSO_PROJECTOR_WRITES=puts) writes each view item with its own
	// conditional PutItem, one write unit per KB on AWS, instead of transactions of 25
	// (=transactions), which cost two there but are faster on DynamoDB Local. Default:
	// transactions against a local endpoint, puts otherwise.
	SinglePuts bool
	// HistoryRetention is SSO_HISTORY_RETENTION, as the command API reads it: the history
	// records of the removals the expiry scheduler makes expire with it (0: kept).
	HistoryRetention time.Duration
	// EventBridgeBus is the Amazon EventBridge bus (name or ARN) every change also goes to
	// (SSO_EVENTBRIDGE_BUS; docs/events.md "EventBridge"); empty: none.
	EventBridgeBus string
}

// busName is an EventBridge bus's name or ARN.
var busName = regexp.MustCompile(`^(arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[A-Za-z0-9/._-]{1,256}|[A-Za-z0-9/._-]{1,256})$`)

// LoadProjector reads Projector from env.
func LoadProjector(env Env) (Projector, error) {
	r := &reader{env: env}
	c := Projector{Common: r.common(keyOptional), Addr: r.addr("SSO_PROJECTOR_ADDR", "127.0.0.1:8082"), CORSOrigins: r.corsOrigins()}
	c.ActivityRetention = r.duration("SSO_ACTIVITY_RETENTION", 2160*time.Hour)
	c.HistoryRetention = r.duration("SSO_HISTORY_RETENTION", 0)
	c.ErasureSettle = r.duration("SSO_ERASURE_SETTLE", 30*time.Second)
	if c.ErasureSettle < 10*time.Second {
		r.fail("SSO_ERASURE_SETTLE: %s is shorter than 10s (the erasure filter caches the ledger for 5s)", c.ErasureSettle)
	}
	c.Stream = r.stream()
	c.ProgressToken = r.str("SSO_PROGRESS_TOKEN", "")
	c.ProgressMaxSubscribers = r.positive("SSO_PROGRESS_MAX_SUBSCRIBERS", 64)
	c.FeedURL = r.baseURL("SSO_PROJECTOR_FEED_URL")
	if c.EventBridgeBus = r.str("SSO_EVENTBRIDGE_BUS", ""); c.EventBridgeBus != "" && !busName.MatchString(c.EventBridgeBus) {
		r.fail("SSO_EVENTBRIDGE_BUS: %q is neither an event bus name nor an event bus ARN", c.EventBridgeBus)
	}
	switch v := r.str("SSO_PROJECTOR_WRITES", ""); v {
	case "":
		c.SinglePuts = !isLocalEndpoint(c.DynamoEndpoint)
	case "puts":
		c.SinglePuts = true
	case "transactions":
	default:
		r.fail("SSO_PROJECTOR_WRITES: %q is neither puts nor transactions", v)
	}
	return c, r.err()
}

// Stream is the stream consumer's knobs, shared by the projector and keycloak-sync
// (docs/many-tenants.md gives the formulas behind the defaults).
type Stream struct {
	// LeaseDuration is how long a silent process keeps its stream shards before another
	// takes them over (SSO_STREAM_LEASE, default 10s).
	LeaseDuration time.Duration
	// PollInterval is the pause after an empty stream page (SSO_STREAM_POLL, default
	// 250ms). AWS allows 5 GetRecords calls per second per shard, shared by all consumers;
	// a local DynamoDB takes far more, and a short pause means a short lag.
	PollInterval time.Duration
	// IdlePollMax is the longest pause between reads of an idle shard, which the pause
	// after empty pages doubles up to (SSO_STREAM_IDLE_POLL_MAX, default 1s): the delay
	// before a write to an idle tenant is seen, and its cost (one GetRecords per
	// IdlePollMax per consumer).
	IdlePollMax time.Duration
	// LeaseScanInterval is how often a process reads its consumer's whole lease partition
	// (SSO_STREAM_LEASE_SCAN, default 30s); in between it reads the heartbeat rows only.
	LeaseScanInterval time.Duration
	// Consumers is how many consumer applications read every stream (SSO_STREAM_CONSUMERS,
	// default 2: the projector and keycloak-sync); each takes 1/Consumers of the Streams
	// budgets (5 GetRecords/s per shard, 10 DescribeStream/s and 5 ListStreams/s per
	// account). Every consumer process must be given the same number.
	Consumers int
}

// stream reads the stream consumer's knobs shared by the projector and keycloak-sync.
func (r *reader) stream() Stream {
	s := Stream{LeaseDuration: r.duration("SSO_STREAM_LEASE", 10*time.Second)}
	if s.LeaseDuration < time.Second {
		r.fail("SSO_STREAM_LEASE: must be at least 1s")
	}
	s.PollInterval = r.duration("SSO_STREAM_POLL", 250*time.Millisecond)
	if s.PollInterval < time.Millisecond || s.PollInterval > time.Minute {
		r.fail("SSO_STREAM_POLL: must be between 1ms and 1m")
	}
	s.IdlePollMax = r.duration("SSO_STREAM_IDLE_POLL_MAX", max(time.Second, s.PollInterval))
	if s.IdlePollMax < s.PollInterval || s.IdlePollMax > 5*time.Minute {
		r.fail("SSO_STREAM_IDLE_POLL_MAX: must be between SSO_STREAM_POLL and 5m")
	}
	s.LeaseScanInterval = r.duration("SSO_STREAM_LEASE_SCAN", 30*time.Second)
	if s.LeaseScanInterval < time.Second || s.LeaseScanInterval > time.Hour {
		r.fail("SSO_STREAM_LEASE_SCAN: must be between 1s and 1h")
	}
	s.Consumers = r.positive("SSO_STREAM_CONSUMERS", 2)
	return s
}

// KeycloakSync is cmd/keycloak-sync's configuration.
type KeycloakSync struct {
	Common
	Addr              string
	ReconcileInterval time.Duration
	// MaxDeleteShare is the safety valve: a reconcile deleting more than this share of a
	// realm's managed users is refused.
	MaxDeleteShare float64
	Stream
	// CORSOrigins may read /metrics, /healthz and /readyz from a browser (the web console).
	CORSOrigins []string
	// ParkMax bounds how long a tenant whose realm fails is parked (SSO_KEYCLOAK_PARK_MAX,
	// default 1h): past it, its records become dead letters as they come, so that the
	// stream is read on and nothing waits in it until its 24-hour retention trims it.
	ParkMax time.Duration
}

// LoadKeycloakSync reads KeycloakSync from env.
func LoadKeycloakSync(env Env) (KeycloakSync, error) {
	r := &reader{env: env}
	c := KeycloakSync{Common: r.common(keyRequired), Addr: r.addr("SSO_KEYCLOAK_SYNC_ADDR", "127.0.0.1:8083"), CORSOrigins: r.corsOrigins()}
	c.ReconcileInterval = r.duration("SSO_RECONCILE_INTERVAL", 15*time.Minute)
	if c.ReconcileInterval < time.Second {
		r.fail("SSO_RECONCILE_INTERVAL: must be at least 1s")
	}
	c.MaxDeleteShare = 0.2
	if v := r.str("SSO_RECONCILE_MAX_DELETE_SHARE", ""); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			r.fail("SSO_RECONCILE_MAX_DELETE_SHARE: %q is not a number between 0 and 1", v)
		}
		c.MaxDeleteShare = f
	}
	c.Stream = r.stream()
	c.ParkMax = r.duration("SSO_KEYCLOAK_PARK_MAX", time.Hour)
	if c.ParkMax < time.Second || c.ParkMax > 12*time.Hour {
		r.fail("SSO_KEYCLOAK_PARK_MAX: must be between 1s and 12h (well inside the stream's 24-hour retention)")
	}
	return c, r.err()
}
