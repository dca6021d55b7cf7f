// Package keycloak keeps a tenant's Keycloak realm in step with the ssodir directory.
//
// It holds a typed client for the part of the Keycloak Admin REST API that ssodir uses
// (Client); the full reconcile, which reads both sides (ReadRealm, then ReadDirectory),
// plans the difference as a pure function of the two snapshots (Diff), and applies it
// (Apply); the per-event operations of the event-driven sync (Syncer); and the Prometheus
// metrics of both (Metrics).
//
// Ownership: every user and group ssodir creates carries the attribute ssodir_id, the
// directory's immutable id for it. ssodir changes or deletes only objects that carry it;
// everything else in the realm is left alone.
//
// Never older over newer: every object also carries ssodir_version, the directory version
// it reflects. No write puts a state older than that over it: a plan skips objects Keycloak
// holds at a newer version, Apply decides every action again against the write model
// (WriteModel) right before it acts and writes the write model's state, and the Syncer
// compares versions before it writes; the event path and a reconcile of one realm share
// per-object Locks. docs/keycloak-sync.md states the rule and its limits.
package keycloak

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

const (
	defaultRequestTimeout   = 30 * time.Second
	defaultMaxAttempts      = 5
	defaultMinBackoff       = 250 * time.Millisecond
	defaultMaxBackoff       = 15 * time.Second
	defaultMaxRetryAfter    = 2 * time.Minute
	defaultTokenExpiryDelta = 30 * time.Second
	defaultConcurrency      = 4
	maxResponseBytes        = 64 << 20
)

// ClientConfig is how to reach one realm. BaseURL, Realm, ClientID and ClientSecret come
// from the tenant's row in {p}_Config; the other fields are optional and zero means the
// default.
type ClientConfig struct {
	// BaseURL is Keycloak's base URL, without /auth unless the server uses it.
	BaseURL      string
	Realm        string
	ClientID     string
	ClientSecret string

	// RequestTimeout bounds one attempt of one request, token requests included (30s).
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts of one request on 429, 502, 503, 504, timeouts and
	// connection errors (5). A 401 gets one extra attempt with a fresh token on top.
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential backoff between attempts (250ms, 15s).
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for (2m); a server asking
	// for more gets the error back instead of a stalled sync.
	MaxRetryAfter time.Duration
	// TokenExpiryDelta is how long before its expiry a token is replaced (30s), so that a
	// request never leaves with a token that expires on the way.
	TokenExpiryDelta time.Duration
	// Concurrency is the most requests in flight to this realm at once, and the number of
	// workers Apply uses (4).
	Concurrency int

	// Locks serialises writes to one object among the clients that share it (the event
	// path's and the reconcile's client of a realm); nil gives the client its own.
	Locks *Locks

	Logger  *zap.Logger
	Metrics *Metrics
}

// String describes the configuration without its secret, so that a config logged by
// mistake leaks nothing.
func (c ClientConfig) String() string {
	return fmt.Sprintf("keycloak{url=%s realm=%s client=%s secret=[redacted]}", c.BaseURL, c.Realm, c.ClientID)
}

// GoString keeps the secret out of %#v as well.
func (c ClientConfig) GoString() string { return c.String() }

// Validate reports every problem with the configuration at once.
func (c ClientConfig) Validate() error {
	var errs []error
	if u, err := url.Parse(c.BaseURL); c.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("keycloak url %q: want an absolute http(s) URL", c.BaseURL))
	}
	if c.Realm == "" {
		errs = append(errs, errors.New("keycloak realm is empty"))
	}
	if c.ClientID == "" {
		errs = append(errs, errors.New("keycloak client id is empty"))
	}
	if c.ClientSecret == "" {
		errs = append(errs, errors.New("keycloak client secret is empty"))
	}
	if c.RequestTimeout < 0 || c.MinBackoff < 0 || c.MaxBackoff < 0 || c.MaxRetryAfter < 0 || c.TokenExpiryDelta < 0 {
		errs = append(errs, errors.New("keycloak timeouts and backoffs must not be negative"))
	}
	if c.MaxAttempts < 0 || c.Concurrency < 0 {
		errs = append(errs, errors.New("keycloak attempts and concurrency must not be negative"))
	}
	return errors.Join(errs...)
}

func (c ClientConfig) withDefaults() ClientConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.RequestTimeout, defaultRequestTimeout)
	def(&c.MinBackoff, defaultMinBackoff)
	def(&c.MaxBackoff, defaultMaxBackoff)
	def(&c.MaxRetryAfter, defaultMaxRetryAfter)
	def(&c.TokenExpiryDelta, defaultTokenExpiryDelta)
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = defaultMaxAttempts
	}
	if c.Concurrency == 0 {
		c.Concurrency = defaultConcurrency
	}
	if c.Locks == nil {
		c.Locks = NewLocks()
	}
	return c
}

// Client talks to one realm's Admin API. It is safe for concurrent use.
type Client struct {
	cfg       ClientConfig
	cfgErr    error
	http      *http.Client
	adminRoot string
	tokens    *tokenSource
	sem       chan struct{}
	log       *zap.Logger
	metrics   *Metrics
	// sleep waits between attempts; tests replace it to observe the waits.
	sleep func(context.Context, time.Duration) error

	// attrsKept records that this realm was seen to keep the ssodir_id attribute; see
	// createManagedUser.
	verifyMu  sync.Mutex
	attrsKept atomic.Bool
}

// New returns a client for the realm. httpClient may be nil for a default one sized for
// cfg.Concurrency. An invalid cfg is reported by every call (see ClientConfig.Validate to
// catch it at start-up).
func New(cfg ClientConfig, httpClient *http.Client) *Client {
	cfg = cfg.withDefaults()
	c := &Client{
		cfg:     cfg,
		cfgErr:  cfg.Validate(),
		sem:     make(chan struct{}, cfg.Concurrency),
		log:     cfg.Logger,
		metrics: cfg.Metrics,
		sleep:   sleepContext,
	}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	c.log = c.log.With(zap.String("realm", cfg.Realm))
	if httpClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Keep a pooled connection per worker; the default of two makes parallel work
		// open and close a connection per request.
		tr.MaxIdleConnsPerHost = 2 * cfg.Concurrency
		httpClient = &http.Client{Transport: tr}
	}
	c.http = httpClient
	base := strings.TrimRight(cfg.BaseURL, "/")
	c.adminRoot = base + "/admin/realms/" + url.PathEscape(cfg.Realm)

	// Token requests cannot take a per-call context (oauth2.TokenSource has none), so
	// they get the attempt timeout through the HTTP client instead.
	tokenHTTP := *httpClient
	if tokenHTTP.Timeout == 0 {
		tokenHTTP.Timeout = cfg.RequestTimeout
	}
	cc := &clientcredentials.Config{
		ClientID:     cfg.ClientID,
		ClientSecret: cfg.ClientSecret,
		TokenURL:     base + "/realms/" + url.PathEscape(cfg.Realm) + "/protocol/openid-connect/token",
		// The secret goes in the form body (client_secret_post), which Keycloak accepts;
		// auto-detection would send every bad secret twice.
		AuthStyle: oauth2.AuthStyleInParams,
	}
	c.tokens = &tokenSource{
		conf:  cc,
		ctx:   context.WithValue(context.Background(), oauth2.HTTPClient, &tokenHTTP),
		delta: cfg.TokenExpiryDelta,
	}
	c.tokens.reset()
	return c
}

// Realm is the name of the client's realm.
func (c *Client) Realm() string { return c.cfg.Realm }

// tokenSource caches the realm's access token and replaces it TokenExpiryDelta before it
// expires (oauth2.ReuseTokenSourceWithExpiry), or at once when Keycloak refuses it.
type tokenSource struct {
	conf  *clientcredentials.Config
	ctx   context.Context
	delta time.Duration

	mu      sync.Mutex
	src     oauth2.TokenSource
	current string
	// fetching is the token request in flight, which every caller shares.
	fetching *tokenFetch
}

type tokenFetch struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

func (t *tokenSource) reset() {
	t.src = oauth2.ReuseTokenSourceWithExpiry(nil, t.conf.TokenSource(t.ctx), t.delta)
	t.current = ""
}

// token is the realm's access token: the cached one, or one fetched by a single request
// that every caller waits for — each no longer than its own ctx. A token request cannot
// take a context (oauth2.TokenSource has none), and the token source holds a lock while
// it fetches: a caller waiting on it directly was stuck, whatever its deadline, for as
// long as the request's timeout, times the callers before it when the realm hangs — so a
// probe bounded by 3 s waited 30 s, and a parked tenant's records could not be stopped.
func (t *tokenSource) token(ctx context.Context) (string, error) {
	t.mu.Lock()
	f := t.fetching
	if f == nil {
		f = &tokenFetch{done: make(chan struct{})}
		t.fetching = f
		src := t.src
		go func() {
			f.tok, f.err = src.Token()
			t.mu.Lock()
			if t.fetching == f {
				t.fetching = nil
			}
			if f.err == nil {
				t.current = f.tok.AccessToken
			}
			t.mu.Unlock()
			close(f.done)
		}()
	}
	t.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if f.err != nil {
		return "", f.err
	}
	return f.tok.AccessToken, nil
}

// invalidate drops the cached token, but only if it is still the one Keycloak refused:
// when many requests meet the same 401 at once, one fresh token serves them all.
func (t *tokenSource) invalidate(refused string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.current == refused {
		t.reset()
		t.fetching = nil
	}
}

// tokenError is a failure to get a token; nothing was sent to the Admin API.
type tokenError struct{ err error }

func (e *tokenError) Error() string { return "fetch token: " + e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

// Is makes refused client credentials match ErrUnauthorized.
func (e *tokenError) Is(target error) bool {
	var re *oauth2.RetrieveError
	if target == ErrUnauthorized && errors.As(e.err, &re) && re.Response != nil {
		return re.Response.StatusCode == http.StatusUnauthorized || re.Response.StatusCode == http.StatusBadRequest
	}
	return false
}

func (e *tokenError) retryable() bool {
	var re *oauth2.RetrieveError
	if errors.As(e.err, &re) && re.Response != nil {
		return retryableStatus(re.Response.StatusCode)
	}
	// No answer at all: a timeout or a connection error.
	return true
}

// permanentError is a failure that no retry can fix (a request that cannot be built).
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

type reply struct {
	status int
	header http.Header
	body   []byte
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

func retryableErr(err error) bool {
	var te *tokenError
	if errors.As(err, &te) {
		return te.retryable()
	}
	var pe *permanentError
	return !errors.As(err, &pe)
}

// retryReason labels a retry for metrics and logs.
func retryReason(err error, status int) string {
	var te *tokenError
	var ne net.Error
	switch {
	case status != 0:
		return strconv.Itoa(status)
	case errors.As(err, &te):
		return "token"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "connection"
	}
}

// send makes one request with the current token, and once more with a fresh token if
// Keycloak answers 401: a token can be refused before its announced expiry (the server's
// clock runs ahead, the realm's keys were rotated, the session was revoked). A second 401
// means the credentials themselves are refused and is returned as such.
func (c *Client) send(ctx context.Context, method, p string, query url.Values, body []byte) (*reply, error) {
	refreshed := false
	for {
		tok, err := c.tokens.token(ctx)
		if err != nil {
			return nil, &tokenError{err: err}
		}
		rep, err := c.exchange(ctx, method, p, query, body, tok)
		if err != nil {
			return nil, err
		}
		if rep.status == http.StatusUnauthorized && !refreshed {
			refreshed = true
			c.tokens.invalidate(tok)
			c.metrics.retried("401")
			c.log.Debug("keycloak refused the token; retrying with a fresh one", zap.String("method", method), zap.String("path", p))
			continue
		}
		return rep, nil
	}
}

// exchange is one HTTP round trip, within the client's concurrency limit and the attempt
// timeout.
func (c *Client) exchange(ctx context.Context, method, p string, query url.Values, body []byte, token string) (*reply, error) {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.sem }()

	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	u := c.adminRoot + p
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, method, u, rd)
	if err != nil {
		return nil, &permanentError{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The error quotes the URL, whose query may hold a username or an email (a
		// search): it reaches logs, which name users by id only (STYLE.md).
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = c.adminRoot + p
		}
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	return &reply{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

func encode(in any) ([]byte, error) {
	if in == nil {
		return nil, nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, &permanentError{err: fmt.Errorf("encode request: %w", err)}
	}
	return b, nil
}

// do sends an idempotent request (GET, PUT, DELETE) and decodes a 2xx answer into out.
// Being idempotent, it is simply sent again after a 429, 502, 503 or 504, a timeout or a
// connection error, with exponential backoff and jitter, honouring Retry-After, at most
// MaxAttempts times and never past ctx's deadline.
//
// Two of ssodir's PUTs are idempotent only in effect: reset-password sets the same
// password again (a realm with a password-history policy may then answer 400, which is
// returned), and a full-replace user PUT re-applies the same representation.
func (c *Client) do(ctx context.Context, method, p string, query url.Values, in, out any) error {
	if c.cfgErr != nil {
		return c.cfgErr
	}
	body, err := encode(in)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		rep, err := c.send(ctx, method, p, query, body)
		var cause error
		var retryAfter time.Duration
		status := 0
		switch {
		case err != nil:
			cause = fmt.Errorf("keycloak: %s %s: %w", method, p, err)
			if ctx.Err() != nil || !retryableErr(err) {
				return cause
			}
		case retryableStatus(rep.status):
			se := statusError(method, p, rep)
			cause, retryAfter, status = se, se.RetryAfter, rep.status
		case rep.status >= 200 && rep.status < 300:
			if out != nil {
				if err := json.Unmarshal(rep.body, out); err != nil {
					return fmt.Errorf("keycloak: %s %s: decode response: %w", method, p, err)
				}
			}
			return nil
		default:
			return statusError(method, p, rep)
		}
		if err := c.beforeRetry(ctx, method, p, attempt, retryAfter, status, cause); err != nil {
			return err
		}
	}
}

// create POSTs a new object and returns the id Keycloak put in the Location header.
//
// A POST is not idempotent. When its answer is lost — a timeout, a broken connection, or a
// 502/504 from a proxy that may have passed it on — the object may exist all the same, and
// sending the POST again would fail with a 409 that hides our own success, or (for objects
// Keycloak does not keep unique) create a duplicate. So after such a loss create asks
// lookup whether the object is there and sends again only when lookup says ErrNotFound.
// A 429 or 503 is different: the server says it did not act, and the POST is sent again
// as is. lookup must return the id only for the object this request would have created,
// and an error matching ErrConflict when the name is held by another.
func (c *Client) create(ctx context.Context, p, collection string, in any, lookup func(context.Context) (string, error)) (string, error) {
	if c.cfgErr != nil {
		return "", c.cfgErr
	}
	body, err := encode(in)
	if err != nil {
		return "", err
	}
	uncertain := false
	for attempt := 1; ; attempt++ {
		rep, err := c.send(ctx, http.MethodPost, p, nil, body)
		var cause error
		var retryAfter time.Duration
		status := 0
		switch {
		case err != nil:
			cause = fmt.Errorf("keycloak: POST %s: %w", p, err)
			if ctx.Err() != nil || !retryableErr(err) {
				return "", cause
			}
			var te *tokenError
			if !errors.As(err, &te) {
				uncertain = true
			}
		case rep.status >= 200 && rep.status < 300:
			return idFromLocation(rep.header, collection)
		case rep.status == http.StatusTooManyRequests || rep.status == http.StatusServiceUnavailable:
			se := statusError(http.MethodPost, p, rep)
			cause, retryAfter, status = se, se.RetryAfter, rep.status
		case rep.status == http.StatusBadGateway || rep.status == http.StatusGatewayTimeout:
			se := statusError(http.MethodPost, p, rep)
			cause, retryAfter, status = se, se.RetryAfter, rep.status
			uncertain = true
		case rep.status == http.StatusConflict && uncertain:
			// The attempt whose answer was lost may be the one holding the name.
			if id, lerr := lookup(ctx); lerr == nil {
				return id, nil
			}
			return "", statusError(http.MethodPost, p, rep)
		default:
			return "", statusError(http.MethodPost, p, rep)
		}
		if err := c.beforeRetry(ctx, http.MethodPost, p, attempt, retryAfter, status, cause); err != nil {
			if uncertain && ctx.Err() == nil {
				// Out of attempts, but the last lost one may have worked.
				if id, lerr := lookup(ctx); lerr == nil {
					return id, nil
				}
			}
			return "", err
		}
		if uncertain {
			id, lerr := lookup(ctx)
			switch {
			case lerr == nil:
				c.log.Info("keycloak create answer was lost; found the object it created",
					zap.String("path", p), zap.String("id", id))
				return id, nil
			case errors.Is(lerr, ErrNotFound):
				// Not there: the lost attempt did not happen, sending again is safe.
			default:
				return "", fmt.Errorf("keycloak: POST %s: answer lost (%v), and looking for the object failed: %w", p, cause, lerr)
			}
		}
	}
}
