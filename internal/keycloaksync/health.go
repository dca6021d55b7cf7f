package keycloaksync

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
)

// Parking. A tenant whose realm hangs, answers 5xx, or answers 429 — and then fails a probe
// of the realm itself (keycloak.Client.Probe: a token and the group count), so that one
// record the realm cannot take is not mistaken for a failing realm — is parked as a whole:
// its stream is held (streams.Park), so its records wait in order behind the first failure,
// and hold no delivery slot that another tenant could use, and nothing is sent to the realm
// but one probe at a time. The park lasts minParkFor, doubling with each failed probe up to
// maxParkFor, or as long as the realm's Retry-After asks (up to maxRetryAfterPark). The
// first probe the realm answers resumes the tenant, and the held record is delivered as
// any other. A tenant parked longer than its ParkMax has its records made dead letters as
// they come (streams.GiveUp), so that the stream is read on and nothing is left to the
// stream's 24-hour retention: they are re-driven, in order, once the realm answers.
const (
	minParkFor        = time.Second
	maxParkFor        = 30 * time.Second
	maxRetryAfterPark = 10 * time.Minute
	// probeHold is how long a record that arrives while another probes the realm waits.
	probeHold = time.Second
	// DefaultParkMax is how long a tenant is parked at most (SSO_KEYCLOAK_PARK_MAX).
	DefaultParkMax = time.Hour
)

// admission is what the event path may do with a record of a tenant now.
type admission int

const (
	admitGo     admission = iota // the realm is not known to fail
	admitHold                    // parked: hold the record until the time given
	admitProbe                   // parked, and a probe of the realm is due: this record's delivery makes it
	admitGiveUp                  // parked longer than ParkMax: the record becomes a dead letter
)

type tenantHealth struct {
	failures int
	until    time.Time
	since    time.Time
	reason   string
	probing  bool
	expired  bool // parked longer than ParkMax (noted once)
}

// Health tracks which tenants are parked. It is safe for concurrent use.
type Health struct {
	statuses *dynamo.SyncStatuses
	owner    string
	log      *zap.Logger
	parked   *prometheus.GaugeVec
	expired  *prometheus.GaugeVec
	givenUp  prometheus.Counter
	parkMax  time.Duration
	minPark  time.Duration
	now      func() time.Time

	mu      sync.Mutex
	tenants map[tenantKey]*tenantHealth
	// parking is closed when the tenant is parked, to stop its records in flight.
	parking map[tenantKey]chan struct{}
}

type tenantKey struct{ system, tenant string }

func (k tenantKey) String() string { return k.system + "/" + k.tenant }

// NewHealth registers ssodir_keycloak_tenant_parked{system,tenant} on reg. Parking and
// resuming are also written to statuses (when not nil) for `keycloak-sync status`, as
// seen by the process named owner.
func NewHealth(statuses *dynamo.SyncStatuses, owner string, reg prometheus.Registerer, log *zap.Logger) (*Health, error) {
	h := &Health{statuses: statuses, owner: owner, log: log, now: time.Now, tenants: map[tenantKey]*tenantHealth{},
		parking: map[tenantKey]chan struct{}{},
		parked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ssodir_keycloak_tenant_parked",
			Help: "1 while a tenant's realm is failing and its records wait behind the first failure."}, []string{"system", "tenant"}),
		expired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ssodir_keycloak_tenant_park_expired",
			Help: "1 while a tenant has been parked longer than SSO_KEYCLOAK_PARK_MAX: its records become dead letters as they come (alert on it)."}, []string{"system", "tenant"}),
		givenUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "ssodir_keycloak_parked_records_given_up_total",
			Help: "Records of tenants parked longer than SSO_KEYCLOAK_PARK_MAX made dead letters (re-driven once the realm answers)."}),
		parkMax: DefaultParkMax, minPark: minParkFor,
	}
	for _, c := range []prometheus.Collector{h.parked, h.expired, h.givenUp} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// WithParkMax sets how long a tenant is parked at most (SSO_KEYCLOAK_PARK_MAX).
func (h *Health) WithParkMax(d time.Duration) *Health {
	if d > 0 {
		h.parkMax = d
	}
	return h
}

// WithMinPark sets how long a tenant is parked after its realm's first failure (1s; a
// test that must see what happens while a park lasts makes it long). Later failures
// double it, up to 30s or the minimum, whichever is longer.
func (h *Health) WithMinPark(d time.Duration) *Health {
	if d > 0 {
		h.minPark = d
	}
	return h
}

// Admit decides whether a record of the tenant may go to its realm now (after a probe of
// the realm, when the tenant is parked and its probe is due). When not, the record is to
// be held until the time returned.
func (h *Health) Admit(system, tenant string) (time.Time, bool) {
	until, a := h.admit(system, tenant)
	return until, a == admitGo || a == admitProbe
}

func (h *Health) admit(system, tenant string) (time.Time, admission) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tenants[tenantKey{system, tenant}]
	now := h.now()
	switch {
	case t == nil:
		return time.Time{}, admitGo
	case now.Before(t.until) || t.probing:
		if now.Sub(t.since) >= h.parkMax {
			return time.Time{}, admitGiveUp
		}
		if now.Before(t.until) {
			return t.until, admitHold
		}
		return now.Add(probeHold), admitHold
	}
	t.probing = true
	return time.Time{}, admitProbe
}

// gaveUp counts a record of a tenant parked past ParkMax made a dead letter.
func (h *Health) gaveUp() { h.givenUp.Inc() }

// Watch is ctx, cancelled with cause errParked as soon as the tenant is parked: the
// tenant's other records in flight stop waiting on a realm that another record found
// failing, and free their delivery slots at once.
func (h *Health) Watch(ctx context.Context, system, tenant string) (context.Context, context.CancelFunc) {
	key := tenantKey{system, tenant}
	h.mu.Lock()
	ch := h.parking[key]
	if ch == nil {
		ch = make(chan struct{})
		h.parking[key] = ch
	}
	h.mu.Unlock()
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-ch:
			cancel(errParked)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// Until is when the parked tenant's next probe is due; ok is false when it is not parked.
func (h *Health) Until(system, tenant string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.tenants[tenantKey{system, tenant}]; t != nil {
		return t.until, true
	}
	return time.Time{}, false
}

// forgetAfter is how long after its probe was due a park is forgotten: its stream moved to
// another process (a lease handover), so no probe comes here any more, and reconciles must
// not wait on it for ever.
const forgetAfter = 2 * maxParkFor

// Parked reports whether the tenant is parked, and why.
func (h *Health) Parked(system, tenant string) (string, bool) {
	key := tenantKey{system, tenant}
	h.mu.Lock()
	t := h.tenants[key]
	if t != nil && h.now().After(t.until.Add(forgetAfter)) {
		delete(h.tenants, key)
		h.mu.Unlock()
		h.parked.DeleteLabelValues(system, tenant)
		h.expired.DeleteLabelValues(system, tenant)
		h.record(context.Background(), key, false, time.Time{}, "", time.Time{})
		return "", false
	}
	h.mu.Unlock()
	if t != nil {
		return t.reason, true
	}
	return "", false
}

// Failed records that the realm failed (err is one keycloak.RealmUnavailable accepts) and
// returns until when the tenant is parked.
func (h *Health) Failed(ctx context.Context, system, tenant string, err error, retryAfter time.Duration) time.Time {
	key := tenantKey{system, tenant}
	h.mu.Lock()
	t := h.tenants[key]
	first := t == nil
	if first {
		t = &tenantHealth{since: h.now()}
		h.tenants[key] = t
	}
	t.failures++
	t.probing = false
	t.reason = err.Error()
	wait := h.minPark << min(t.failures-1, 10)
	wait = min(wait, max(maxParkFor, h.minPark))
	if retryAfter > wait {
		wait = min(retryAfter, maxRetryAfterPark)
	}
	t.until = h.now().Add(wait)
	expiredNow := !t.expired && h.now().Sub(t.since) >= h.parkMax
	if expiredNow {
		t.expired = true
	}
	until, since, reason := t.until, t.since, t.reason
	if ch := h.parking[key]; ch != nil {
		close(ch)
		delete(h.parking, key)
	}
	h.mu.Unlock()

	if first {
		h.parked.WithLabelValues(system, tenant).Set(1)
		h.log.Warn("keycloak realm failing: tenant parked, its records wait in order",
			zap.String("tenant", key.String()), zap.Duration("probe_in", wait), zap.Error(err))
	}
	if expiredNow {
		h.expired.WithLabelValues(system, tenant).Set(1)
		h.log.Error("keycloak realm failing for longer than SSO_KEYCLOAK_PARK_MAX: the tenant's records become dead letters as they come, re-driven once it answers",
			zap.String("tenant", key.String()), zap.Duration("parked_for", h.now().Sub(since)), zap.Error(err))
	}
	// Every failed probe renews the park in the status row: a park whose process died
	// expires there (parked_until), so that it holds no other process back.
	h.record(ctx, key, true, since, reason, until.Add(forgetAfter))
	return until
}

// OK records that the realm answered; a parked tenant resumes.
func (h *Health) OK(ctx context.Context, system, tenant string) {
	key := tenantKey{system, tenant}
	h.mu.Lock()
	t := h.tenants[key]
	delete(h.tenants, key)
	h.mu.Unlock()
	if t == nil {
		return
	}
	h.parked.DeleteLabelValues(system, tenant)
	h.expired.DeleteLabelValues(system, tenant)
	h.log.Info("keycloak realm answers again: tenant resumed",
		zap.String("tenant", key.String()), zap.Duration("parked_for", h.now().Sub(t.since)))
	h.record(ctx, key, false, time.Time{}, "", time.Time{})
}

// Release clears, in the status row, the parks this process holds: it is stopping, and
// another process takes its streams over (and parks them again if their realm still fails).
func (h *Health) Release(ctx context.Context) {
	h.mu.Lock()
	keys := make([]tenantKey, 0, len(h.tenants))
	for k := range h.tenants {
		keys = append(keys, k)
	}
	clear(h.tenants)
	h.mu.Unlock()
	for _, k := range keys {
		h.parked.DeleteLabelValues(k.system, k.tenant)
		h.expired.DeleteLabelValues(k.system, k.tenant)
		h.record(ctx, k, false, time.Time{}, "", time.Time{})
	}
}

func (h *Health) record(ctx context.Context, key tenantKey, parked bool, since time.Time, reason string, until time.Time) {
	if h.statuses == nil {
		return
	}
	// The status row is for operators; the sync goes on whether or not it is written.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := h.statuses.RecordParked(ctx, key.system, key.tenant, parked, since, until, reason, h.owner); err != nil {
		h.log.Warn("record parked state", zap.String("tenant", key.String()), zap.Error(err))
	}
}
