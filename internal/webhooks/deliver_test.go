package webhooks_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/secrets"
	"github.com/ssodir/ssodir/internal/webhooks"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const system, tenant = "s1", "t1"

type fixture struct {
	table string
	store *webhooks.Store
	feed  *changefeed.Appender
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := dynamotest.Current(t).DynamoDB()
	table := changefeed.TableName(dynamo.Names{Prefix: dynamotest.UniqueName("wh")})
	if err := dynamo.EnsureTable(context.Background(), db, changefeed.Table(table)); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secrets.NewLocal(key)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{table: table, store: webhooks.NewStore(db, table, box, 0, nil),
		feed: changefeed.NewAppender(db, table, changefeed.Options{})}
}

func (f *fixture) append(t *testing.T, agg string, v int64) {
	t.Helper()
	ev, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": fmt.Sprintf("%s-v%d", agg, v), "type": "io.ssodir.user.updated",
		"subject": "user:" + agg, "data": map[string]any{"id": agg, "version": v}})
	if err := f.feed.Append(context.Background(), changefeed.Change{System: system, Tenant: tenant, Aggregate: agg, Version: v, Event: ev}); err != nil {
		t.Error(err)
	}
}

// receiver is an endpoint that records what it is sent; before answers each request
// before it is taken (a failure or a hang), nil: taken.
type receiver struct {
	mu       sync.Mutex
	got      []received
	requests atomic.Int64
	before   func(n int64, r *http.Request) (status int)
	srv      *httptest.Server
}

type received struct {
	header http.Header
	body   []byte
	id     string
	agg    string
	ver    int64
}

func newReceiver(t *testing.T, before func(n int64, r *http.Request) int) *receiver {
	rc := &receiver{before: before}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rc.requests.Add(1)
		body, _ := io.ReadAll(r.Body)
		if rc.before != nil {
			if status := rc.before(n, r); status != 0 {
				w.WriteHeader(status)
				return
			}
		}
		var ev struct {
			ID   string `json:"id"`
			Data struct {
				ID      string `json:"id"`
				Version int64  `json:"version"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		rc.mu.Lock()
		rc.got = append(rc.got, received{header: r.Header.Clone(), body: body, id: ev.ID, agg: ev.Data.ID, ver: ev.Data.Version})
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) snapshot() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// distinct is how many distinct changes the receiver took.
func (rc *receiver) distinct() int {
	seen := map[string]bool{}
	for _, g := range rc.snapshot() {
		seen[g.id] = true
	}
	return len(seen)
}

func fastOptions(log *zap.Logger) webhooks.Options {
	return webhooks.Options{Policy: webhooks.Policy{AllowPrivate: true}, Poll: 20 * time.Millisecond, Lease: 3 * time.Second,
		Batch: 7, Timeout: 700 * time.Millisecond, Backoff: func(int) time.Duration { return 50 * time.Millisecond }, Log: log}
}

func register(t *testing.T, f *fixture, url string, types ...string) (webhooks.Endpoint, string) {
	t.Helper()
	e, secret, err := f.store.Create(context.Background(), webhooks.Endpoint{System: system, Tenant: tenant,
		ID: fmt.Sprintf("wh-%d", time.Now().UnixNano()), URL: url, Types: types, CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return e, secret
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute) // generous: a loaded CI machine
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEveryEndpointGetsEveryChangeInOrderThroughFailuresHangsAndARestart: changes appended
// by concurrent writers reach a healthy endpoint, one that fails for a while and one that
// hangs for a while, while the deliverer is stopped and replaced and a second runs beside
// it: each endpoint gets every change, each aggregate's in version order, every one signed
// so that the Standard Webhooks algorithm (written in the test) verifies it, with the
// secret of the moment (before or after a rotation).
func TestEveryEndpointGetsEveryChangeInOrderThroughFailuresHangsAndARestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.append(t, "before", 1) // before the endpoints: not delivered
	good := newReceiver(t, nil)
	failing := newReceiver(t, func(n int64, _ *http.Request) int {
		if n <= 6 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	hanging := newReceiver(t, func(n int64, r *http.Request) int {
		if n <= 3 {
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return http.StatusOK
		}
		return 0
	})
	type ep struct {
		rc      *receiver
		e       webhooks.Endpoint
		secrets []string
	}
	var eps []*ep
	for _, rc := range []*receiver{good, failing, hanging} {
		e, s := register(t, f, rc.srv.URL+"/hook")
		eps = append(eps, &ep{rc: rc, e: e, secrets: []string{s}})
	}

	const aggregates, versions = 6, 15
	var writers sync.WaitGroup
	for a := range aggregates {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for v := int64(1); v <= versions; v++ {
				f.append(t, fmt.Sprintf("agg%d", a), v)
			}
		}()
	}

	first, err := webhooks.NewDeliverer(f.store, fastOptions(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	ctx1, stop1 := context.WithCancel(context.Background())
	done1 := make(chan struct{})
	go func() { first.Run(ctx1); close(done1) }()
	eventually(t, "the first deliveries", func() bool { return good.distinct() >= 10 })
	// A rotation mid-way: from now on both secrets sign.
	_, rotated, err := f.store.RotateSecret(context.Background(), system, tenant, eps[0].e.ID)
	if err != nil {
		t.Fatal(err)
	}
	eps[0].secrets = append(eps[0].secrets, rotated)
	stop1()
	<-done1 // a restart: the first deliverer is gone

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	for range 2 { // its replacement, and another process beside it
		d, err := webhooks.NewDeliverer(f.store, fastOptions(zap.NewNop()))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
	writers.Wait()
	total := aggregates * versions
	for _, x := range eps {
		eventually(t, "every change at "+x.rc.srv.URL, func() bool { return x.rc.distinct() == total })
	}
	stop()
	wg.Wait()

	for i, x := range eps {
		last := map[string]int64{}
		for _, g := range x.rc.snapshot() {
			if g.agg == "before" {
				t.Fatalf("endpoint %d got a change from before it was registered", i)
			}
			if g.ver < last[g.agg] {
				t.Fatalf("endpoint %d got %s v%d after v%d", i, g.agg, g.ver, last[g.agg])
			}
			last[g.agg] = g.ver
			if g.header.Get("webhook-id") != g.id {
				t.Fatalf("webhook-id %q for event %q", g.header.Get("webhook-id"), g.id)
			}
			ok := false
			for _, s := range x.secrets {
				ok = ok || verify(t, s, g.header, g.body)
			}
			if !ok {
				t.Fatalf("endpoint %d: the signature of %s does not verify", i, g.id)
			}
		}
		for a := range aggregates {
			if got := last[fmt.Sprintf("agg%d", a)]; got != versions {
				t.Fatalf("endpoint %d: agg%d reached v%d", i, a, got)
			}
		}
	}
	if failing.requests.Load() <= int64(total) || hanging.requests.Load() <= int64(total) {
		t.Fatalf("the failing and hanging endpoints were not retried (%d, %d requests)", failing.requests.Load(), hanging.requests.Load())
	}
	// After the rotation, deliveries carry two signatures.
	if got := good.snapshot(); len(strings.Split(got[len(got)-1].header.Get("webhook-signature"), " ")) != 2 {
		t.Fatalf("the last delivery after a rotation has signatures %q", got[len(got)-1].header.Get("webhook-signature"))
	}
	// The attempts are listed, newest first, with the subject from the feed.
	ds, _, err := f.store.Deliveries(context.Background(), system, tenant, eps[1].e.ID, "", 500)
	if err != nil {
		t.Fatal(err)
	}
	failed, delivered := 0, 0
	for i, d := range ds {
		if i > 0 && d.At.After(ds[i-1].At) {
			t.Fatal("deliveries are not newest first")
		}
		switch d.Status {
		case "failed":
			failed++
			if d.ResponseStatus != http.StatusServiceUnavailable || d.NextAttempt.IsZero() {
				t.Fatalf("failed attempt %+v", d)
			}
		case "delivered":
			delivered++
			if !strings.HasPrefix(d.Subject, "user:agg") || d.EventID == "" || d.Type != "io.ssodir.user.updated" {
				t.Fatalf("delivery %+v", d)
			}
		}
	}
	if failed != 6 || delivered < total {
		t.Fatalf("%d failed and %d delivered attempts listed", failed, delivered)
	}
}

func TestAnEndpointFailingTooLongIsDisabledWithAnAlertUntilReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var down atomic.Bool
	down.Store(true)
	rc := newReceiver(t, func(int64, *http.Request) int {
		if down.Load() {
			return http.StatusInternalServerError
		}
		return 0
	})
	healthy := newReceiver(t, nil)
	e, _ := register(t, f, rc.srv.URL)
	register(t, f, healthy.srv.URL)
	only, _ := register(t, f, healthy.srv.URL+"/created", "user.created")
	f.append(t, "a", 1)
	f.append(t, "a", 2)

	core, logs := observer.New(zapcore.ErrorLevel)
	o := fastOptions(zap.New(core))
	o.GiveUp = 300 * time.Millisecond
	reg := prometheus.NewRegistry()
	o.Registerer = reg
	d, err := webhooks.NewDeliverer(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()

	eventually(t, "the endpoint disabled", func() bool {
		got, err := f.store.Get(ctx, system, tenant, e.ID)
		return err == nil && got.State == webhooks.StateDisabled
	})
	// The other endpoint went on meanwhile; the one for user.created only got nothing.
	eventually(t, "the healthy endpoint", func() bool { return healthy.distinct() == 2 })
	// The alert follows the write that disables.
	eventually(t, "the alert", func() bool { return logs.FilterMessageSnippet("webhook endpoint disabled").Len() > 0 })
	if n := logs.FilterMessageSnippet("webhook endpoint disabled").Len(); n != 1 {
		t.Fatalf("%d alerts logged", n)
	}
	want := `
# HELP ssodir_webhooks_disabled_total Webhook endpoints disabled after failing for a day (or falling behind the feed's retention): alert on it; a replay re-enables them.
# TYPE ssodir_webhooks_disabled_total counter
ssodir_webhooks_disabled_total{system="s1",tenant="t1"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ssodir_webhooks_disabled_total"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the filtered endpoint past both changes", func() bool {
		got, err := f.store.Get(ctx, system, tenant, only.ID)
		return err == nil && got.Position.After == 2
	})
	if n := healthy.requests.Load(); n != 2 {
		t.Fatalf("the endpoints of %s had %d requests; the one for user.created only should get none", healthy.srv.URL, n)
	}
	before := rc.requests.Load()
	time.Sleep(200 * time.Millisecond) // a disabled endpoint gets nothing more (not a timing assertion: a bound on what may happen)
	if rc.requests.Load() != before {
		t.Fatal("a disabled endpoint was sent more")
	}

	// A replay from the start of the feed re-enables it and delivers everything again.
	down.Store(false)
	if _, err := f.store.Replay(ctx, system, tenant, e.ID, &changefeed.Position{After: 0, Seen: time.Now()}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the replayed endpoint", func() bool { return rc.distinct() == 2 })
	got, _ := f.store.Get(ctx, system, tenant, e.ID)
	if got.State != webhooks.StateActive || got.Attempt != 0 || got.LastError != "" {
		t.Fatalf("after the replay: %+v", got)
	}
}

// TestDeliveryRefusesPrivateAddressesAfterResolution: an endpoint registered while private
// addresses were allowed (or whose name now resolves to one) is not dialed by a deliverer
// that does not allow them.
func TestDeliveryRefusesPrivateAddressesAfterResolution(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := newReceiver(t, nil)
	e, _ := register(t, f, strings.Replace(rc.srv.URL, "127.0.0.1", "localhost", 1))
	f.append(t, "a", 1)
	o := fastOptions(zap.NewNop())
	o.Policy = webhooks.Policy{}
	o.Backoff = func(int) time.Duration { return time.Hour }
	d, err := webhooks.NewDeliverer(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eventually(t, "a failed attempt", func() bool {
		if err := d.Round(ctx); err != nil {
			t.Fatal(err)
		}
		d.Wait()
		got, err := f.store.Get(ctx, system, tenant, e.ID)
		return err == nil && got.Attempt > 0
	})
	got, _ := f.store.Get(ctx, system, tenant, e.ID)
	if rc.requests.Load() != 0 || !strings.Contains(got.LastError, "not a public address") {
		t.Fatalf("%d requests; last error %q", rc.requests.Load(), got.LastError)
	}
}

func TestRedirectsAreNotFollowedAndBodiesAreCapped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	target := newReceiver(t, nil)
	var bigServed atomic.Int64
	redirect := httptest.NewServer(http.RedirectHandler(target.srv.URL, http.StatusTemporaryRedirect))
	defer redirect.Close()
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 32<<10)
		for range 1024 { // 32 MB offered
			n, err := w.Write(chunk)
			bigServed.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer big.Close()
	r, _ := register(t, f, redirect.URL)
	b, _ := register(t, f, big.URL)
	f.append(t, "a", 1)
	o := fastOptions(zap.NewNop())
	o.Backoff = func(int) time.Duration { return time.Hour }
	d, err := webhooks.NewDeliverer(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	eventually(t, "both attempted", func() bool {
		_ = d.Round(ctx)
		d.Wait()
		gr, _ := f.store.Get(ctx, system, tenant, r.ID)
		gb, _ := f.store.Get(ctx, system, tenant, b.ID)
		return gr.Attempt > 0 && gb.Position.After == 1
	})
	gr, _ := f.store.Get(ctx, system, tenant, r.ID)
	if target.requests.Load() != 0 || gr.LastStatus != http.StatusTemporaryRedirect {
		t.Fatalf("redirect followed (%d requests at the target), status %d", target.requests.Load(), gr.LastStatus)
	}
	if bigServed.Load() >= 32<<20 {
		t.Fatalf("the whole %d-byte body was read", bigServed.Load())
	}
}

// TestDrainDeliversWhatIsDueAndReturns: the Lambda-mode run delivers every change due to a
// healthy endpoint, makes one attempt at a failing one (whose next is not due before the
// run's bound) and returns.
func TestDrainDeliversWhatIsDueAndReturns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	healthy := newReceiver(t, nil)
	failing := newReceiver(t, func(int64, *http.Request) int { return http.StatusBadGateway })
	register(t, f, healthy.srv.URL)
	bad, _ := register(t, f, failing.srv.URL)
	for v := int64(1); v <= 3; v++ {
		f.append(t, "a", v)
	}
	o := fastOptions(zap.NewNop())
	o.Backoff = webhooks.Backoff
	d, err := webhooks.NewDeliverer(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := d.Drain(ctx, time.Now().Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if healthy.distinct() != 3 || failing.requests.Load() != 1 {
		t.Fatalf("healthy got %d changes, the failing endpoint %d requests", healthy.distinct(), failing.requests.Load())
	}
	got, _ := f.store.Get(ctx, system, tenant, bad.ID)
	if got.Attempt != 1 || got.LastStatus != http.StatusBadGateway || !got.NextAttempt.After(got.FailingSince) {
		t.Fatalf("the failing endpoint: %+v", got)
	}
}
