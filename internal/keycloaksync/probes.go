package keycloaksync

import (
	"context"
	"sync"

	"github.com/ssodir/ssodir/internal/keycloak"
)

// probes lets one record at a time probe a tenant's realm after a failure that may be the
// realm's. When a realm hangs, every record of the tenant in flight fails at about the same
// moment; were each to probe, a tenant would hold a delivery slot (or, in Lambda mode, its
// invocation) a probe's time per record, and each failed probe would count as another
// failure of the realm, doubling its park per record in flight — eight records in flight
// parked a hung realm for the 30 s maximum at once, and an invocation of Lambda mode waited
// that park out. The others wait for the one probe's verdict instead.
type probes struct {
	mu      sync.Mutex
	running map[tenantKey]chan struct{}
}

// begin starts the tenant's probe: ok is true when this caller probes (and must call
// done), false when another does; wait is closed when that one ends.
func (p *probes) begin(system, tenant string) (done func(), wait <-chan struct{}, ok bool) {
	key := tenantKey{system, tenant}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ch, busy := p.running[key]; busy {
		return nil, ch, false
	}
	if p.running == nil {
		p.running = map[tenantKey]chan struct{}{}
	}
	ch := make(chan struct{})
	p.running[key] = ch
	return func() {
		p.mu.Lock()
		delete(p.running, key)
		p.mu.Unlock()
		close(ch)
	}, ch, true
}

// probeFailed is a failed probe of the realm whose failure the tenant's health has already
// counted (the tenant is parked).
type probeFailed struct{ err error }

func (p probeFailed) Error() string { return p.err.Error() }
func (p probeFailed) Unwrap() error { return p.err }

// probeAfterFailure asks the realm whether it answers after rec's failure, once for every
// record of the tenant that failed meanwhile: nil when it answers, probeFailed when it
// does not (the tenant then parked), and errParked for a record that waited on another's probe that parked the
// tenant (the caller holds it until the park's end, counting no further failure).
func (h *Handler) probeAfterFailure(ctx context.Context, system, tenant string, probe func() error) error {
	done, wait, ok := h.probes.begin(system, tenant)
	if ok {
		defer done()
		err := probe()
		if err != nil {
			// The park is recorded before the waiters wake (done), so that each of them
			// finds the tenant parked and is held, rather than taking the realm for one
			// that answers and failing as a record's own fault.
			h.cfg.Health.Failed(ctx, system, tenant, err, keycloak.RetryAfterOf(err))
			return probeFailed{err}
		}
		return nil
	}
	select {
	case <-wait:
	case <-ctx.Done():
		return nil // the delivery is over: the record is retried as it is
	}
	if _, parked := h.cfg.Health.Until(system, tenant); parked {
		return errParked
	}
	return nil
}
