package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

// These tests start the real command API with run() on 127.0.0.1:0, each with its own
// table prefix on this package's DynamoDB Local, and talk HTTP to it.

func TestMain(m *testing.M) {
	// The AWS SDK takes its region and credential chain from the process environment, as in
	// production; each test's endpoint comes from its own configuration (config.Env).
	for k, v := range map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "dummy", "AWS_SECRET_ACCESS_KEY": "dummy",
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
	dynamotest.Main(m)
}

// syncBuffer collects what the app logs, from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func randomText(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// testEnv is a fresh configuration: its own table prefix, secret key and bootstrap token,
// on this package's DynamoDB Local.
func testEnv(t testing.TB) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, kv := range dynamotest.Current(t).Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	env["SSO_SECRET_KEY"] = base64.StdEncoding.EncodeToString(key)
	env["SSO_BOOTSTRAP_TOKEN"] = "boot-" + randomText(t, 18)
	env["SSO_TABLE_PREFIX"] = dynamotest.UniqueName("capi")
	env["SSO_COMMAND_ADDR"] = "127.0.0.1:0"
	env["SSO_LOG_LEVEL"] = "debug"
	// Tables are ready at once on DynamoDB Local, but a busy machine may take seconds:
	// the tests that want 202 set their own wait.
	env["SSO_PROVISION_WAIT"] = "30s"
	return env
}

// app is one running command API.
type app struct {
	t     *testing.T
	url   string
	env   map[string]string
	logs  *syncBuffer
	db    *dynamodb.Client
	names dynamo.Names
	// routes are the routes the service serves.
	routes []*echo.Route

	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	stopErr  error
}

// startApp runs the command API until the test ends, and checks that it then stops
// cleanly.
func startApp(t *testing.T, env map[string]string) *app {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a := &app{
		t: t, env: env, logs: &syncBuffer{}, cancel: cancel, done: make(chan error, 1),
		db: dynamotest.Current(t).DynamoDB(), names: dynamo.Names{Prefix: env["SSO_TABLE_PREFIX"]},
	}
	listening := make(chan string, 1)
	go func() {
		a.done <- run(ctx, nil, config.Map(env), io.Discard, hooks{
			onListen: func(addr string) { listening <- addr },
			onRoutes: func(rs []*echo.Route) { a.routes = rs },
			logs:     a.logs,
		})
	}()
	select {
	case addr := <-listening:
		a.url = "http://" + addr
	case err := <-a.done:
		cancel()
		t.Fatalf("run returned before listening: %v", err)
	case <-time.After(time.Minute):
		cancel()
		t.Fatal("the command API did not listen within a minute")
	}
	t.Cleanup(func() {
		if err := a.stop(); err != nil {
			t.Errorf("run returned %v after its context was cancelled, want nil", err)
		}
	})
	return a
}

// stop cancels run's context and waits for it to return.
func (a *app) stop() error {
	a.stopOnce.Do(func() {
		a.cancel()
		select {
		case a.stopErr = <-a.done:
		case <-time.After(30 * time.Second):
			a.stopErr = fmt.Errorf("run did not return within 30s of its context being cancelled")
		}
	})
	return a.stopErr
}

func (a *app) token() string { return a.env["SSO_BOOTSTRAP_TOKEN"] }

// reply is an HTTP response, read whole.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) String() string {
	return fmt.Sprintf("%d %s", r.status, bytes.TrimSpace(r.body))
}

// problem is API.md's error body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

var client = &http.Client{Timeout: 60 * time.Second}

// do sends a request. body is nil (none), a string, []byte or io.Reader (sent as is), or a
// value sent as JSON. hdr are name/value pairs; Authorization defaults to the bootstrap
// token and Content-Type to application/json when there is a body. An empty value removes
// a header, except for Idempotency-Key, which is then sent empty.
func (a *app) do(t testing.TB, method, path string, body any, hdr ...string) reply {
	t.Helper()
	return send(t, a.url, a.token(), method, path, body, hdr...)
}

func send(t testing.TB, base, token, method, path string, body any, hdr ...string) reply {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	case io.Reader:
		r = b
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" && hdr[i] != "Idempotency-Key" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header[http.CanonicalHeaderKey(hdr[i])] = []string{hdr[i+1]}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// want fails the test unless r has the status.
func (r reply) want(t testing.TB, status int) reply {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %s, want status %d", r, status)
	}
	return r
}

// wantProblem fails the test unless r is a problem+json answer with status and code.
func (r reply) wantProblem(t testing.TB, status int, code string) problem {
	t.Helper()
	if r.status != status {
		t.Fatalf("got %s, want %d %s", r, status, code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var p problem
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("problem body %s: %v", r.body, err)
	}
	if p.Code != code || p.Status != status || p.Type != "urn:ssodir:problem:"+code || p.Title == "" {
		t.Errorf("problem %+v, want code %s and status %d", p, code, status)
	}
	return p
}

func (r reply) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// etag is the version an ETag header names, or -1.
func (r reply) etag() int64 {
	s, err := strconv.Unquote(r.header.Get("ETag"))
	if err != nil {
		return -1
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// user is API.md's user object, with anything else it might carry.
type user struct {
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

type group struct {
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Attributes  map[string][]string `json:"attributes"`
	Version     int64               `json:"version"`
	CreatedAt   string              `json:"created_at"`
	UpdatedAt   string              `json:"updated_at"`
}

var timestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// newTenant provisions a fresh tenant of system acme and returns its path.
func (a *app) newTenant(t testing.TB) string {
	t.Helper()
	id := dynamotest.UniqueName("t")
	a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id}).want(t, http.StatusCreated)
	return "/v1/systems/acme/tenants/" + id
}

// tenantOf splits a tenant path into system and tenant.
func tenantOf(base string) (string, string) {
	parts := strings.Split(strings.TrimPrefix(base, "/"), "/")
	return parts[2], parts[4]
}

// items scans a table (test code only: the service never scans).
func (a *app) items(t testing.TB, table string) []map[string]types.AttributeValue {
	t.Helper()
	var out []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(a.db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		out = append(out, page.Items...)
	}
	return out
}

// commandsTable is the write table of the tenant at base.
func (a *app) commandsTable(base string) string {
	system, tenant := tenantOf(base)
	return a.names.Commands(system, tenant)
}

// record is the decoded config#<version> record of an aggregate.
func (a *app) record(t testing.TB, base string, kind events.AggregateKind, key string, version int64) events.Envelope {
	t.Helper()
	out, err := a.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(a.commandsTable(base)),
		Key: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: dynamo.AggregateID(kind, key)},
			"sk": &types.AttributeValueMemberS{Value: dynamo.HistorySK(version)},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil || out.Item == nil {
		t.Fatalf("record %s %s v%d: %v (item %v)", kind, key, version, err, out)
	}
	e, err := dynamo.DecodeRecord(events.NewRegistry(), out.Item)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func attrS(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
