package streams_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/streams/streamstest"
)

// orderWatch records, across processes, when each aggregate's handler runs, and fails on
// two invocations of one aggregate at once or one older than the last started.
type orderWatch struct {
	t       *testing.T
	mu      sync.Mutex
	running map[string]string // aggregate → sequence number in a handler now
	started map[string]string // aggregate → last sequence number started
	applied map[string]int    // aggregate → highest version acked
}

func newOrderWatch(t *testing.T) *orderWatch {
	return &orderWatch{t: t, running: map[string]string{}, started: map[string]string{}, applied: map[string]int{}}
}

func (o *orderWatch) enter(owner string, r streams.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.running[r.Aggregate]; ok {
		o.t.Errorf("%s: %s delivers %s while the handler of %s still runs", r.Aggregate, owner, r.SequenceNumber, cur)
	}
	if last, ok := o.started[r.Aggregate]; ok && seqLess(r.SequenceNumber, last) {
		o.t.Errorf("%s: %s delivers %s after %s had been delivered", r.Aggregate, owner, r.SequenceNumber, last)
	}
	o.running[r.Aggregate] = r.SequenceNumber
	o.started[r.Aggregate] = r.SequenceNumber
}

func (o *orderWatch) leave(r streams.Record, acked bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.running, r.Aggregate)
	if acked {
		o.applied[r.Aggregate] = max(o.applied[r.Aggregate], version(r))
	}
}

func (o *orderWatch) appliedUpTo(agg string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.applied[agg]
}

// slowConsume handles every message in its own goroutine, taking `slow` per record; a
// cancelled context makes it give up after a short while (as an HTTP call being torn
// down does) and nack.
func slowConsume(t *testing.T, s *subscriber, o *orderWatch, slow time.Duration) {
	t.Helper()
	ch, err := s.Subscribe(context.Background(), "records")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for msg := range ch {
			go func(msg *message.Message) {
				r, err := streams.DecodeRecord(msg)
				if err != nil {
					t.Error(err)
					msg.Nack()
					return
				}
				o.enter(s.owner, r)
				acked := true
				select {
				case <-time.After(slow):
				case <-msg.Context().Done():
					time.Sleep(50 * time.Millisecond)
					acked = false
				}
				o.leave(r, acked)
				if acked {
					msg.Ack()
				} else {
					msg.Nack()
				}
			}(msg)
		}
	}()
}

// A lease that moves (a handover to balance load, then Close of the holder) while its
// handlers are slower than the shutdown grace: the new holder delivers nothing of an
// aggregate before the old holder's handler for it has returned, and never an older
// record after a newer one.
func TestLeaseMovesNeverOverlapOrReorderAnAggregate(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	shards := []string{"s1", "s2"}
	arn, st := fakeStream(f, "handover", shards...)
	src := streams.NewStaticSource(st)
	const versions = 12
	// The grace is shorter than a handler, so every stop cuts into a running handler.
	short := func(c *streams.Config) { c.ShutdownTimeout = 100 * time.Millisecond }
	o := newOrderWatch(t)
	a := h.newSubscriber(src, f, nil, short)
	slowConsume(t, a, o, 600*time.Millisecond)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writes := make(chan struct{})
	go func() {
		defer close(writes)
		for v := 1; v <= versions && ctx.Err() == nil; v++ {
			f.Put(arn, "s1", item("a", v))
			f.Put(arn, "s2", item("b", v))
			time.Sleep(150 * time.Millisecond)
		}
	}()
	eventually(t, 10*time.Second, "the first subscriber holds both shards", func() bool {
		owners := h.owners(arn, shards...)
		return owners["s1"] == a.owner && owners["s2"] == a.owner
	})

	// A second process joins: one shard is handed over while its handler runs.
	b := h.newSubscriber(src, f, nil, short)
	slowConsume(t, b, o, 600*time.Millisecond)
	eventually(t, 15*time.Second, "each subscriber holds a shard", func() bool {
		owners := h.owners(arn, shards...)
		return owners["s1"] != owners["s2"] && owners["s1"] != "" && owners["s2"] != ""
	})
	time.Sleep(400 * time.Millisecond)

	// The first process stops while a handler of its shard runs.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	<-writes
	eventually(t, 30*time.Second, fmt.Sprintf("both aggregates reach v%d", versions), func() bool {
		return o.appliedUpTo("a") == versions && o.appliedUpTo("b") == versions
	})
}

// seqLess compares sequence numbers (decimal strings of any length) as integers.
func seqLess(a, b string) bool { return len(a) < len(b) || len(a) == len(b) && a < b }
