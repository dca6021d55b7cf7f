package keycloaksync

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// TestParking walks one tenant through a failing realm: parked with doubling waits (or the
// realm's Retry-After), one probe at a time, its records in flight stopped, resumed by the
// first answer, and forgotten if no probe comes.
func TestParking(t *testing.T) {
	h, err := NewHealth(nil, "test", prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	h.now = func() time.Time { return now }
	ctx := context.Background()
	fail := errors.New("keycloak: GET /users: 503 Service Unavailable")

	if _, ok := h.Admit("s", "t"); !ok {
		t.Fatal("a healthy tenant is not admitted")
	}
	inFlight, stop := h.Watch(ctx, "s", "t")
	defer stop()
	until := h.Failed(ctx, "s", "t", fail, 0)
	if want := now.Add(minParkFor); !until.Equal(want) {
		t.Fatalf("first park until %s, want %s", until, want)
	}
	select {
	case <-inFlight.Done():
		if !errors.Is(context.Cause(inFlight), errParked) {
			t.Fatalf("record in flight stopped with %v", context.Cause(inFlight))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the tenant's record in flight was not stopped by the park")
	}
	if reason, ok := h.Parked("s", "t"); !ok || reason != fail.Error() {
		t.Fatalf("parked %v (%q)", ok, reason)
	}
	if at, ok := h.Admit("s", "t"); ok || !at.Equal(until) {
		t.Fatalf("admitted while parked (%v, %s)", ok, at)
	}
	if _, ok := h.Admit("other", "tenant"); !ok {
		t.Fatal("another tenant is held by this one's park")
	}

	now = until
	if _, ok := h.Admit("s", "t"); !ok {
		t.Fatal("the probe is not admitted when due")
	}
	if _, ok := h.Admit("s", "t"); ok {
		t.Fatal("a second probe is admitted while the first runs")
	}
	until = h.Failed(ctx, "s", "t", fail, 0)
	if want := now.Add(2 * minParkFor); !until.Equal(want) {
		t.Fatalf("second park until %s, want %s (doubled)", until, want)
	}
	until = h.Failed(ctx, "s", "t", fail, 5*time.Minute)
	if want := now.Add(5 * time.Minute); !until.Equal(want) {
		t.Fatalf("park with Retry-After until %s, want %s", until, want)
	}

	h.OK(ctx, "s", "t")
	if _, ok := h.Parked("s", "t"); ok {
		t.Fatal("still parked after the realm answered")
	}
	if _, ok := h.Admit("s", "t"); !ok {
		t.Fatal("not admitted after resuming")
	}

	until = h.Failed(ctx, "s", "t", fail, 0)
	now = until.Add(forgetAfter + time.Second)
	if _, ok := h.Parked("s", "t"); ok {
		t.Fatal("a park whose probe never came is not forgotten")
	}
}
