package queries

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
)

// item is a view item at version v, as a watch's read returns it.
func item(v int64) observation {
	return observation{raw: map[string]types.AttributeValue{}, version: v}
}

// fakeView is the pure-logic stand-in for the read a watch makes: a version per key that
// the test moves on, and a count of reads per key.
type fakeView struct {
	mu       sync.Mutex
	versions map[watchKey]int64
	reads    map[watchKey]int
}

func (f *fakeView) read(_ context.Context, k watchKey) observation {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[k]++
	if v, ok := f.versions[k]; ok {
		return item(v)
	}
	return observation{}
}

func (f *fakeView) set(k watchKey, v int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.versions[k] = v
}

func (f *fakeView) readsOf(k watchKey) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[k]
}

func newFakeView() *fakeView {
	return &fakeView{versions: map[watchKey]int64{}, reads: map[watchKey]int{}}
}

func TestWatches(t *testing.T) {
	t.Run("waiters on one item share one poller and each gets the version it asked for", func(t *testing.T) {
		view := newFakeView()
		w := newWatches(1000, 1000, view.read)
		k := watchKey{"acme", "eu", "user#jdoe"}
		const n = 200
		var wg sync.WaitGroup
		var answered atomic.Int64
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				obs, err := w.wait(context.Background(), k, int64(1+i%2), 5*time.Second, "user")
				if err == nil && obs.version >= int64(1+i%2) {
					answered.Add(1)
				}
			}()
		}
		eventuallyTrue(t, func() bool { total, _ := w.waiting("acme", "eu"); return total == n })
		view.set(k, 1)
		eventuallyTrue(t, func() bool { total, _ := w.waiting("acme", "eu"); return total == n/2 })
		view.set(k, 2)
		wg.Wait()
		if answered.Load() != n {
			t.Errorf("%d of %d waiters got their version", answered.Load(), n)
		}
		// One poller: its schedule, not the number of waiters, decides the reads. 200
		// pollers would have read at least 200 times.
		if r := view.readsOf(k); r > n/4 {
			t.Errorf("%d reads for %d waiters on one item, want one poller's few", r, n)
		}
		if total, _ := w.waiting("acme", "eu"); total != 0 {
			t.Errorf("%d waiters left", total)
		}
	})

	t.Run("beyond the tenant cap a wait is refused at once, other tenants still wait", func(t *testing.T) {
		view := newFakeView()
		w := newWatches(100, 3, view.read)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = w.wait(ctx, watchKey{"acme", "eu", "user#u" + string(rune('a'+i))}, 1, time.Minute, "user")
			}()
		}
		eventuallyTrue(t, func() bool { _, eu := w.waiting("acme", "eu"); return eu == 3 })
		_, err := w.wait(context.Background(), watchKey{"acme", "eu", "user#late"}, 1, time.Minute, "user")
		if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindUnavailable || e.RetryAfter <= 0 {
			t.Errorf("a fourth waiter of the tenant: %v, want 503 with Retry-After", err)
		}
		if r := view.readsOf(watchKey{"acme", "eu", "user#late"}); r != 0 {
			t.Errorf("a refused wait read the item %d times", r)
		}
		other := watchKey{"acme", "us", "user#jdoe"}
		view.set(other, 1)
		if _, err := w.wait(context.Background(), other, 1, time.Minute, "user"); err != nil {
			t.Errorf("another tenant's wait: %v", err)
		}
		cancel()
		wg.Wait()
		if total, _ := w.waiting("acme", "eu"); total != 0 {
			t.Errorf("%d waiters left after their requests ended", total)
		}
	})

	t.Run("beyond the process cap a wait is refused at once", func(t *testing.T) {
		view := newFakeView()
		w := newWatches(2, 100, view.read)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for _, tenant := range []string{"eu", "us"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = w.wait(ctx, watchKey{"acme", tenant, "user#jdoe"}, 1, time.Minute, "user")
			}()
		}
		eventuallyTrue(t, func() bool { total, _ := w.waiting("acme", "eu"); return total == 2 })
		if _, err := w.wait(context.Background(), watchKey{"acme", "asia", "user#jdoe"}, 1, time.Minute, "user"); apperr.KindOf(err) != apperr.KindUnavailable {
			t.Errorf("a third waiter in the process: %v, want 503", err)
		}
		cancel()
		wg.Wait()
	})

	t.Run("a wait that is not satisfied ends with 503 and stops its poller", func(t *testing.T) {
		view := newFakeView()
		w := newWatches(10, 10, view.read)
		k := watchKey{"acme", "eu", "user#ghost"}
		_, err := w.wait(context.Background(), k, 1, 300*time.Millisecond, "user")
		if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindUnavailable || e.RetryAfter <= 0 {
			t.Fatalf("%v, want 503 with Retry-After", err)
		}
		eventuallyTrue(t, func() bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return len(w.byKey) == 0
		})
		settled := view.readsOf(k)
		time.Sleep(3 * maxPoll)
		if r := view.readsOf(k); r != settled {
			t.Errorf("the poller read %d more times after its last waiter left", r-settled)
		}
	})

	t.Run("a read error reaches every waiter, a passing fault only delays them", func(t *testing.T) {
		boom := errors.New("view item has no numeric version")
		w := newWatches(10, 10, func(context.Context, watchKey) observation { return observation{err: boom} })
		_, err := w.wait(context.Background(), watchKey{"acme", "eu", "user#jdoe"}, 1, time.Minute, "user")
		if err != boom {
			t.Errorf("%v, want the read's error", err)
		}

		var faults atomic.Int64
		w = newWatches(10, 10, func(context.Context, watchKey) observation {
			if faults.Add(1) <= 3 {
				return observation{err: apperr.Unavailable(context.DeadlineExceeded, time.Second)}
			}
			return item(1)
		})
		if obs, err := w.wait(context.Background(), watchKey{"acme", "eu", "user#jdoe"}, 1, time.Minute, "user"); err != nil || obs.version != 1 {
			t.Errorf("after three throttled polls: %v %v, want version 1", obs, err)
		}
	})
}

func eventuallyTrue(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWatchAnswersFromItsLastReadWithoutAPlace(t *testing.T) {
	view := newFakeView()
	w := newWatches(1, 1, view.read)
	k := watchKey{"acme", "eu", "user#jdoe"}
	view.set(k, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 1)
	go func() { _, err := w.wait(ctx, k, 2, time.Minute, "user"); waited <- err }()
	// The one place is taken by a wait for version 2; the watch has read version 1.
	eventuallyTrue(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		wa := w.byKey[k]
		return wa != nil && wa.last != nil
	})
	obs, err := w.wait(context.Background(), k, 1, time.Minute, "user")
	if err != nil || obs.version != 1 {
		t.Fatalf("a wait for a version the watch has read, with every place taken: %v %v, want it answered at once", obs, err)
	}
	cancel()
	<-waited
}

// TestWatchesWakeOnProjectorProgress: while the projectors' feeds are connected, a waiting
// read is answered when a notice says its version was written, not on the poll schedule
// (here an hour: without the wake-up the wait would time out), and it is answered from a
// read of the item, never from the notice alone.
func TestWatchesWakeOnProjectorProgress(t *testing.T) {
	view := newFakeView()
	w := newWatches(10, 10, view.read)
	w.feeds.Store(1)
	w.safetyPoll = time.Hour
	w.connected.Add(1)
	k := watchKey{"acme", "eu", "user#jdoe"}
	view.set(k, 1)
	done := make(chan error, 1)
	var got observation
	go func() {
		var err error
		got, err = w.wait(context.Background(), k, 2, 5*time.Second, "user")
		done <- err
	}()
	eventuallyTrue(t, func() bool { return view.readsOf(k) == 1 }) // the read at once
	w.notify(k, 1)                                                 // older than asked: no read
	w.notify(watchKey{"acme", "eu", "user#other"}, 5)              // another item: no read
	time.Sleep(50 * time.Millisecond)
	if r := view.readsOf(k); r != 1 {
		t.Fatalf("%d reads after notices that cannot answer the waiter, want 1", r)
	}
	view.set(k, 2)
	w.notify(k, 2)
	if err := <-done; err != nil {
		t.Fatalf("the wait ended with %v", err)
	}
	if got.version != 2 || view.readsOf(k) != 2 {
		t.Fatalf("answered version %d after %d reads, want 2 after 2", got.version, view.readsOf(k))
	}

	t.Run("a notice ahead of the table wakes a read that finds the old version, and the waiter waits on", func(t *testing.T) {
		k := watchKey{"acme", "eu", "user#ann"}
		view.set(k, 1)
		done := make(chan error, 1)
		go func() { _, err := w.wait(context.Background(), k, 2, 300*time.Millisecond, "user"); done <- err }()
		eventuallyTrue(t, func() bool { return view.readsOf(k) == 1 })
		w.notify(k, 2) // the table still says 1
		if err := <-done; apperr.KindOf(err) != apperr.KindUnavailable {
			t.Fatalf("the wait ended with %v, want the 503 of a version not reached", err)
		}
		if r := view.readsOf(k); r != 2 {
			t.Fatalf("%d reads, want the first and the one the notice woke", r)
		}
	})
}
