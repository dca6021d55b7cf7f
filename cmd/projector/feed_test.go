package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/progress"
	"github.com/ssodir/ssodir/internal/streams"
)

func TestMain(m *testing.M) {
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

// startProjector runs the projector service in process on 127.0.0.1:0 and returns its
// base URL; it stops when the test ends.
func startProjector(t *testing.T, extra map[string]string) (string, map[string]string) {
	t.Helper()
	env := map[string]string{}
	for _, kv := range dynamotest.Current(t).Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	env["SSO_TABLE_PREFIX"] = dynamotest.UniqueName("proj")
	env["SSO_PROJECTOR_ADDR"] = "127.0.0.1:0"
	env["SSO_LOG_LEVEL"] = "warn"
	for k, v := range extra {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, nil, config.Map(env), io.Discard, func(a string) { addr <- a }) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("projector: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("the projector did not stop")
		}
	})
	select {
	case a := <-addr:
		return "http://" + a, env
	case err := <-done:
		t.Fatalf("projector: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the projector did not listen")
	}
	return "", nil
}

func get(t *testing.T, ctx context.Context, url, token, origin string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func wantProblem(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	defer resp.Body.Close()
	var p struct{ Code string }
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" ||
		json.NewDecoder(resp.Body).Decode(&p) != nil || p.Code != code {
		t.Fatalf("status %d (%s), code %q; want %d problem %s", resp.StatusCode, resp.Header.Get("Content-Type"), p.Code, status, code)
	}
}

// The progress feed names aggregates of every tenant: it needs the service token, serves
// at most SSO_PROGRESS_MAX_SUBSCRIBERS streams, is never offered to a browser (while the
// probes are, to the console's origin), and the projector publishes its URL in its
// heartbeat row, where query APIs find it.
func TestProgressFeedIsNotOpen(t *testing.T) {
	const token, origin = "feed-secret", "http://console.example"
	base, env := startProjector(t, map[string]string{"SSO_PROGRESS_TOKEN": token, "SSO_PROGRESS_MAX_SUBSCRIBERS": "1",
		"SSO_CORS_ORIGINS": origin})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	wantProblem(t, get(t, ctx, base+progress.Path, "", ""), http.StatusUnauthorized, "unauthorized")
	wantProblem(t, get(t, ctx, base+progress.Path, "other", ""), http.StatusUnauthorized, "unauthorized")

	first := get(t, ctx, base+progress.Path, token, origin)
	defer first.Body.Close()
	if first.StatusCode != http.StatusOK {
		t.Fatalf("with the token: status %d", first.StatusCode)
	}
	if h := first.Header.Get("Access-Control-Allow-Origin"); h != "" {
		t.Errorf("the feed answered a browser origin with Access-Control-Allow-Origin %q", h)
	}
	second := get(t, ctx, base+progress.Path, token, "")
	if second.Header.Get("Retry-After") == "" {
		t.Error("no Retry-After on the refusal beyond the cap")
	}
	wantProblem(t, second, http.StatusServiceUnavailable, "unavailable")

	// A preflight for the feed is not answered for the console's origin; one for /metrics is.
	for path, allowed := range map[string]bool{progress.Path: false, "/metrics": true} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodOptions, base+path, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "authorization")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Access-Control-Allow-Origin") == origin; got != allowed {
			t.Errorf("preflight of %s: Access-Control-Allow-Origin %q", path, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	// Query APIs find the feed in the projector's heartbeat row.
	db := dynamotest.Current(t).DynamoDB()
	table := dynamo.Names{Prefix: env["SSO_TABLE_PREFIX"]}.StreamLeases()
	deadline := time.Now().Add(30 * time.Second)
	for {
		addrs, err := streams.OwnerAddresses(ctx, db, table, consumer, time.Minute)
		if err == nil && len(addrs) == 1 && addrs[0] == base {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat rows name %v (%v), want [%s]", addrs, err, base)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
