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
