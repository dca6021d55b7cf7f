package commands

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestTurnsGoOneAtATimeInOrder: one holder at a time per key, waiters in the order they
// came, other keys not held up, and a waiter whose context ends leaves nothing behind.
func TestTurnsGoOneAtATimeInOrder(t *testing.T) {
	var tr turns
	release, err := tr.take(t.Context(), "g")
	if err != nil {
		t.Fatal(err)
	}
	other, err := tr.take(t.Context(), "h")
	if err != nil {
		t.Fatalf("another key waited: %v", err)
	}
	other()

	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := tr.take(t.Context(), "g")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			r()
		}()
		// Each waiter is queued before the next one comes.
		waitFor(t, func() bool { return tr.users("g") == i+2 })
	}
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := tr.take(short, "g"); err == nil {
		t.Fatal("a waiter got the turn while it was held")
	}
	mu.Lock()
	if len(order) != 0 {
		t.Fatalf("%v went while the turn was held", order)
	}
	mu.Unlock()
	release()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("waiters went in the order %v, want 0 to 4", order)
		}
	}
	if len(tr.queues) != 0 {
		t.Errorf("%d queues left after every turn was given back", len(tr.queues))
	}
}

func (t *turns) users(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q := t.queues[key]; q != nil {
		return q.users
	}
	return 0
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10 s")
		}
	}
}
