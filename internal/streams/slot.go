package streams

import (
	"context"
	"sync"
)

// slot is one of MaxInFlight, held by a delivered message until its handler acks or nacks
// it, or gives it back earlier (ReleaseSlot).
type slot struct {
	once sync.Once
	sem  chan struct{}
}

func (s *slot) release() { s.once.Do(func() { <-s.sem }) }

type slotKey struct{}

func withSlot(ctx context.Context, s *slot) context.Context {
	return context.WithValue(ctx, slotKey{}, s)
}

// ReleaseSlot gives back the MaxInFlight slot held by the message delivered by the
// Subscriber whose context (msg.Context()) ctx is, before its handler returns: call it from a handler that waits on something slow (a
// downstream that does not answer), so that records of other streams are delivered
// meanwhile. The message stays in flight for its own shard — it still counts against
// MaxInFlightPerShard, and its aggregate's later records still wait for it — so a stream
// whose downstream hangs takes at most MaxInFlightPerShard handlers of its own, and none of
// the slots the other streams share. Releasing twice, or a context not of a Subscriber's
// message, is a no-op.
func ReleaseSlot(ctx context.Context) {
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		s.release()
	}
}
