package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/servicetest"
)

// syncBuffer is a bytes.Buffer that a note's timer may write while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A wait that lasts says what it waits for, and when it is over; a wait that ends at once
// says nothing.
func TestWaitNote(t *testing.T) {
	t.Parallel()
	var quick syncBuffer
	waitNote(&quick, "for nothing")()
	var long syncBuffer
	done := waitNote(&long, "until something is done")
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(long.String(), "waiting until something is done…"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no note after 30 s: %q", long.String())
		}
	}
	done()
	if !strings.Contains(long.String(), "\nwaited ") {
		t.Errorf("the end of the wait is not told: %q", long.String())
	}
	done()
	if strings.Count(long.String(), "waited") != 1 || quick.String() != "" {
		t.Errorf("notes: %q and %q", long.String(), quick.String())
	}
}

// users erase waits for the erasure's two passes (at least SSO_ERASURE_SETTLE, 10 s or
// more, apart) and says so while it waits.
func TestEraseSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c := newCtl(t, s)
	c.ok("tenants", "create", "eu")
	c.ok("users", "create", "gone", "--email", "gone@example.com")
	r := c.run("", "users", "erase", "gone", "--reason", "test", "--timeout", "5s")
	if !strings.Contains(r.out, "accepted") || !strings.Contains(r.errOut, "waiting until erasure ") || !strings.Contains(r.errOut, "--wait=false returns at once") {
		t.Fatalf("users erase printed %+v", r)
	}
}

// The client's retry of a 503 waits as Retry-After asks; a wait longer than a second says
// at once what it waits for and why, and one of a second or less says nothing.
func TestRetryAfterSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	const tenant = `{"system_id":"acme","tenant_id":"eu","status":"active","keycloak":null,"created_at":"2026-11-23T10:00:00Z","updated_at":"2026-11-23T10:00:00Z"}`
	for _, tc := range []struct {
		retryAfter string
		note       bool
	}{{"2", true}, {"1", false}} {
		var gets atomic.Int32
		query := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet || r.URL.Path != "/v1/systems/acme/tenants/eu" {
				http.NotFound(w, r)
				return
			}
			if gets.Add(1) == 1 {
				w.Header().Set("Retry-After", tc.retryAfter)
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte(`{"title":"Service unavailable","status":503,"code":"unavailable","detail":"DynamoDB is throttling this tenant"}`))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(tenant))
		}))
		c := newCtl(t, &servicetest.Services{CommandURL: query.URL, QueryURL: query.URL})
		r := c.run("", "tenants", "get", "eu", "-o", "json")
		query.Close()
		if r.code != 0 || gets.Load() != 2 {
			t.Fatalf("Retry-After %s: exit %d after %d GETs\n%s%s", tc.retryAfter, r.code, gets.Load(), r.out, r.errOut)
		}
		want := "waiting 2s before asking the query API again (attempt 2 of 5), after: GET /v1/systems/acme/tenants/eu: 503 unavailable: DynamoDB is throttling this tenant\n"
		if tc.note && r.errOut != want {
			t.Errorf("Retry-After %s: stderr %q, want %q", tc.retryAfter, r.errOut, want)
		}
		if !tc.note && r.errOut != "" {
			t.Errorf("Retry-After %s: a wait of a second said %q", tc.retryAfter, r.errOut)
		}
	}
}

// An import waits, once its users are written, until the query API shows them (--wait,
// the default). With the projector stopped that wait lasts (every read back waits, then is
// refused with Retry-After), and it says what it waits for, how long it waited, and what
// the query API does not show yet; the import itself succeeded.
func TestImportSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c := newCtl(t, s)
	c.ok("tenants", "create", "eu")
	s.Stop(t, "projector")
	r := c.run("", "import", "users", writeFile(t, "people.csv", "username,email\nann,ann@example.com\nbob,bob@example.com\n"), "-o", "json")
	if r.code != 0 {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	if sum := decodeJSON[importSummary](t, r.out); sum.Created != 2 {
		t.Fatalf("summary %+v", sum)
	}
	for _, want := range []string{"waiting until the query API shows the 2 users written (--wait=false: do not wait)…\n", "\nwaited ",
		"warning: 2 of the 2 users written are not shown by the query API yet"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.errOut)
		}
	}
}
