// Package config reads ssodir's configuration from the environment, once, into typed
// structs. Every problem is reported together (errors.Join), and nothing else in the
// code base reads the environment.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// Env looks a variable up; os.LookupEnv in production, a map in tests.
type Env func(name string) (string, bool)

// OS is the process environment.
func OS() Env { return os.LookupEnv }

// Value is the variable's value, "" when it is not set.
func (e Env) Value(name string) string {
	v, _ := e(name)
	return v
}

// Map is an environment made of a map, for tests.
func Map(m map[string]string) Env {
	return func(name string) (string, bool) { v, ok := m[name]; return v, ok }
}

// Common is what every ssodir process needs.
type Common struct {
	TablePrefix string
	LogLevel    zapcore.Level
	// SecretKey is the local AES-256 key (SSO_SECRET_KEY), or nil when KMSKeyID is used.
	SecretKey []byte
	KMSKeyID  string
	// WebhooksAllowPrivate (SSO_WEBHOOKS_ALLOW_PRIVATE) lets webhooks reach http URLs and
	// private or loopback addresses: development and tests only.
	WebhooksAllowPrivate bool
	// WebhookKey (SSO_WEBHOOK_KEY, base64, at least 32 bytes) encrypts the webhooks'
	// secrets at rest, apart from the key of passwords (the projector, which delivers, never
	// holds that one); nil: derived from SecretKey (internal/webhooks.NewBox).
	WebhookKey []byte
	// DynamoEndpoint and StreamsEndpoint are the SDK's standard endpoint overrides,
	// read here so that local endpoints can be recognised (DYNAMODB-LOCAL.md, trap 3).
	DynamoEndpoint  string
	StreamsEndpoint string
	// Tables are the settings every table the process creates gets (docs/aws.md).
	Tables Tables
	// AWSCallLog is a directory into which the process records every AWS operation it
	// makes, with the resource it touched (SSO_AWS_CALL_LOG; tests prove the stack's
	// policies with it); "" records nothing.
	AWSCallLog string
	// EventsRetention is how long the change feed keeps a change and a cursor stays
	// valid (SSO_EVENTS_RETENTION, default 720h; 0 keeps forever).
	EventsRetention time.Duration
}

// Tables are the settings of the tables a process creates at run time.
type Tables struct {
	// Stage tags every table ssodir:stage (SSO_STAGE, default the table prefix).
	Stage string
	// PointInTimeRecovery (SSO_TABLE_PITR, default on; off against a local endpoint, since
	// DynamoDB Local has no backups).
	PointInTimeRecovery bool
	// DeletionProtection (SSO_TABLE_DELETION_PROTECTION, default on). ssodir itself turns
	// it off before it drops a table on purpose (a tenant's provisioning undone, a replay's
	// old tables).
	DeletionProtection bool
	// KMSKey is the customer-managed KMS key the tables are encrypted with
	// (SSO_TABLE_KMS_KEY, a key ARN; default unset: DynamoDB's AWS owned key).
	KMSKey string
	// SystemTablesExist (SSO_SYSTEM_TABLES=existing, default create) says the stage's
	// stack made the tables every tenant shares: the process creates none and checks that
	// they are there.
	SystemTablesExist bool
}

// HTTP is what a process serving the API needs.
type HTTP struct {
	Addr           string
	BootstrapToken string
	OIDCIssuer     string
	OIDCAudience   string
	CORSOrigins    []string
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// reader collects problems while reading variables.
type reader struct {
	env  Env
	errs []error
}

func (r *reader) str(name, def string) string {
	if v, ok := r.env(name); ok && v != "" {
		return v
	}
	return def
}

func (r *reader) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		r.fail("%s: %q is not a non-negative Go duration", name, v)
		return def
	}
	return d
}

func (r *reader) addr(name, def string) string {
	v := r.str(name, def)
	if _, _, err := net.SplitHostPort(v); err != nil {
		r.fail("%s: %q is not host:port", name, v)
	}
	return v
}

// key reads a base64 key of at least 32 bytes; nil when the variable is unset.
func (r *reader) key(name string) []byte {
	v := r.str(name, "")
	if v == "" {
		return nil
	}
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(key) < 32 {
		r.fail("%s: must be at least 32 bytes, base64-encoded", name)
	}
	return key
}

// positive reads a positive integer.
func (r *reader) positive(name string, def int) int {
	v := r.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		r.fail("%s: %q is not a positive integer", name, v)
		return def
	}
	return n
}

// boolean reads true/false (or 1/0, on/off).
func (r *reader) boolean(name string, def bool) bool {
	switch v := strings.ToLower(r.str(name, "")); v {
	case "":
		return def
	case "true", "1", "on", "yes":
		return true
	case "false", "0", "off", "no":
		return false
	default:
		r.fail("%s: %q is not true or false", name, v)
		return def
	}
}

var (
	tagValueRE = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}_.:/=+\-@]{1,256}$`)
	kmsKeyRE   = regexp.MustCompile(`^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:(key|alias)/[A-Za-z0-9/_-]+$`)
)

func (r *reader) tables(prefix, dynamoEndpoint string) Tables {
	t := Tables{
		Stage: r.str("SSO_STAGE", prefix),
		// DynamoDB Local answers UnknownOperationException to every backup call.
		PointInTimeRecovery: r.boolean("SSO_TABLE_PITR", !isLocalEndpoint(dynamoEndpoint)),
		DeletionProtection:  r.boolean("SSO_TABLE_DELETION_PROTECTION", true),
		KMSKey:              r.str("SSO_TABLE_KMS_KEY", ""),
	}
	if !tagValueRE.MatchString(t.Stage) {
		r.fail("SSO_STAGE: %q is not a valid tag value", t.Stage)
	}
	if t.KMSKey != "" && !kmsKeyRE.MatchString(t.KMSKey) {
		r.fail("SSO_TABLE_KMS_KEY: %q is not a KMS key or alias ARN (a table's key is named by ARN)", t.KMSKey)
	}
	switch v := r.str("SSO_SYSTEM_TABLES", "create"); v {
	case "create":
	case "existing":
		t.SystemTablesExist = true
	default:
		r.fail("SSO_SYSTEM_TABLES: %q is neither create nor existing", v)
	}
	return t
}

// isLocalEndpoint reports an endpoint on this machine (DynamoDB Local).
func isLocalEndpoint(endpoint string) bool {
	if endpoint == "" {
		return false
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (r *reader) err() error { return errors.Join(r.errs...) }

// keyUse says what a process does with SSO_SECRET_KEY / SSO_KMS_KEY_ID.
type keyUse int

const (
	keyNotRead  keyUse = iota // never read: the process must not hold the key
	keyOptional               // read when set
	keyRequired               // one of them must be set
)

func (r *reader) common(use keyUse) Common {
	c := Common{TablePrefix: r.str("SSO_TABLE_PREFIX", "mbcsso_dev")}
	if !prefixRE.MatchString(c.TablePrefix) {
		r.fail("SSO_TABLE_PREFIX: %q may hold only letters, digits, '_', '.', '-'", c.TablePrefix)
	}
	lvl, err := zapcore.ParseLevel(r.str("SSO_LOG_LEVEL", "info"))
	if err != nil {
		r.fail("SSO_LOG_LEVEL: unknown level %q", r.str("SSO_LOG_LEVEL", ""))
	}
	c.LogLevel = lvl
	c.DynamoEndpoint = r.str("AWS_ENDPOINT_URL_DYNAMODB", "")
	c.StreamsEndpoint = r.str("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", c.DynamoEndpoint)
	c.Tables = r.tables(c.TablePrefix, c.DynamoEndpoint)
	c.AWSCallLog = r.str("SSO_AWS_CALL_LOG", "")
	c.EventsRetention = r.duration("SSO_EVENTS_RETENTION", 720*time.Hour)
	c.WebhooksAllowPrivate = r.boolean("SSO_WEBHOOKS_ALLOW_PRIVATE", false)
	c.WebhookKey = r.key("SSO_WEBHOOK_KEY")
	if use == keyNotRead {
		return c
	}
	c.KMSKeyID = r.str("SSO_KMS_KEY_ID", "")
	if k := r.str("SSO_SECRET_KEY", ""); k != "" {
		key, err := base64.StdEncoding.DecodeString(k)
		if err != nil || len(key) != 32 {
			r.fail("SSO_SECRET_KEY: must be 32 bytes, base64-encoded")
		}
		c.SecretKey = key
	}
	if use == keyRequired && c.SecretKey == nil && c.KMSKeyID == "" {
		r.fail("SSO_SECRET_KEY or SSO_KMS_KEY_ID is required")
	}
	return c
}

func (r *reader) http(addrVar, defAddr string) HTTP {
	h := HTTP{
		Addr:           r.addr(addrVar, defAddr),
		BootstrapToken: r.str("SSO_BOOTSTRAP_TOKEN", ""),
		OIDCIssuer:     strings.TrimRight(r.str("SSO_OIDC_ISSUER", ""), "/"),
		OIDCAudience:   r.str("SSO_OIDC_AUDIENCE", ""),
	}
	if h.OIDCIssuer != "" && h.OIDCAudience == "" {
		r.fail("SSO_OIDC_AUDIENCE is required with SSO_OIDC_ISSUER")
	}
	if h.BootstrapToken == "" && h.OIDCIssuer == "" {
		r.fail("set SSO_OIDC_ISSUER (and SSO_OIDC_AUDIENCE) or SSO_BOOTSTRAP_TOKEN: no request could be authenticated")
	}
	h.CORSOrigins = r.corsOrigins()
	return h
}

// baseURL reads an http(s) base URL as a browser would use it: a scheme, a host, maybe a
// path, and nothing that would make it ambiguous (user info, a query, a fragment). The
// trailing slash is dropped; empty when the variable is unset.
func (r *reader) baseURL(name string) string {
	v := strings.TrimRight(strings.TrimSpace(r.str(name, "")), "/")
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(v, "?") || strings.HasSuffix(v, "#") {
		r.fail("%s: %q is not an http(s) base URL such as https://directory.example.com:8080", name, v)
		return ""
	}
	return v
}

// corsOrigins reads SSO_CORS_ORIGINS: the browser origins (the web console's) allowed to
// call a service.
func (r *reader) corsOrigins() []string {
	var origins []string
	for _, origin := range strings.Split(r.str("SSO_CORS_ORIGINS", ""), ",") {
		if origin = strings.TrimSpace(origin); origin != "" {
			origins = append(origins, origin)
		}
	}
	return origins
}

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

// SecretVariables may be given by reference: <name>_SECRET_ARN names an AWS Secrets
// Manager secret whose string is the value, read once at start (a stage on AWS keeps no
// secret in a function's environment: docs/aws.md).
var SecretVariables = []string{"SSO_SECRET_KEY", "SSO_IDEMPOTENCY_KEY", "SSO_SCIM_TOKEN_KEY", "SSO_CURSOR_KEY", "SSO_BOOTSTRAP_TOKEN", "SSO_WEBHOOK_KEY"}

// SecretRefSuffix makes a secret variable's reference: SSO_CURSOR_KEY_SECRET_ARN.
const SecretRefSuffix = "_SECRET_ARN"

// SecretRefs are the secret references of an environment, read before the rest of the
// configuration (which then sees the secrets' values).
type SecretRefs struct {
	// Refs maps a secret variable to the secret's ARN.
	Refs map[string]string
	// AWSCallLog and TablePrefix are what the call recorder needs (Common).
	AWSCallLog, TablePrefix string
}

// LoadSecretRefs reads the references; a variable given both ways is refused.
func LoadSecretRefs(env Env) (SecretRefs, error) {
	r := &reader{env: env}
	refs := SecretRefs{Refs: map[string]string{}, AWSCallLog: r.str("SSO_AWS_CALL_LOG", ""), TablePrefix: r.str("SSO_TABLE_PREFIX", "mbcsso_dev")}
	for _, name := range SecretVariables {
		arn := r.str(name+SecretRefSuffix, "")
		if arn == "" {
			continue
		}
		if !strings.HasPrefix(arn, "arn:") {
			r.fail("%s%s: %q is not a secret's ARN", name, SecretRefSuffix, arn)
		}
		if r.str(name, "") != "" {
			r.fail("%s and %s%s are both set: give the secret one way", name, name, SecretRefSuffix)
		}
		refs.Refs[name] = arn
	}
	return refs, r.err()
}

// WithValues is env with the given variables set (the secrets a process read).
func (e Env) WithValues(values map[string]string) Env {
	return func(name string) (string, bool) {
		if v, ok := values[name]; ok {
			return v, true
		}
		return e(name)
	}
}

// CPUProfile is SSO_CPU_PROFILE, where a service writes a CPU profile ("" for none). It is
// read apart from a service's configuration: profiling starts before, and survives, a
// configuration that fails to load.
func CPUProfile(env Env) string {
	v, _ := env("SSO_CPU_PROFILE")
	return v
}
