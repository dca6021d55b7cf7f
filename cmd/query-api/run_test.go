package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/events"
)

func TestRun(t *testing.T) {
	t.Run("--help prints the usage and succeeds", func(t *testing.T) {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"--help"}, config.Map(nil), &out, hooks{}); err != nil {
			t.Fatalf("run --help: %v", err)
		}
		if !strings.Contains(out.String(), "usage: query-api") || !strings.Contains(out.String(), "SSO_QUERY_ADDR") {
			t.Errorf("usage:\n%s", out.String())
		}
	})
	bad := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"an unknown argument fails", []string{"serve"}, nil, "unknown argument"},
		{"an unknown log level fails", nil, map[string]string{"SSO_LOG_LEVEL": "loud", "SSO_BOOTSTRAP_TOKEN": "x", "SSO_CURSOR_KEY": key32}, "SSO_LOG_LEVEL"},
		{"no way to authenticate fails", nil, map[string]string{"SSO_CURSOR_KEY": key32}, "SSO_BOOTSTRAP_TOKEN"},
		{"a bad listen address fails", nil, map[string]string{"SSO_QUERY_ADDR": "nowhere", "SSO_BOOTSTRAP_TOKEN": "x", "SSO_CURSOR_KEY": key32}, "SSO_QUERY_ADDR"},
		{"a KMS key without a cursor key fails, since cursors must verify everywhere", nil, map[string]string{"SSO_KMS_KEY_ID": "alias/x", "SSO_BOOTSTRAP_TOKEN": "x"}, "SSO_CURSOR_KEY"},
		{"the key that opens passwords does not stand in for the cursor key", nil, map[string]string{"SSO_SECRET_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "x"}, "SSO_CURSOR_KEY"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t.Context(), tc.args, config.Map(tc.env), &bytes.Buffer{}, hooks{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

// key32 is a valid SSO_CURSOR_KEY: 32 zero bytes.
const key32 = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

func TestStopDrainsRequestsInFlight(t *testing.T) {
	a := startApp(t, options{minVersionWait: time.Second})
	f := a.tenant(t, tenantA)
	apply(t, f, f.CreateUser(events.User{Username: "jdoe"}))

	// A read waiting for a version that never comes is in flight when the service stops.
	type answer struct {
		r   response
		err error
	}
	answers := make(chan answer, 1)
	go func() {
		r, err := a.do(context.Background(), bootstrap, tenantPath(tenantA, "/users/jdoe"), "X-Min-Version", "99")
		answers <- answer{r, err}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := a.stop(); err != nil {
		t.Fatalf("stop: %v, want a clean exit", err)
	}
	got := <-answers
	if got.err != nil {
		t.Fatalf("the request in flight failed: %v", got.err)
	}
	if r := got.r; r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Errorf("the request in flight got %d %s, want its full answer (503 with Retry-After)", r.status, r.body)
	}
}
