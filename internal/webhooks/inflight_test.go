package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/webhooks"
)

// orderedReceiver is an endpoint that checks, as each change arrives, that its aggregate's
// previous version was answered before it was sent (a repeat of a version already
// answered is at least once, not a breach), and counts the POSTs it has under way at once.
type orderedReceiver struct {
	srv *httptest.Server
	// hold, when set, runs before a change is answered; a status not 0 refuses it.
	hold func(agg string, ver int64) int

	mu       sync.Mutex
	answered map[string]int64 // the highest version of each aggregate answered 2xx
	taken    map[string]int   // how often each change was answered 2xx
	arrived  map[string]bool  // every change that arrived, answered or not
	breaches []string
	inFlight int
	most     int
	overlap  chan struct{} // closed when two POSTs are first under way at once
}

func newOrderedReceiver(t *testing.T, hold func(agg string, ver int64) int) *orderedReceiver {
	rc := &orderedReceiver{hold: hold, answered: map[string]int64{}, taken: map[string]int{}, arrived: map[string]bool{},
		overlap: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			Data struct {
				ID      string `json:"id"`
				Version int64  `json:"version"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		agg, ver := ev.Data.ID, ev.Data.Version
		key := fmt.Sprintf("%s/%d", agg, ver)
		rc.mu.Lock()
		rc.arrived[key] = true
		if ver > rc.answered[agg]+1 {
			rc.breaches = append(rc.breaches, fmt.Sprintf("%s v%d sent while v%d was the last answered", agg, ver, rc.answered[agg]))
		}
		rc.inFlight++
		rc.most = max(rc.most, rc.inFlight)
		if rc.inFlight == 2 {
			select {
			case <-rc.overlap:
			default:
				close(rc.overlap)
			}
		}
		rc.mu.Unlock()
		defer func() {
			rc.mu.Lock()
			rc.inFlight--
			rc.mu.Unlock()
		}()
		status := 0
		if rc.hold != nil {
			status = rc.hold(agg, ver)
		}
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		rc.mu.Lock()
		rc.answered[agg] = max(rc.answered[agg], ver)
		rc.taken[key]++
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *orderedReceiver) has(keys ...string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, k := range keys {
		if rc.taken[k] == 0 {
			return false
		}
	}
	return true
}

func (rc *orderedReceiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.taken)
}

// appendInterleaved appends versions 1..versions of aggregates a0, a1, … one version of
// each in turn: each page of the feed holds changes of every aggregate.
func appendInterleaved(t *testing.T, f *fixture, aggregates, versions int) []string {
	var keys []string
	for v := int64(1); v <= int64(versions); v++ {
		for a := range aggregates {
			f.append(t, fmt.Sprintf("a%d", a), v)
			keys = append(keys, fmt.Sprintf("a%d/%d", a, v))
		}
	}
	return keys
}

// TestSeveralChangesInFlightYetEachAggregateInOrder: an endpoint has several POSTs under
// way at once, answered in another order than sent (each after a pause of its own), yet
// no change is sent before its aggregate's previous one was answered, and every change
// arrives once.
func TestSeveralChangesInFlightYetEachAggregateInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var rc *orderedReceiver
	rc = newOrderedReceiver(t, func(agg string, ver int64) int {
		if agg == "a0" && ver == 1 {
			// The first change is answered only once another is under way beside it (or,
			// delivered one at a time, after a while: the test then fails on it).
			select {
			case <-rc.overlap:
			case <-time.After(20 * time.Second):
			}
		}
		h := fnv.New32a()
		_, _ = fmt.Fprintf(h, "%s/%d", agg, ver)
		time.Sleep(time.Duration(h.Sum32()%30) * time.Millisecond) // answers come out of order
		return 0
	})
	register(t, f, rc.srv.URL+"/hook")
	const aggregates, versions = 8, 6
	appendInterleaved(t, f, aggregates, versions)

	o := fastOptions(zap.NewNop())
	o.Batch, o.Timeout, o.Lease = 50, 30*time.Second, 10*time.Second
	d, err := webhooks.NewDeliverer(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	eventually(t, "every change delivered", func() bool { return rc.count() == aggregates*versions })
	cancel()
	<-done

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.breaches) > 0 {
		t.Fatalf("an aggregate's change was sent before its previous one was answered: %v", rc.breaches)
	}
	if rc.most < 2 {
		t.Fatalf("the endpoint never had two POSTs under way at once (at most %d)", rc.most)
	}
	for k, n := range rc.taken {
		if n != 1 {
			t.Fatalf("%s was delivered %d times", k, n)
		}
	}
}

// TestAFailedChangeHoldsOnlyItsAggregateAndWhatWentOnIsNotSentAgain: a change fails while
// other aggregates' later changes of the page are delivered beside it. Its aggregate's next
// change is not sent before it has gone through; and the changes delivered after it are not
// sent again, also by another process that takes the endpoint over (the endpoint keeps
// them with its position).
func TestAFailedChangeHoldsOnlyItsAggregateAndWhatWentOnIsNotSentAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const aggregates, versions = 4, 4
	var rc *orderedReceiver
	var failures atomic.Int32
	rc = newOrderedReceiver(t, func(agg string, ver int64) int {
		if agg != "a0" || ver != 2 {
			return 0
		}
		// a0 v2 fails twice; the first time once every other aggregate is delivered.
		n := failures.Add(1)
		if n > 2 {
			return 0
		}
		if n == 1 {
			deadline := time.Now().Add(time.Minute)
			for !rc.has("a1/4", "a2/4", "a3/4") && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
		return http.StatusServiceUnavailable
	})
	hook, _ := register(t, f, rc.srv.URL+"/hook")
	appendInterleaved(t, f, aggregates, versions)

	o := fastOptions(zap.NewNop())
	o.Batch, o.Timeout, o.Lease = 50, time.Minute, 10*time.Second
	ctx := context.Background()
	first, err := webhooks.NewDeliverer(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Round(ctx); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	if !rc.has("a1/4", "a2/4", "a3/4") || rc.has("a0/2") {
		t.Fatalf("the first run: %v", rc.taken)
	}
	// Another process takes the endpoint over and delivers the rest.
	second, err := webhooks.NewDeliverer(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "every change delivered", func() bool {
		if err := second.Round(ctx); err != nil {
			t.Fatal(err)
		}
		second.Wait()
		return rc.count() == aggregates*versions
	})

	rc.mu.Lock()
	if len(rc.breaches) > 0 {
		t.Fatalf("an aggregate's change was sent before its previous one was answered: %v", rc.breaches)
	}
	for k, n := range rc.taken {
		if n != 1 {
			t.Fatalf("%s was delivered %d times", k, n)
		}
	}
	rc.mu.Unlock()
	ds, _, err := f.store.Deliveries(ctx, system, tenant, hook.ID, "", 200)
	if err != nil {
		t.Fatal(err)
	}
	failed, delivered := 0, 0
	for _, d := range ds {
		switch d.Status {
		case "failed":
			failed++
		case "delivered":
			delivered++
		}
	}
	if failed != 2 || delivered != aggregates*versions {
		t.Fatalf("%d failed and %d delivered attempts listed", failed, delivered)
	}
	e, err := f.store.Get(ctx, system, tenant, hook.ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Attempt != 0 || e.LastError != "" {
		t.Fatalf("the endpoint after every change went through: %+v", e)
	}
}

// TestAPageLongerThanTheLeaseKeepsItsHolder: a page whose deliveries take longer than the
// lease (a slow endpoint, one aggregate) keeps its deliverer's lease renewed, so that
// another deliverer beside it does not take the endpoint over and send its changes again
// or beside them.
func TestAPageLongerThanTheLeaseKeepsItsHolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := newOrderedReceiver(t, func(string, int64) int {
		time.Sleep(250 * time.Millisecond) // 30 changes in a row: far longer than the lease
		return 0
	})
	register(t, f, rc.srv.URL+"/hook")
	const versions = 30
	appendInterleaved(t, f, 1, versions)

	o := fastOptions(zap.NewNop())
	o.Batch, o.Timeout, o.Lease = 50, 30*time.Second, 3*time.Second
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		d, err := webhooks.NewDeliverer(f.store, o)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); d.Run(ctx) }()
	}
	eventually(t, "every change delivered", func() bool { return rc.count() == versions })
	cancel()
	wg.Wait()

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.breaches) > 0 {
		t.Fatalf("a change was sent before its previous one was answered: %v", rc.breaches)
	}
	if rc.most != 1 {
		t.Fatalf("%d POSTs of one aggregate were under way at once", rc.most)
	}
	for k, n := range rc.taken {
		if n != 1 {
			t.Fatalf("%s was delivered %d times", k, n)
		}
	}
}
