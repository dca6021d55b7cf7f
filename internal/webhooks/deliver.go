package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/changefeed"
)

// Delivery bounds (API.md "Changes out").
const (
	// Timeout bounds one attempt, connection to the end of the response.
	Timeout = 10 * time.Second
	// MaxResponseBody is how much of a response is read (and thrown away).
	MaxResponseBody = 64 << 10
	maxErrorText    = 300
)

// Options tune a Deliverer; the zero value is production's.
type Options struct {
	Policy Policy
	// Poll is how often the endpoints are looked at (default 250ms).
	Poll time.Duration
	// Lease is how long an endpoint stays held by a silent deliverer (default 30s).
	Lease time.Duration
	// Batch is how many changes are read from the feed at a time (default 50).
	Batch int
	// InFlight is how many POSTs an endpoint has under way at a time, never two of one
	// aggregate (default 8; 1: one change at a time).
	InFlight int
	// GiveUp is how long an endpoint fails before it is disabled (default GiveUpAfter).
	GiveUp time.Duration
	// Backoff is the wait after the n-th failed attempt (default Backoff).
	Backoff func(attempt int) time.Duration
	// Timeout bounds one attempt (default Timeout).
	Timeout    time.Duration
	Log        *zap.Logger
	Registerer prometheus.Registerer
}

// Deliverer delivers the feed to every endpoint of the stage. Each endpoint is delivered by
// a goroutine of its own, under its lease, with its own time bounds: one that fails or
// hangs holds up nothing but itself.
type Deliverer struct {
	store  *Store
	o      Options
	owner  string
	client *http.Client
	log    *zap.Logger

	mu      sync.Mutex
	running map[string]bool
	// again marks a running endpoint that a round passed over: its delivery, when it
	// ends, wakes the deliverer, so that a change appended while it was finishing is not
	// left to the next poll.
	again map[string]bool
	// hooked are the tenants ("system/tenant") with an active endpoint at the last round:
	// the only ones whose appends wake the deliverer.
	hooked map[string]bool
	wg     sync.WaitGroup
	wake   chan struct{}

	attempts *prometheus.CounterVec
	disabled *prometheus.CounterVec
}

// NewDeliverer delivers the endpoints of store. Its metrics go to o.Registerer (nil: none).
func NewDeliverer(store *Store, o Options) (*Deliverer, error) {
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 50
	}
	if o.InFlight <= 0 {
		o.InFlight = 8
	}
	if o.GiveUp <= 0 {
		o.GiveUp = GiveUpAfter
	}
	if o.Backoff == nil {
		o.Backoff = Backoff
	}
	if o.Timeout <= 0 {
		o.Timeout = Timeout
	}
	if o.Log == nil {
		o.Log = zap.NewNop()
	}
	d := &Deliverer{store: store, o: o, owner: uuid.NewString(), log: o.Log, running: map[string]bool{}, again: map[string]bool{}, hooked: map[string]bool{},
		wake: make(chan struct{}, 1),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ssodir_webhook_attempts_total",
			Help: "Webhook delivery attempts, by result (delivered, failed)."}, []string{"result"}),
		disabled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ssodir_webhooks_disabled_total",
			Help: "Webhook endpoints disabled after failing for a day (or falling behind the feed's retention): alert on it; a replay re-enables them."},
			[]string{"system", "tenant"}),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{d.attempts, d.disabled} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	dialer := &net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}
	d.client = &http.Client{
		Timeout: o.Timeout,
		Transport: &http.Transport{
			Proxy:               nil, // never through a proxy that would reach what the policy refuses
			DialContext:         o.Policy.dialContext(dialer),
			TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
			TLSHandshakeTimeout: o.Timeout, ResponseHeaderTimeout: o.Timeout,
			MaxIdleConns: 100, MaxIdleConnsPerHost: max(2, o.InFlight), IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return d, nil
}

// Run delivers until ctx ends, then waits for the deliveries under way to stop. A round
// runs every Poll, and at once after a Notify.
func (d *Deliverer) Run(ctx context.Context) {
	defer d.wg.Wait()
	poll := time.NewTimer(d.o.Poll)
	defer poll.Stop()
	for {
		if err := d.Round(ctx); err != nil && ctx.Err() == nil {
			d.log.Warn("webhooks: a round failed; the next one tries again", zap.Error(err))
		}
		poll.Reset(d.o.Poll)
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-d.wake:
		}
	}
}

// Notify wakes Run for a round now if the tenant had an active endpoint at the last round:
// the projector calls it when it has appended changes to a tenant's feed
// (changefeed.Options.OnAppend), so that a change reaches the endpoints without waiting
// for the next poll. Poll stays the fallback for the changes other processes append and
// for endpoints registered since. It never blocks; wakes that come while one is pending
// are one.
func (d *Deliverer) Notify(system, tenant string) {
	d.mu.Lock()
	hooked := d.hooked[system+"/"+tenant]
	d.mu.Unlock()
	if hooked {
		d.wakeUp()
	}
}

func (d *Deliverer) wakeUp() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Wait waits for the deliveries Round started to stop.
func (d *Deliverer) Wait() { d.wg.Wait() }

// Round starts a delivery, in a goroutine of its own, for every endpoint that is active,
// due, not held by another deliverer, and behind its tenant's feed.
func (d *Deliverer) Round(ctx context.Context) error {
	_, err := d.round(ctx)
	return err
}

func (d *Deliverer) round(ctx context.Context) (started int, err error) {
	eps, err := d.store.All(ctx)
	if err != nil {
		return 0, err
	}
	heads := map[string]int64{}
	now := d.store.now()
	hooked := map[string]bool{}
	for _, e := range eps {
		if e.State == StateActive {
			hooked[e.System+"/"+e.Tenant] = true
		}
	}
	d.mu.Lock()
	d.hooked = hooked
	d.mu.Unlock()
	for _, e := range eps {
		if e.State != StateActive || e.NextAttempt.After(now) || e.LeaseOwner != d.owner && e.LeaseUntil.After(now) {
			continue
		}
		tenant := e.System + "/" + e.Tenant
		head, ok := heads[tenant]
		if !ok {
			if head, err = d.store.feed.Head(ctx, e.System, e.Tenant); err != nil {
				return started, err
			}
			heads[tenant] = head
		}
		if head-1 <= e.Position.After {
			continue
		}
		if d.start(ctx, e) {
			started++
		}
	}
	return started, nil
}

func (d *Deliverer) start(ctx context.Context, e Endpoint) bool {
	key := endpointSK(e.System, e.Tenant, e.ID)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running[key] {
		d.again[key] = true
		return false
	}
	d.running[key] = true
	d.wg.Add(1)
	go func() {
		defer func() {
			d.mu.Lock()
			delete(d.running, key)
			again := d.again[key]
			delete(d.again, key)
			d.mu.Unlock()
			if again {
				d.wakeUp()
			}
			d.wg.Done()
		}()
		if err := d.serve(ctx, e); err != nil && !errors.Is(err, errLost) && ctx.Err() == nil {
			d.log.Warn("webhooks: delivery stopped; the next round goes on", zap.String("system", e.System),
				zap.String("tenant", e.Tenant), zap.String("webhook", e.ID), zap.Error(err))
		}
	}()
	return true
}

// errLost is a holder's write refused: the lease moved, the endpoint was replayed or
// deleted. The holder stops; the endpoint's next holder goes on.
var errLost = errors.New("webhooks: the endpoint's lease was lost")

// serve delivers the endpoint's changes after its position, a page at a time
// (deliverPage: each aggregate's in order), until none is left, an attempt fails or ctx
// ends.
func (d *Deliverer) serve(ctx context.Context, e Endpoint) (err error) {
	e, ok, err := d.store.acquire(ctx, e, d.owner, d.o.Lease)
	if err != nil || !ok {
		return err
	}
	defer func() {
		if !errors.Is(err, errFailed) {
			// A write that goes on after ctx ended: the lease is given back for the next holder.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if rerr := d.store.release(rctx, e, d.owner); rerr != nil && err == nil {
				err = rerr
			}
		}
		if errors.Is(err, errFailed) {
			err = nil
		}
	}()
	secrets, err := d.store.Secrets(ctx, e)
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		page, err := d.store.feed.Read(ctx, e.System, e.Tenant, e.Position, d.o.Batch)
		if errors.Is(err, changefeed.ErrExpired) {
			e.LastError = "the endpoint's position is older than the change feed's retention (SSO_EVENTS_RETENTION)"
			e.Attempt, e.NextAttempt = e.Attempt+1, d.store.now()
			if e.FailingSince.IsZero() {
				e.FailingSince = d.store.now()
			}
			return d.disable(ctx, e)
		}
		if err != nil {
			return err
		}
		if e, err = d.deliverPage(ctx, e, secrets, page); err != nil {
			return err
		}
		if len(page.Events) == 0 {
			return nil
		}
	}
	return ctx.Err()
}

// errFailed ends a run at a failed attempt, which gave the lease back with its record.
var errFailed = errors.New("webhooks: an attempt failed")

// disable turns an endpoint off, with an alert: an error log line and
// ssodir_webhooks_disabled_total.
func (d *Deliverer) disable(ctx context.Context, e Endpoint) error {
	if err := d.store.fail(ctx, e, d.owner, true); err != nil {
		return err
	}
	d.disabled.WithLabelValues(e.System, e.Tenant).Inc()
	d.log.Error("webhook endpoint disabled: it failed for too long; POST …/webhooks/{id}/replay re-enables it",
		zap.String("system", e.System), zap.String("tenant", e.Tenant), zap.String("webhook", e.ID),
		zap.Time("failing_since", e.FailingSince), zap.Int("attempts", e.Attempt), zap.Int64("position", e.Position.After),
		zap.String("last_error", e.LastError))
	return errFailed
}

// post sends one signed change; nil error: a 2xx answer.
func (d *Deliverer) post(ctx context.Context, target string, secrets []string, id string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("the URL cannot be requested")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ssodir-webhooks/1")
	if err := SignHeaders(req.Header, secrets, id, time.Now(), body); err != nil {
		return 0, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, errors.New(errorText(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBody))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, fmt.Errorf("answered %d: redirects are not followed", resp.StatusCode)
	default:
		return resp.StatusCode, fmt.Errorf("answered %d", resp.StatusCode)
	}
}

// errorText is a failed request's error without the URL (which may hold a token).
func errorText(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "timed out"
		}
		err = ue.Err
	}
	s := err.Error()
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
	}
	return s
}

// eventHeader is what delivery reads of a CloudEvent.
type eventHeader struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Subject string `json:"subject"`
	Data    struct {
		ID string `json:"id"` // the aggregate's immutable id: its changes go out in order
	} `json:"data"`
}

func headerOf(raw []byte) eventHeader {
	var h eventHeader
	_ = json.Unmarshal(raw, &h)
	return h
}

// wanted reports whether an endpoint of types gets a CloudEvent of type t.
func wanted(types []string, t string) bool {
	return len(types) == 0 || slices.Contains(types, strings.TrimPrefix(t, changefeed.TypePrefix))
}

// Drain delivers what is due, round after round, until a round finds nothing to do or
// `until` passes (Lambda mode: a scheduled invocation, until near its deadline). A
// delivery under way at `until` finishes its attempt (at most one Timeout more).
func (d *Deliverer) Drain(ctx context.Context, until time.Time) error {
	sctx, cancel := context.WithDeadline(ctx, until.Add(d.o.Timeout))
	defer cancel()
	for ctx.Err() == nil && time.Now().Before(until) {
		started, err := d.round(sctx)
		d.wg.Wait()
		if err != nil || started == 0 {
			return err
		}
	}
	return nil
}
