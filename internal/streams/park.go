package streams

import (
	"context"
	"slices"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/identity"
)

// MetaParkUntil is set on a message by Park: the time (RFC 3339) before which its stream
// must not be delivered again.
const MetaParkUntil = "park_until"

// Park asks the subscriber to hold msg's stream until `until`: call it in a handler, then
// return a non-nil error. The message is redelivered no earlier than until; no later record
// of that stream is delivered before it is acked; the delivery does not count toward
// MaxAttempts and never dead-letters; while parked the stream holds no in-flight slots and
// its shard reader does not read. Records already in flight on that stream that also fail
// are held the same way and redelivered, in order, after the parked one is acked.
//
// The hold is kept by the shard worker of the record (a stream has one open shard except
// for the moments after a split, and a child starts only after its parent is finished).
// It is not stored: a lease that moves while parked lets the new holder deliver the
// parked record at once, and its handler parks it again if the downstream still fails.
func Park(msg *message.Message, until time.Time) {
	msg.Metadata.Set(MetaParkUntil, until.UTC().Format(time.RFC3339Nano))
}

// MetaGiveUp is set on a message by GiveUp.
const MetaGiveUp = "give_up"

// GiveUp asks the subscriber to make msg a dead letter at once: call it in a handler, then
// return a non-nil error. A parked stream whose parked record is given up goes on with
// the records held behind it. keycloak-sync gives up the parked record of a tenant parked
// longer than it allows, so that the rest flows.
func GiveUp(msg *message.Message) {
	msg.Metadata.Set(MetaGiveUp, "1")
}

// parkClock is the clock the park timer checks itself against (a test makes it lag).
var parkClock = time.Now

// parkUntil reads what Park set on msg; zero when it was not parked.
func parkUntil(msg *message.Message) time.Time {
	v := msg.Metadata.Get(MetaParkUntil)
	if v == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

// parkState is a shard worker's hold on its stream; it is owned by the worker's loop.
type parkState struct {
	head     *entry // the record parked first: redelivered at until, alone
	until    time.Time
	due      bool     // until has passed; head is (back) in line for delivery
	inFlight bool     // head is delivered and not yet acked or nacked
	held     []*entry // other in-flight records that failed meanwhile, in sequence order
	timer    *time.Timer
}

// startPark holds the shard behind e, which its handler parked until `until`.
func (w *shardWorker) startPark(e *entry, until time.Time) {
	e.attempts-- // a parked delivery is not an attempt
	w.park = &parkState{head: e}
	w.discardNext()
	w.holdReads.Store(true)
	w.log.Warn("stream parked by its handler; later records wait", zap.String("sequence_number", e.rec.SequenceNumber),
		zap.String("aggregate", identity.LogKey(e.rec.Aggregate)), zap.Time("until", until))
	w.s.parkedChanged(w.stream, 1)
	w.reschedulePark(until)
	w.updateWaiting()
}

// reschedulePark arms the redelivery of the parked record at until.
func (w *shardWorker) reschedulePark(until time.Time) {
	p := w.park
	p.until, p.due = until, false
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timer = time.AfterFunc(until.Sub(parkClock()), func() {
		select {
		case w.parkDue <- p:
		case <-w.done:
		}
	})
}

// parkTimerFired puts the parked record back in line, first. A timer that fired before
// until (the wall clock stepped back since it was armed) is armed again: returning without
// one would leave the stream parked for ever.
func (w *shardWorker) parkTimerFired(p *parkState) {
	if w.park != p || p.due {
		return
	}
	if parkClock().Before(p.until) {
		w.reschedulePark(p.until)
		return
	}
	p.due = true
	w.ready = append([]*entry{p.head}, w.ready...)
}

// holdFailed holds e, an in-flight record that failed while the stream is parked.
func (w *shardWorker) holdFailed(e *entry, until time.Time) {
	e.attempts--
	p := w.park
	i, _ := slices.BinarySearchFunc(p.held, e, func(a, b *entry) int {
		return compareSeq(a.rec.SequenceNumber, b.rec.SequenceNumber)
	})
	p.held = slices.Insert(p.held, i, e)
	if until.After(p.until) && !p.inFlight && !p.due {
		w.reschedulePark(until)
	}
	w.updateWaiting()
}

// endPark lets the stream go on: the held records first, in order, then reading. It is
// also called when the worker exits, to clear the metrics.
func (w *shardWorker) endPark() {
	p := w.park
	if p == nil {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	w.park = nil
	w.ready = append(p.held, w.ready...)
	w.holdReads.Store(false)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	w.updateWaiting()
	w.s.parkedChanged(w.stream, -1)
	if !w.isStopping() {
		w.log.Info("parked stream resumed", zap.String("sequence_number", p.head.rec.SequenceNumber), zap.Int("held", len(p.held)))
	}
}

// mayDeliver reports whether the loop may deliver ready[0]: always unless parked, and
// while parked only the parked record once it is due.
func (w *shardWorker) mayDeliver() bool {
	p := w.park
	return p == nil || p.due && !p.inFlight && len(w.ready) > 0 && w.ready[0] == p.head
}

// updateWaiting publishes how many records of a parked stream wait (read, not done).
func (w *shardWorker) updateWaiting() {
	n := 0
	if w.park != nil {
		for _, e := range w.pending {
			if !e.done {
				n++
			}
		}
	}
	if n != w.waiting {
		w.s.m.parkedRecords.WithLabelValues(w.s.cfg.Consumer, w.stream.System, w.stream.Tenant).Add(float64(n - w.waiting))
		w.waiting = n
	}
}

// waitUnparked blocks the reader while the stream is parked; false when ctx ended.
func (w *shardWorker) waitUnparked(ctx context.Context) bool {
	for w.holdReads.Load() {
		select {
		case <-w.wake:
		case <-ctx.Done():
			return false
		}
	}
	return ctx.Err() == nil
}

// parkedChanged counts the parked shards of a tenant and sets ssodir_stream_parked.
func (s *Subscriber) parkedChanged(st Stream, delta int) {
	k := [2]string{st.System, st.Tenant}
	s.mu.Lock()
	n := s.parkedShards[k] + delta
	if n <= 0 {
		delete(s.parkedShards, k)
	} else {
		s.parkedShards[k] = n
	}
	s.mu.Unlock()
	if n > 0 {
		s.m.parkedStreams.WithLabelValues(s.cfg.Consumer, st.System, st.Tenant).Set(1)
		return
	}
	// Per-tenant series exist only while they say something: thousands of tenants must
	// not leave thousands of zeros behind.
	s.m.parkedStreams.DeleteLabelValues(s.cfg.Consumer, st.System, st.Tenant)
	s.m.parkedRecords.DeleteLabelValues(s.cfg.Consumer, st.System, st.Tenant)
}
