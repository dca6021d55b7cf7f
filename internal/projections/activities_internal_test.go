package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestActivityBatcherWritesEveryItemOnce sends many concurrent writes, some of them twice
// at once, through a batcher whose writer is slow: every item must be written, no batch may
// exceed 25 items or repeat a key, the writes must share batches, and every caller must
// learn its own batch's outcome: written, or an error (the caller retries).
func TestActivityBatcherWritesEveryItemOnce(t *testing.T) {
	var (
		mu      sync.Mutex
		written = map[string]int{}
		batches int
	)
	failing := "act#13"
	b := newActivityBatcher(func(_ context.Context, table string, items []Item) error {
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		batches++
		if len(items) > maxBatchItems {
			t.Errorf("a batch of %d items", len(items))
		}
		seen := map[string]bool{}
		for _, it := range items {
			k := table + "/" + itemKey(it, "pk")
			if seen[k] {
				t.Errorf("batch repeats %s", k)
			}
			seen[k] = true
			if itemKey(it, "pk") == failing+"/" {
				return errors.New("refused")
			}
		}
		for k := range seen {
			written[k]++
		}
		return nil
	})
	const n = 400
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// i and i+n write the same item into the same table: a redelivered record.
			item := Item{"pk": str(fmt.Sprintf("act#%d", i%n))}
			errs[i] = b.write(context.Background(), fmt.Sprintf("t%d", i%n%3), item)
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i, err := range errs {
		id, k := fmt.Sprintf("act#%d", i%n), fmt.Sprintf("t%d/act#%d/", i%n%3, i%n)
		switch {
		case id == failing && err == nil:
			// Its batch always fails; any other item shares that fate only with it.
			t.Errorf("write %s: no error, though its batch was refused", id)
		case err == nil && written[k] == 0:
			t.Errorf("write %s: no error, but not written", k)
		}
	}
	if batches >= 2*n/2 {
		t.Errorf("%d batches for %d writes: the batcher does not batch", batches, 2*n)
	}
	// A flusher ends its turn just after answering its last batch.
	for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
		b.mu.Lock()
		flushing, queued := b.flushing, len(b.queue)
		b.mu.Unlock()
		if flushing == 0 && queued == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batcher left %d flushers and %d queues", flushing, queued)
		}
	}
}
