package client_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// The real services cannot be made to answer 503 on demand, to hang up mid-request or to
// be still provisioning a tenant; these tests use a scripted server for those answers.

type scripted struct {
	url     string
	mu      sync.Mutex
	answers []func(w http.ResponseWriter)
	calls   []*http.Request
	bodies  []string
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.calls = append(s.calls, r)
	s.bodies = append(s.bodies, string(b))
	var a func(http.ResponseWriter)
	if len(s.answers) > 0 {
		a, s.answers = s.answers[0], s.answers[1:]
	}
	s.mu.Unlock()
	if a == nil {
		http.Error(w, "no answer scripted", http.StatusTeapot)
		return
	}
	a(w)
}

func problemAnswer(status int, code string, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"type":"urn:ssodir:problem:`+code+`","title":"t","status":`+strconv.Itoa(status)+`,"code":"`+code+`","detail":"d"}`)
	}
}

func jsonAnswer(status int, body string, header ...string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func scriptedClient(t *testing.T, answers ...func(http.ResponseWriter)) (*client.Client, *scripted) {
	t.Helper()
	s := &scripted{answers: answers}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	c, err := client.New(client.Config{CommandURL: srv.URL, QueryURL: srv.URL, Token: client.StaticToken("tok"),
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

const userBody = `{"id":"u1","username":"jdoe","email":"jdoe@example.com","is_active":true,"attributes":{},"version":1}`

func TestRetries(t *testing.T) {
	ctx := context.Background()
	t.Run("a 503 is retried, with the same body and Idempotency-Key, until it succeeds", func(t *testing.T) {
		c, s := scriptedClient(t, problemAnswer(503, "unavailable", "Retry-After", "0"), problemAnswer(503, "unavailable"), jsonAnswer(201, userBody))
		u, err := c.Tenant("a", "b").CreateUser(ctx, client.NewUser{Username: "jdoe"}, client.IdempotencyKey("k1"))
		if err != nil || u.ID != "u1" {
			t.Fatalf("%+v %v", u, err)
		}
		if len(s.calls) != 3 || s.bodies[0] != s.bodies[2] || s.calls[2].Header.Get("Idempotency-Key") != "k1" {
			t.Fatalf("%d calls, bodies %q", len(s.calls), s.bodies)
		}
	})
	t.Run("a Retry-After is honoured", func(t *testing.T) {
		c, s := scriptedClient(t, problemAnswer(503, "unavailable", "Retry-After", "1"), jsonAnswer(200, userBody))
		start := time.Now()
		if _, err := c.Tenant("a", "b").GetUser(ctx, "jdoe"); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < time.Second || len(s.calls) != 2 {
			t.Fatalf("waited %v over %d calls, want at least the 1 s Retry-After", waited, len(s.calls))
		}
	})
	t.Run("OnRetry is told of each wait before it begins: how long, and why", func(t *testing.T) {
		s := &scripted{answers: []func(http.ResponseWriter){problemAnswer(503, "unavailable", "Retry-After", "1"), jsonAnswer(200, userBody)}}
		srv := httptest.NewServer(s)
		t.Cleanup(srv.Close)
		var told []client.Retry
		c, err := client.New(client.Config{CommandURL: srv.URL, QueryURL: srv.URL, Token: client.StaticToken("tok"), MaxAttempts: 3,
			OnRetry: func(r client.Retry) { told = append(told, r) }})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Tenant("a", "b").GetUser(ctx, "jdoe"); err != nil {
			t.Fatal(err)
		}
		if len(told) != 1 || told[0].Wait != time.Second || told[0].Attempt != 1 || told[0].MaxAttempts != 3 || told[0].Method != "GET" ||
			told[0].URL != srv.URL+"/v1/systems/a/tenants/b/users/jdoe" || !client.HasCode(told[0].Err, "unavailable") {
			t.Fatalf("told %+v", told)
		}
	})
	t.Run("503s beyond the attempts are returned as the last problem", func(t *testing.T) {
		c, s := scriptedClient(t, problemAnswer(503, "unavailable"), problemAnswer(503, "unavailable"), problemAnswer(503, "table_quota_exceeded"))
		_, err := c.CreateTenant(ctx, "a", client.NewTenant{TenantID: "b"})
		if !client.HasCode(err, client.CodeTableQuotaExceeded) || len(s.calls) != 3 {
			t.Fatalf("%v after %d calls", err, len(s.calls))
		}
	})
	t.Run("a 4xx is never retried", func(t *testing.T) {
		for _, code := range []string{"version_mismatch", "tenant_not_ready", "validation_failed", "not_found"} {
			status := map[string]int{"version_mismatch": 412, "tenant_not_ready": 409, "validation_failed": 400, "not_found": 404}[code]
			c, s := scriptedClient(t, problemAnswer(status, code), jsonAnswer(200, userBody))
			_, err := c.Tenant("a", "b").UpdateUser(ctx, "jdoe", client.UserPatch{}, client.IfMatch(3))
			if !client.HasCode(err, code) || len(s.calls) != 1 {
				t.Fatalf("%s: %v after %d calls", code, err, len(s.calls))
			}
			if got := s.calls[0].Header.Get("If-Match"); got != `"3"` {
				t.Fatalf("If-Match %q", got)
			}
		}
	})
	t.Run("a retry-after longer than allowed is returned at once", func(t *testing.T) {
		c, s := scriptedClient(t, problemAnswer(503, "unavailable", "Retry-After", "3600"), jsonAnswer(200, userBody))
		_, err := c.Tenant("a", "b").GetUser(ctx, "jdoe")
		var e *client.Error
		if !errors.As(err, &e) || e.RetryAfter != time.Hour || len(s.calls) != 1 {
			t.Fatalf("%v after %d calls", err, len(s.calls))
		}
	})
	t.Run("an answer that is not problem+json still has a code", func(t *testing.T) {
		c, _ := scriptedClient(t, func(w http.ResponseWriter) { http.Error(w, "bad gateway", http.StatusBadGateway) })
		_, err := c.Tenant("a", "b").GetUser(ctx, "jdoe")
		var e *client.Error
		if !errors.As(err, &e) || e.Status != 502 || e.Code != "http_502" {
			t.Fatalf("%v", err)
		}
	})
}

// hangUp accepts connections and closes them without answering.
func hangUp(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			buf := make([]byte, 4096)
			_, _ = conn.Read(buf)
			conn.Close()
		}
	}()
	return "http://" + ln.Addr().String(), &n
}

func TestConnectionErrors(t *testing.T) {
	url, n := hangUp(t)
	c, err := client.New(client.Config{CommandURL: url, QueryURL: url, Token: client.StaticToken("tok"),
		MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Tenant("a", "b").CreateUser(ctx, client.NewUser{Username: "x"}); err == nil || n.Load() != 1 {
		t.Fatalf("a create without a key: %v after %d connections, want one attempt (it may have been written)", err, n.Load())
	}
	n.Store(0)
	if _, err := c.Tenant("a", "b").CreateUser(ctx, client.NewUser{Username: "x"}, client.IdempotencyKey("k")); err == nil || n.Load() != 3 {
		t.Fatalf("a create with a key: %v after %d connections, want 3", err, n.Load())
	}
	n.Store(0)
	if _, err := c.Tenant("a", "b").GetUser(ctx, "x"); err == nil || n.Load() != 3 {
		t.Fatalf("a read: %v after %d connections, want 3", err, n.Load())
	}
}

func TestProvisioningAccepted(t *testing.T) {
	provisioning := `{"system_id":"a","tenant_id":"b","status":"provisioning","keycloak":null}`
	active := `{"system_id":"a","tenant_id":"b","status":"active","keycloak":null}`
	c, s := scriptedClient(t, jsonAnswer(202, provisioning), jsonAnswer(200, provisioning), problemAnswer(404, "not_found"), jsonAnswer(200, active))
	ctx := context.Background()
	p, err := c.CreateTenant(ctx, "a", client.NewTenant{TenantID: "b"})
	if err != nil || p.Status != http.StatusAccepted || p.Tenant.Status != client.TenantProvisioning {
		t.Fatalf("%+v %v", p, err)
	}
	tn, err := c.WaitTenantActive(ctx, "a", "b", time.Millisecond)
	if err != nil || tn.Status != client.TenantActive || len(s.calls) != 4 {
		t.Fatalf("%+v %v after %d calls", tn, err, len(s.calls))
	}
	for _, r := range s.calls[1:] {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/systems/a/tenants/b" {
			t.Fatalf("polled %s %s", r.Method, r.URL.Path)
		}
	}
}

func TestPathSegmentsAreEscaped(t *testing.T) {
	c, s := scriptedClient(t, jsonAnswer(200, `{"name":"a/b c"}`))
	if _, err := c.Tenant("a", "b").GetGroup(context.Background(), "a/b c"); err != nil {
		t.Fatal(err)
	}
	if got := s.calls[0].URL.EscapedPath(); got != "/v1/systems/a/tenants/b/groups/a%2Fb%20c" {
		t.Fatalf("path %s", got)
	}
}

func TestClientCredentialsToken(t *testing.T) {
	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	kc.AddRealm("ops", "ssodirctl", "s3cret")
	_, s := scriptedClient(t, jsonAnswer(200, userBody), jsonAnswer(200, userBody))
	ctx := context.Background()
	good, err := client.New(client.Config{CommandURL: "http://unused.invalid", QueryURL: s.url,
		Token: client.ClientCredentials(ctx, kc.URL()+"/realms/ops/protocol/openid-connect/token", "ssodirctl", "s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := good.Tenant("a", "b").GetUser(ctx, "jdoe"); err != nil {
			t.Fatal(err)
		}
	}
	first, second := s.calls[0].Header.Get("Authorization"), s.calls[1].Header.Get("Authorization")
	if !strings.HasPrefix(first, "Bearer ") || len(first) < 20 || first != second {
		t.Fatalf("authorization %q then %q, want one cached bearer token", first, second)
	}
	bad, _ := client.New(client.Config{CommandURL: "http://unused.invalid", QueryURL: s.url,
		Token: client.ClientCredentials(ctx, kc.URL()+"/realms/ops/protocol/openid-connect/token", "ssodirctl", "wrong")})
	if _, err := bad.Tenant("a", "b").GetUser(ctx, "jdoe"); err == nil || !strings.Contains(err.Error(), "token") || len(s.calls) != 2 {
		t.Fatalf("wrong secret: %v, %d calls to the API", err, len(s.calls))
	}
}
