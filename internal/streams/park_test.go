package streams_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/streams/streamstest"
)

// parkEvent is one delivery to the handler of the parked tenant.
type parkEvent struct {
	seq, agg string
	attempt  string
	at       time.Time
	until    time.Time // Park was called with this; zero when acked
	v        int
	order    int // position in the order the subscriber delivered
}

// A tenant whose downstream fails parks its stream: it gives its slots back, so another
// tenant flows with MaxInFlight 2; the parked record comes again no earlier than asked,
// first, with its attempts untouched (MaxAttempts 2 never dead-letters it); the records
// that were in flight with it come after it, in order; metrics show the park.
func TestParkedStreamHoldsNoSlotsAndResumesInOrder(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	downARN, down := fakeStream(f, "down", "s1")
	upARN, upStream := fakeStream(f, "up", "s1")
	const aggs, versions = 6, 2
	for v := 1; v <= versions; v++ {
		for i := range aggs {
			f.Put(downARN, "s1", item(fmt.Sprintf("d%d", i), v))
		}
	}
	for i := range 20 {
		f.Put(upARN, "s1", item(fmt.Sprintf("u%d", i), 1))
	}
	s := h.newSubscriber(streams.NewStaticSource(down, upStream), f, nil, func(c *streams.Config) {
		c.MaxInFlight, c.MaxInFlightPerShard, c.MaxAttempts = 2, 2, 2
	})

	var realmUp atomic.Bool
	var mu sync.Mutex
	var events []parkEvent
	var upApplied atomic.Int64
	ch, err := s.Subscribe(context.Background(), "records")
	if err != nil {
		t.Fatal(err)
	}
	handle := func(msg *message.Message) {
		r, err := streams.DecodeRecord(msg)
		if err != nil {
			t.Error(err)
			msg.Nack()
			return
		}
		if r.Tenant == "up" {
			upApplied.Add(1)
			msg.Ack()
			return
		}
		order, _ := strconv.Atoi(msg.Metadata.Get("test_order"))
		ev := parkEvent{seq: r.SequenceNumber, agg: r.Aggregate, attempt: msg.Metadata.Get(streams.MetaAttempt), at: time.Now(), v: version(r), order: order}
		if !realmUp.Load() {
			time.Sleep(20 * time.Millisecond) // the realm takes a moment to fail
			ev.until = time.Now().Add(150 * time.Millisecond)
			streams.Park(msg, ev.until)
		}
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		if ev.until.IsZero() {
			msg.Ack()
		} else {
			msg.Nack()
		}
	}
	go func() {
		n := 0
		for msg := range ch {
			n++
			msg.Metadata.Set("test_order", strconv.Itoa(n))
			go handle(msg)
		}
	}()
	snapshot := func() []parkEvent {
		mu.Lock()
		defer mu.Unlock()
		return append([]parkEvent(nil), events...)
	}
	labels := map[string]string{"tenant": "down"}

	// While parked, the other tenant keeps flowing, also records written meanwhile.
	eventually(t, 10*time.Second, "the down tenant is parked", func() bool {
		return s.metric(t, "ssodir_stream_parked", labels) == 1
	})
	for i := 20; i < 40; i++ {
		f.Put(upARN, "s1", item(fmt.Sprintf("u%d", i), 1))
	}
	eventually(t, 10*time.Second, "every record of the up tenant is applied", func() bool { return upApplied.Load() == 40 })
	reads := f.StreamReads(downARN)
	time.Sleep(200 * time.Millisecond) // 20 poll intervals
	if n := f.StreamReads(downARN) - reads; n > 1 {
		t.Errorf("the parked stream was read %d times in 200ms; its reader must wait", n)
	}
	// The parked record is the one delivered again; the other in flight with it is held.
	parkedHead := func(evs []parkEvent) (string, int) {
		count := map[string]int{}
		head := ""
		for _, ev := range evs {
			count[ev.seq]++
			if count[ev.seq] > count[head] {
				head = ev.seq
			}
		}
		return head, count[head]
	}
	eventually(t, 10*time.Second, "the parked record came back three times", func() bool {
		_, n := parkedHead(snapshot())
		return n >= 3
	})
	if got := s.metric(t, "ssodir_stream_parked_records", labels); got != aggs*versions {
		t.Errorf("ssodir_stream_parked_records = %v while parked, want %d", got, aggs*versions)
	}
	realmUp.Store(true)
	eventually(t, 10*time.Second, "every record of the down tenant is applied", func() bool {
		n := 0
		for _, ev := range snapshot() {
			if ev.until.IsZero() {
				n++
			}
		}
		return n == aggs*versions
	})

	evs := snapshot()
	head, _ := parkedHead(evs)
	slices.SortFunc(evs, func(a, b parkEvent) int { return a.order - b.order })
	// The records in flight when the stream was parked: delivered before the first park
	// was asked for.
	inFlight := map[string]bool{}
	for _, ev := range evs {
		if ev.at.After(evs[0].at.Add(20 * time.Millisecond)) {
			break
		}
		inFlight[ev.seq] = true
	}
	if len(inFlight) > 2 {
		t.Errorf("%d records in flight at once with MaxInFlightPerShard 2", len(inFlight))
	}
	var headAcked time.Time
	lastUntil := map[string]time.Time{}
	var ackOrder []parkEvent
	for _, ev := range evs {
		if u, ok := lastUntil[ev.seq]; ok && ev.at.Before(u) {
			t.Errorf("%s redelivered at %s, before the %s it was parked until", ev.seq, ev.at.Format(time.StampMilli), u.Format(time.StampMilli))
		}
		if ev.attempt != "1" {
			t.Errorf("%s delivered as attempt %s; parked deliveries must not count", ev.seq, ev.attempt)
		}
		if !ev.until.IsZero() {
			lastUntil[ev.seq] = ev.until
			if ev.seq != head && !inFlight[ev.seq] {
				t.Errorf("%s delivered while the stream was parked behind %s", ev.seq, head)
			}
			continue
		}
		if headAcked.IsZero() && ev.seq != head {
			t.Errorf("%s applied before the parked record %s", ev.seq, head)
		}
		if ev.seq == head {
			headAcked = ev.at
		}
		ackOrder = append(ackOrder, ev)
	}
	// After the parked record, the held one (in flight with it) comes next.
	for held := range inFlight {
		if held != head && (len(ackOrder) < 2 || ackOrder[1].seq != held) {
			t.Errorf("held record %s not redelivered right after the parked one: %+v", held, ackOrder[:min(3, len(ackOrder))])
		}
	}
	last := map[string]int{}
	for _, ev := range ackOrder {
		if ev.v <= last[ev.agg] {
			t.Errorf("%s: v%d applied after v%d", ev.agg, ev.v, last[ev.agg])
		}
		last[ev.agg] = ev.v
	}
	if dls, err := h.dlq.List(context.Background(), deadletters.Filter{}); err != nil || len(dls) != 0 {
		t.Errorf("dead letters %v (%v), want none: a parked delivery never dead-letters", dls, err)
	}
	eventually(t, 5*time.Second, "the park metrics are back to zero", func() bool {
		return s.metric(t, "ssodir_stream_parked", labels) == 0 && s.metric(t, "ssodir_stream_parked_records", labels) == 0
	})
}

// A parked record that, once its downstream answers, fails for a reason of its own (it
// waits on a record held behind it, such as a membership whose user's create is held)
// ends the park: the held records go on, and it succeeds on a later attempt instead of
// being retried alone until it becomes a dead letter.
func TestParkEndsWhenTheParkedRecordFailsOnItsOwn(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "down", "s1")
	f.Put(arn, "s1", item("membership", 1))
	f.Put(arn, "s1", item("user", 1))
	s := h.newSubscriber(streams.NewStaticSource(st), f, nil, func(c *streams.Config) {
		c.MaxInFlight, c.MaxInFlightPerShard, c.MaxAttempts = 2, 2, 4
	})
	ch, err := s.Subscribe(context.Background(), "records")
	if err != nil {
		t.Fatal(err)
	}
	var realmUp, userDone, membershipDone atomic.Bool
	var parks atomic.Int64
	handle := func(msg *message.Message) {
		r, err := streams.DecodeRecord(msg)
		if err != nil {
			t.Error(err)
			msg.Nack()
			return
		}
		if !realmUp.Load() {
			if r.Aggregate == "user" {
				time.Sleep(50 * time.Millisecond) // the membership's record parks first
			}
			streams.Park(msg, time.Now().Add(100*time.Millisecond))
			if parks.Add(1) == 2 {
				realmUp.Store(true)
			}
			msg.Nack()
			return
		}
		switch {
		case r.Aggregate == "user":
			userDone.Store(true)
			msg.Ack()
		case userDone.Load():
			membershipDone.Store(true)
			msg.Ack()
		default:
			msg.Nack() // the user is not there yet: this record's own failure
		}
	}
	go func() {
		for msg := range ch {
			go handle(msg)
		}
	}()
	eventually(t, 10*time.Second, "both records applied", func() bool { return userDone.Load() && membershipDone.Load() })
	if dls, err := h.dlq.List(context.Background(), deadletters.Filter{}); err != nil || len(dls) != 0 {
		t.Errorf("dead letters %v (%v), want none", dls, err)
	}
}

// A park timer that fires before the park's end (the wall clock stepped back after it was
// armed) is armed again: the parked record is still redelivered, not held for ever. The
// clock steps back a second after the timer is armed, and forward again after it fired.
func TestAParkTimerThatFiresEarlyIsRearmed(t *testing.T) {
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "early", "s1")
	f.Put(arn, "s1", item("user", 1))
	var lag atomic.Int64
	streams.SetParkClock(t, func() time.Time { return time.Now().Add(-time.Duration(lag.Load())) })
	s := h.newSubscriber(streams.NewStaticSource(st), f, nil, func(*streams.Config) {})
	ch, err := s.Subscribe(context.Background(), "records")
	if err != nil {
		t.Fatal(err)
	}
	var deliveries atomic.Int32
	var done atomic.Bool
	go func() {
		for msg := range ch {
			if deliveries.Add(1) == 1 {
				// Armed for 150 ms; when it fires, the clock says 850 ms are still to go.
				streams.Park(msg, time.Now().Add(150*time.Millisecond))
				msg.Nack()
				go func() {
					time.Sleep(50 * time.Millisecond)
					lag.Store(int64(time.Second))
					time.Sleep(400 * time.Millisecond)
					lag.Store(0)
				}()
				continue
			}
			done.Store(true)
			msg.Ack()
		}
	}()
	eventually(t, 10*time.Second, "the parked record redelivered", done.Load)
}
