package keycloaksync

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/streams"
)

// hangingRealm is a Keycloak that accepts connections and never answers.
func hangingRealm(t *testing.T) (url string, accepted func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String(), func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
}

// TestRecordsInFlightOfAHungRealmProbeItOnce: when a realm hangs, the tenant's records in
// flight all fail at about the same moment. One of them probes the realm; the others wait
// for its verdict and are held behind the park, which counts one failure of the realm —
// not one per record in flight, which parked a hung realm for the 30 s maximum at once and
// held as many delivery slots (or a Lambda invocation) a probe's time each.
func TestRecordsInFlightOfAHungRealmProbeItOnce(t *testing.T) {
	const records = 8
	w := newWorld(t)
	ctx := t.Context()
	for i := range records {
		w.exec(commands.CreateUser{Username: fmt.Sprintf("u%d", i), Email: fmt.Sprintf("u%d@example.com", i)})
	}
	url, _ := hangingRealm(t)
	tenants := dynamo.NewTenants(w.db, w.names)
	row, err := tenants.Get(ctx, w.tenant.System, w.tenant.ID)
	if err != nil {
		t.Fatal(err)
	}
	row.KeycloakURL = url
	if err := tenants.Put(ctx, row, row.RowVersion); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		parked int
	)
	w.handler.cfg.Park = func(_ *message.Message, _ time.Time) { mu.Lock(); parked++; mu.Unlock() }

	var wg sync.WaitGroup
	errs := make([]error, records)
	for i := range records {
		rec := w.records(fmt.Sprintf("user#u%d", i))[0]
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, err := streams.NewRecordMessage(rec)
			if err != nil {
				errs[i] = err
				return
			}
			msg.SetContext(ctx)
			errs[i] = w.handler.HandleMessage(msg)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || errors.Is(err, errParkExpired) {
			t.Fatalf("record %d: %v, want a failure that parks", i, err)
		}
	}
	h := w.handler.cfg.Health
	h.mu.Lock()
	th := h.tenants[tenantKey{w.tenant.System, w.tenant.ID}]
	h.mu.Unlock()
	if th == nil || th.failures != 1 {
		t.Fatalf("tenant health %+v: want parked after one failure of the realm", th)
	}
	if parked != records {
		t.Fatalf("%d of %d records held behind the park", parked, records)
	}
}
