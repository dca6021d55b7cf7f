package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/go-jose/go-jose/v4"
	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/queries"
	"github.com/ssodir/ssodir/internal/queries/querytest"
)

func TestMain(m *testing.M) {
	// The SDK's default chain reads credentials from the environment; DynamoDB Local takes
	// any key of letters and digits. Without them the chain would probe the EC2 metadata
	// service.
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "dummy", "AWS_SECRET_ACCESS_KEY": "dummy", "AWS_REGION": "us-east-1",
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		os.Setenv(k, v)
	}
	dynamotest.Main(m)
}

const (
	bootstrap = "test-bootstrap-token"
	audience  = "ssodir"
	system    = "acme"
	tenantA   = "eu"
	tenantB   = "us"
)

// app is the real query-api, started in-process on a free port, with its own table prefix.
type app struct {
	url   string
	names dynamo.Names
	iss   *issuer
	// routes are the routes the service serves.
	routes []*echo.Route
	// stop ends the service as SIGTERM does and returns what run returned.
	stop func() error
}

type options struct {
	minVersionWait time.Duration
	oidc           bool
	// wrapDB wraps the DynamoDB client the queries use (to count reads).
	wrapDB func(queries.DB) queries.DB
	// env adds to (or overrides) the service's environment.
	env map[string]string
}

func startApp(t *testing.T, o options) *app {
	t.Helper()
	local := dynamotest.Current(t)
	a := &app{names: dynamo.Names{Prefix: dynamotest.UniqueName("qa")}}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SSO_TABLE_PREFIX":          a.names.Prefix,
		"SSO_CURSOR_KEY":            base64.StdEncoding.EncodeToString(key),
		"SSO_BOOTSTRAP_TOKEN":       bootstrap,
		"SSO_QUERY_ADDR":            "127.0.0.1:0",
		"SSO_LOG_LEVEL":             "error",
		"AWS_ENDPOINT_URL_DYNAMODB": local.Endpoint,
	}
	for k, v := range o.env {
		env[k] = v
	}
	if o.oidc {
		a.iss = newIssuer(t)
		env["SSO_OIDC_ISSUER"] = a.iss.srv.URL
		env["SSO_OIDC_AUDIENCE"] = audience
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, config.Map(env), io.Discard, hooks{
			onListen:       func(s string) { addr <- s },
			onRoutes:       func(rs []*echo.Route) { a.routes = rs },
			minVersionWait: o.minVersionWait,
			wrapDB:         o.wrapDB,
		})
	}()
	select {
	case s := <-addr:
		a.url = "http://" + s
	case err := <-done:
		cancel()
		t.Fatalf("query-api did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("query-api did not start within 30 s")
	}
	var once sync.Once
	var stopErr error
	a.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = errors.New("query-api did not stop within 30 s of its context ending")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := a.stop(); err != nil {
			t.Errorf("query-api stopped with %v, want a clean stop", err)
		}
	})
	return a
}

// tenant creates a tenant with read tables under the app's prefix.
func (a *app) tenant(t *testing.T, tenant string) *querytest.Tenant {
	t.Helper()
	f, err := querytest.Setup(t.Context(), dynamotest.Current(t).DynamoDB(), a.names, system, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func apply(t *testing.T, f *querytest.Tenant, es ...events.Envelope) {
	t.Helper()
	if err := f.Apply(t.Context(), es...); err != nil {
		t.Fatal(err)
	}
}

// response is an answer of the app.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// problem is the code of a problem+json answer.
func (r response) problem(t *testing.T) (code string, fields []string) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("content type %q, want problem+json; body %s", ct, r.body)
	}
	var p struct {
		Code   string `json:"code"`
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	r.json(t, &p)
	for _, e := range p.Errors {
		fields = append(fields, e.Field)
	}
	return p.Code, fields
}

// get sends GET path with the bearer token (none when empty) and extra headers in pairs.
func (a *app) get(t *testing.T, token, path string, header ...string) response {
	t.Helper()
	r, err := a.do(t.Context(), token, path, header...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// do is get for goroutines other than the test's, which must not call t.Fatal.
func (a *app) do(ctx context.Context, token, path string, header ...string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+path, nil)
	if err != nil {
		return response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: res.StatusCode, header: res.Header, body: body}, nil
}

// tenantPath is the path of a route of tenant.
func tenantPath(tenant, rest string) string {
	return "/v1/systems/" + system + "/tenants/" + tenant + rest
}

// page is a decoded list page.
type page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

type userJSON struct {
	Username   string              `json:"username"`
	Email      string              `json:"email"`
	FirstName  string              `json:"first_name"`
	LastName   string              `json:"last_name"`
	IsActive   bool                `json:"is_active"`
	Attributes map[string][]string `json:"attributes"`
	Version    int64               `json:"version"`
	CreatedAt  string              `json:"created_at"`
	UpdatedAt  string              `json:"updated_at"`
}

type groupJSON struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     int64  `json:"version"`
}

type activityJSON struct {
	EventID    string                     `json:"event_id"`
	Type       string                     `json:"type"`
	Entity     string                     `json:"entity"`
	Actor      string                     `json:"actor"`
	OccurredAt string                     `json:"occurred_at"`
	Version    int64                      `json:"version"`
	Changes    map[string]json.RawMessage `json:"changes"`
}

// list fetches one page of path with query q and checks that it is a 200.
func list[T any](t *testing.T, a *app, token, path string, q url.Values) page[T] {
	t.Helper()
	p := path
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	r := a.get(t, token, p)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", p, r.status, r.body)
	}
	var pg page[T]
	r.json(t, &pg)
	if pg.Items == nil {
		t.Fatalf("GET %s: items is not a list: %s", p, r.body)
	}
	return pg
}

// walk follows a list from its first page to its last, limit items at a time, and returns
// every item in order. between runs after each page.
func walk[T any](t *testing.T, a *app, path string, q url.Values, limit int, between func()) []T {
	t.Helper()
	q = cloneValues(q)
	q.Set("limit", strconv.Itoa(limit))
	var all []T
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%s: more than 1000 pages", path)
		}
		pg := list[T](t, a, bootstrap, path, q)
		if len(pg.Items) > limit {
			t.Fatalf("%s: page of %d items with limit %d", path, len(pg.Items), limit)
		}
		all = append(all, pg.Items...)
		if between != nil {
			between()
		}
		if pg.NextCursor == nil {
			return all
		}
		q.Set("cursor", *pg.NextCursor)
	}
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// issuer is an OIDC issuer on a local port: discovery document and a JWKS with one RSA key.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &issuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{
			"issuer":                                iss.srv.URL,
			"jwks_uri":                              iss.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	iss.srv = httptest.NewServer(mux)
	t.Cleanup(iss.srv.Close)
	return iss
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// token is a JWT of the issuer for subject sub with scope and tenants ("system/tenant").
func (iss *issuer) token(t *testing.T, sub, scope string, tenants ...string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: iss.key, KeyID: "k1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(map[string]any{
		"iss": iss.srv.URL, "aud": audience, "sub": sub, "scope": scope, "sso_tenants": tenants,
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	})
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func localDB(t *testing.T) *dynamodb.Client { return dynamotest.Current(t).DynamoDB() }

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
