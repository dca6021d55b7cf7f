// Package client is a Go client for ssodir's command and query APIs (API.md).
//
// A Client holds the two base URLs and a token source; Tenant scopes it to one tenant,
// where the user, group, membership and activity methods live. Writes take options for
// If-Match and Idempotency-Key, reads of one user or group take X-Min-Version, and lists
// are Go iterators that follow next_cursor. A problem+json answer comes back as *Error,
// with its code and field errors. A 503 (DynamoDB throttled or unreachable; nothing was
// written) is retried with exponential back-off, honouring Retry-After; a 4xx never is.
//
//	c, err := client.New(client.Config{
//		CommandURL: "http://127.0.0.1:8080",
//		QueryURL:   "http://127.0.0.1:8081",
//		Token:      client.StaticToken(os.Getenv("SSODIR_TOKEN")),
//	})
//	t := c.Tenant("acme", "eu")
//	u, err := t.CreateUser(ctx, client.NewUser{Username: "jdoe", Email: "jdoe@example.com"})
//	for u, err := range t.Users(ctx, client.UserFilter{LastNamePrefix: "do"}) { … }
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Config is how to reach ssodir. CommandURL and QueryURL are the APIs' base URLs (scheme
// and host, optionally a path prefix); Token is required.
type Config struct {
	CommandURL string
	QueryURL   string
	// Token supplies the bearer token of every /v1 request: StaticToken or
	// ClientCredentials, or any oauth2.TokenSource.
	Token oauth2.TokenSource
	// HTTPClient sends the requests; nil means a client with a 60 s timeout that keeps up
	// to 64 idle connections per API (Go's default of two would make concurrent callers,
	// an import say, open and close a connection per request).
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one request on 503 and on connection errors of
	// requests that are safe to send again (5).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential back-off between attempts (200 ms,
	// 10 s); a Retry-After is honoured up to MaxRetryAfter (1 min), beyond which the error
	// is returned instead.
	MinBackoff    time.Duration
	MaxBackoff    time.Duration
	MaxRetryAfter time.Duration
	// UserAgent is sent with every request ("ssodir-go-client").
	UserAgent string
	// OnRetry, when set, is told of each wait before a request is sent again (a 503, or a
	// connection error of a request safe to send again), before the wait begins: a
	// command-line tool can say what it waits for. It must not block.
	OnRetry func(Retry)
}

// Retry is one wait of the client before it sends a request again.
type Retry struct {
	// Method and URL are the request's.
	Method, URL string
	// Attempt is the attempt that failed (1 for the first), of at most MaxAttempts.
	Attempt, MaxAttempts int
	// Wait is how long the client waits before the next attempt: the answer's
	// Retry-After when it had one, else the back-off.
	Wait time.Duration
	// Err is why: the 503's *Error, or the connection error.
	Err error
}

// StaticToken is a token source that always answers tok: a JWT obtained elsewhere, or the
// development bootstrap token.
func StaticToken(tok string) oauth2.TokenSource {
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok, TokenType: "Bearer"})
}

// ClientCredentials is a token source that fetches tokens from an OIDC issuer's token
// endpoint with the client credentials grant (for Keycloak:
// {url}/realms/{realm}/protocol/openid-connect/token), caching each until shortly before it
// expires. ctx carries the HTTP client used for the token requests, as in golang.org/x/oauth2.
func ClientCredentials(ctx context.Context, tokenURL, clientID, clientSecret string, scopes ...string) oauth2.TokenSource {
	cc := &clientcredentials.Config{ClientID: clientID, ClientSecret: clientSecret, TokenURL: tokenURL, Scopes: scopes}
	return cc.TokenSource(ctx)
}

// Client talks to both APIs. It is safe for concurrent use.
type Client struct {
	command, query *url.URL
	cfg            Config
	http           *http.Client
}

// New checks the configuration and returns a client.
func New(cfg Config) (*Client, error) {
	var errs []error
	parse := func(name, raw string) *url.URL {
		u, err := url.Parse(strings.TrimRight(raw, "/"))
		if raw == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s %q: want an absolute http(s) URL", name, raw))
			return nil
		}
		return u
	}
	c := &Client{command: parse("command URL", cfg.CommandURL), query: parse("query URL", cfg.QueryURL), cfg: cfg, http: cfg.HTTPClient}
	if cfg.Token == nil {
		errs = append(errs, errors.New("no token source"))
	}
	if cfg.MaxAttempts < 0 || cfg.MinBackoff < 0 || cfg.MaxBackoff < 0 || cfg.MaxRetryAfter < 0 {
		errs = append(errs, errors.New("attempts and back-offs must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("ssodir client: %w", err)
	}
	if c.http == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		c.http = &http.Client{Timeout: 60 * time.Second, Transport: tr}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.cfg.MinBackoff, 200*time.Millisecond)
	def(&c.cfg.MaxBackoff, 10*time.Second)
	def(&c.cfg.MaxRetryAfter, time.Minute)
	if c.cfg.MaxBackoff < c.cfg.MinBackoff {
		c.cfg.MaxBackoff = c.cfg.MinBackoff
	}
	if c.cfg.MaxAttempts == 0 {
		c.cfg.MaxAttempts = 5
	}
	if c.cfg.UserAgent == "" {
		c.cfg.UserAgent = "ssodir-go-client"
	}
	return c, nil
}

// Option changes one request: IfMatch, IdempotencyKey, MinVersion.
type Option func(*options)

type options struct {
	ifMatch    int64
	idemKey    string
	minVersion int64
}

// IfMatch makes a write conditional on the aggregate's version (a group's for membership
// changes): the API answers 412 version_mismatch when it differs.
func IfMatch(version int64) Option { return func(o *options) { o.ifMatch = version } }

// IdempotencyKey gives a write its Idempotency-Key (1–128 printable ASCII characters): the
// same request with the same key has its effect once, within 24 hours. A write with a key
// is also retried after a connection error, since sending it again cannot do it twice.
func IdempotencyKey(key string) Option { return func(o *options) { o.idemKey = key } }

// MinVersion makes a GetUser or GetGroup wait (up to 5 s, server side) until the query
// view reflects at least that version — read-your-writes after a command.
func MinVersion(version int64) Option { return func(o *options) { o.minVersion = version } }

// Result is what a write answers in its headers: the new version of the aggregate it
// changed (the group's for memberships) and the command's id.
type Result struct {
	Version   int64
	CommandID string
	// Status is the HTTP status of the answer.
	Status int
}

// request is one call, replayable for retries.
type request struct {
	base   *url.URL
	method string
	path   string
	query  url.Values
	body   []byte
	opts   options
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (c *Client) newRequest(base *url.URL, method, p string, in any, opts []Option) (*request, error) {
	r := &request{base: base, method: method, path: p}
	for _, o := range opts {
		o(&r.opts)
	}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", method, p, err)
		}
		r.body = b
	}
	return r, nil
}

// retrySafe reports whether a request can be sent again after a connection error without
// risking doing it twice: a read, or a write with an Idempotency-Key. (A 503 is always safe:
// the API answers it only when nothing was written.)
func (r *request) retrySafe() bool {
	return r.method == http.MethodGet || r.opts.idemKey != ""
}

// do sends a request, retrying as the package comment says, and returns a 2xx answer or
// an error (*Error for a problem answer).
func (c *Client) do(ctx context.Context, r *request) (*response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := c.send(ctx, r)
		var wait time.Duration
		cause := err
		switch {
		case err != nil:
			if ctx.Err() != nil || !r.retrySafe() || attempt >= c.cfg.MaxAttempts {
				return nil, err
			}
			wait = c.backoff(attempt)
		case resp.status >= 200 && resp.status < 300:
			return resp, nil
		default:
			perr := problem(r, resp)
			cause = perr
			if resp.status != http.StatusServiceUnavailable || attempt >= c.cfg.MaxAttempts {
				return nil, perr
			}
			wait = c.backoff(attempt)
			if perr.RetryAfter > 0 {
				if perr.RetryAfter > c.cfg.MaxRetryAfter {
					return nil, perr
				}
				wait = perr.RetryAfter
			}
		}
		if err := c.pause(ctx, r, attempt, wait, cause); err != nil {
			return nil, err
		}
	}
}

// pause waits before attempt+1 of r, having told OnRetry, unless ctx ends first.
func (c *Client) pause(ctx context.Context, r *request, attempt int, wait time.Duration, cause error) error {
	if c.cfg.OnRetry != nil {
		c.cfg.OnRetry(Retry{Method: r.method, URL: r.base.String() + r.path, Attempt: attempt, MaxAttempts: c.cfg.MaxAttempts, Wait: wait, Err: cause})
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("%s %s: %w", r.method, r.path, ctx.Err())
	case <-t.C:
		return nil
	}
}

// backoff is the full-jitter exponential back-off before attempt+1.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.MinBackoff << min(attempt-1, 20)
	if d <= 0 || d > c.cfg.MaxBackoff {
		d = c.cfg.MaxBackoff
	}
	return d/2 + rand.N(d/2+1)
}

func (c *Client) send(ctx context.Context, r *request) (*response, error) {
	hr, err := c.open(ctx, r)
	if err != nil {
		return nil, err
	}
	defer hr.Body.Close()
	data, err := io.ReadAll(io.LimitReader(hr.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", r.method, r.path, err)
	}
	return &response{status: hr.StatusCode, header: hr.Header, body: data}, nil
}

// open sends a request and returns the answer with its body unread.
func (c *Client) open(ctx context.Context, r *request) (*http.Response, error) {
	// Path segments are escaped by the callers (seg), so the URL is built as text.
	target := strings.TrimRight(r.base.String(), "/") + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	tok, err := c.cfg.Token.Token()
	if err != nil {
		return nil, fmt.Errorf("%s %s: get a token: %w", r.method, r.path, err)
	}
	tok.SetAuthHeader(req)
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.opts.ifMatch > 0 {
		req.Header.Set("If-Match", strconv.Quote(strconv.FormatInt(r.opts.ifMatch, 10)))
	}
	if r.opts.idemKey != "" {
		req.Header.Set("Idempotency-Key", r.opts.idemKey)
	}
	if r.opts.minVersion > 0 {
		req.Header.Set("X-Min-Version", strconv.FormatInt(r.opts.minVersion, 10))
	}
	hr, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", r.method, r.path, err)
	}
	return hr, nil
}

// call sends a request and decodes a 2xx JSON body into out (when out is not nil).
func (c *Client) call(ctx context.Context, base *url.URL, method, p string, in, out any, opts []Option) (*response, error) {
	r, err := c.newRequest(base, method, p, in, opts)
	if err != nil {
		return nil, err
	}
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if err := decode(resp, r, out); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

func decode(resp *response, r *request, out any) error {
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("%s %s: decode the %d answer: %w", r.method, r.path, resp.status, err)
	}
	return nil
}

// result reads a write's headers.
func result(resp *response) Result {
	v, _ := strconv.ParseInt(strings.Trim(resp.header.Get("ETag"), `"W/`), 10, 64)
	return Result{Version: v, CommandID: resp.header.Get("X-Command-Id"), Status: resp.status}
}

// seg escapes one path segment (a username or group name).
func seg(s string) string { return url.PathEscape(s) }
