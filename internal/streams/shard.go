package streams

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/identity"
)

// errStopping ends a retry loop because the worker is stopping.
var errStopping = errors.New("shard worker stopping")

// entry is one record on its way through a shard worker.
type entry struct {
	rec     Record
	payload []byte
	uuid    string
	// poison is why the record could not be read or encoded; it becomes a dead letter
	// untried.
	poison   string
	attempts int
	done     bool // applied or dead-lettered
	sentAt   time.Time
}

// page is what the reader hands the worker loop.
type page struct {
	entries []*entry
	end     bool // the shard is closed and read to its end
	gone    bool // the stream no longer exists: stop without finishing the shard
	lost    bool // a conditional write found the lease gone
}

type result struct {
	e      *entry
	acked  bool
	reason string
	park   time.Time // the handler called Park
	giveUp bool      // the handler called GiveUp
}

// shardWorker reads one leased shard and delivers its records: records of one aggregate
// one at a time in shard order, records of different aggregates concurrently. Its loop
// (run) owns all delivery state; a reader goroutine feeds it pages, and a goroutine per
// delivered message reports the ack or nack.
type shardWorker struct {
	s       *Subscriber
	st      *streamState
	stream  Stream
	shardID string
	key     string
	token   string
	start   string // the checkpoint found when the lease was taken
	log     *zap.Logger

	graceful     chan struct{}
	gracefulOnce sync.Once
	deadline     atomic.Int64 // unix nanoseconds: stop waiting for in-flight messages
	abandon      chan struct{}
	abandonOnce  sync.Once
	stopping     atomic.Bool
	done         chan struct{}
	// hctx is the parent of every handler context of this worker: cancelled when the
	// worker stops (after its grace) or loses its lease. The lease is released only after
	// every handler has returned, so a peer never delivers while one of ours runs.
	hctx    context.Context
	hcancel context.CancelFunc
	// ctx bounds the worker's own calls; abandonNow cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	pages   chan page
	results chan result
	retries chan *entry
	parkDue chan *parkState
	// holdReads stops the reader while the stream is parked; wake tells it to look again.
	holdReads atomic.Bool
	wake      chan struct{}

	// Owned by run.
	checkpoint string // last written
	lastDone   string // every record up to here is applied or dead-lettered
	pending    []*entry
	aggs       map[string][]*entry // waiting records per aggregate; the head is the one in play
	ready      []*entry
	inflight   int
	haveSlot   bool
	next       *message.Message
	nextCancel context.CancelFunc
	nextSlot   *slot
	ended      bool
	park       *parkState // nil unless a handler parked the stream
	waiting    int        // last published count of records waiting behind the park
}

func newShardWorker(s *Subscriber, st *streamState, r leaseRow) *shardWorker {
	start := r.Checkpoint
	log := s.log.With(zap.String("stream", r.StreamARN), zap.String("shard", r.ShardID),
		zap.String("system", st.System), zap.String("tenant", st.Tenant))
	if start != "" && !validSeq(start) {
		// Starting over from the oldest record re-applies, which idempotent handlers
		// absorb; guessing a position could skip records.
		log.Error("ignoring malformed checkpoint; reading the shard from its oldest record", zap.String("checkpoint", start))
		start = ""
	}
	hctx, hcancel := context.WithCancel(s.msgBase)
	ctx, cancel := context.WithCancel(context.Background())
	return &shardWorker{
		s: s, st: st, stream: st.Stream, shardID: r.ShardID, key: r.key(), token: r.Token,
		start: start, log: log, hctx: hctx, hcancel: hcancel, ctx: ctx, cancel: cancel,
		graceful: make(chan struct{}), abandon: make(chan struct{}), done: make(chan struct{}),
		pages: make(chan page), results: make(chan result), retries: make(chan *entry),
		parkDue: make(chan *parkState), wake: make(chan struct{}, 1),
		checkpoint: start, lastDone: start, aggs: map[string][]*entry{},
	}
}

// stopGracefully asks the worker to stop reading, wait for its in-flight messages until
// deadline, checkpoint and release the lease.
func (w *shardWorker) stopGracefully(deadline time.Time) {
	w.gracefulOnce.Do(func() {
		w.deadline.Store(deadline.UnixNano())
		w.stopping.Store(true)
		close(w.graceful)
	})
}

// abandonNow makes the worker stop at once without writing: the lease is someone else's.
func (w *shardWorker) abandonNow() {
	w.stopping.Store(true)
	w.abandonOnce.Do(func() {
		close(w.abandon)
		w.cancel()
	})
}

func (w *shardWorker) isStopping() bool { return w.stopping.Load() }

func (w *shardWorker) run() {
	var (
		finished bool
		exitErr  error
	)
	ctx, cancel := w.ctx, w.cancel
	readerCtx, stopReader := context.WithCancel(ctx)
	readerDone := make(chan struct{})
	defer func() {
		stopReader()
		cancel()
		w.hcancel()
		<-readerDone
		w.discardNext()
		w.endPark()
		close(w.done)
		w.s.workerExited(w, finished, exitErr)
	}()

	w.log.Info("shard lease taken", zap.String("checkpoint", w.start))
	// Which aggregates are blocked by dead letters must be known before the first
	// delivery, or records that belong behind one would be applied. Read at every start:
	// a shard changes hands only at a start (a lease move, or a child after its parent,
	// whose dead letters another process may have written), and the stream's set here
	// may predate them.
	err := w.retryIO(ctx, "load dead letters", func(ctx context.Context) error {
		return w.s.loadBlocked(ctx, w.st)
	})
	if err != nil {
		close(readerDone)
		if w.isAbandoned() {
			return
		}
		exitErr = w.release()
		return
	}
	go func() {
		defer close(readerDone)
		w.read(readerCtx)
	}()

	cp := time.NewTicker(w.s.cfg.CheckpointInterval)
	defer cp.Stop()
	graceful, abandon := w.graceful, w.abandon
	var hardStop <-chan time.Time
	abandoned := false
	// stop ends reading and delivering; the loop then only collects the verdicts of the
	// handlers still running.
	stop := func() {
		graceful = nil
		stopReader()
		w.discardNext()
	}
	maxPending := int(w.s.cfg.GetRecordsLimit)
	for {
		stopping := graceful == nil
		if stopping && w.inflight == 0 {
			break
		}
		if !stopping && w.ended && len(w.pending) == 0 {
			done, err := w.finish(ctx)
			if done || errors.Is(err, errLeaseLost) || w.isAbandoned() {
				finished = done
				return
			}
			// Asked to stop while finishing: release as of the last record instead.
			stop()
			continue
		}
		var pages <-chan page
		if !stopping && !w.ended && len(w.pending) < maxPending {
			pages = w.pages
		}
		var slot chan<- struct{}
		var out chan<- *message.Message
		if !stopping && len(w.ready) > 0 && w.mayDeliver() {
			if !w.haveSlot {
				if w.inflight < w.s.cfg.MaxInFlightPerShard {
					slot = w.s.sem
				}
			} else {
				if w.next == nil {
					w.prepare(w.ready[0])
				}
				out = w.s.out
			}
		}
		var tick <-chan time.Time
		if !abandoned {
			tick = cp.C
		}
		select {
		case p := <-pages:
			switch {
			case p.lost:
				w.log.Warn("lease lost while reading; stopping the shard without writing")
				w.abandonNow()
			case p.gone:
				w.stopGracefully(time.Now().Add(w.s.cfg.ShutdownTimeout))
			default:
				w.accept(ctx, p)
			}
		case slot <- struct{}{}:
			w.haveSlot = true
		case out <- w.next:
			w.sent()
		case r := <-w.results:
			w.handle(ctx, r, stopping)
		case e := <-w.retries:
			if !stopping {
				w.ready = append(w.ready, e)
			}
		case p := <-w.parkDue:
			w.parkTimerFired(p)
		case <-tick:
			if w.saveCheckpoint(ctx) {
				w.abandonNow()
			}
		case <-graceful:
			stop()
			hardStop = time.After(time.Until(time.Unix(0, w.deadline.Load())))
		case <-hardStop:
			hardStop = nil
			w.log.Warn("in-flight records not acked by the shutdown deadline; cancelling their handlers, the lease is released once they return",
				zap.Int("in_flight", w.inflight))
			w.hcancel()
		case <-abandon:
			// Nothing more is written under this lease, but the worker stays until its
			// handlers have returned, so this process cannot take the shard again while
			// one of them still runs.
			abandon, abandoned, hardStop = nil, true, nil
			stop()
			w.hcancel()
		}
	}
	if abandoned {
		return
	}
	exitErr = w.release()
}

func (w *shardWorker) isAbandoned() bool {
	select {
	case <-w.abandon:
		return true
	default:
		return false
	}
}

// prepare builds the message for e's next delivery and keeps it until the output channel
// takes it.
func (w *shardWorker) prepare(e *entry) {
	e.attempts++
	msg := message.NewMessage(e.uuid, e.payload)
	msg.Metadata = recordMetadata(e.rec)
	msg.Metadata.Set(MetaAttempt, strconv.Itoa(e.attempts))
	sl := &slot{sem: w.s.sem}
	ctx, cancel := context.WithCancel(withSlot(withRecord(w.hctx, e.rec), sl))
	msg.SetContext(ctx)
	w.next, w.nextCancel, w.nextSlot = msg, cancel, sl
}

// discardNext drops a prepared but unsent message and gives back its slot.
func (w *shardWorker) discardNext() {
	if w.next != nil {
		w.nextCancel()
		w.ready[0].attempts--
		w.next, w.nextCancel, w.nextSlot = nil, nil, nil
	}
	if w.haveSlot {
		<-w.s.sem
		w.haveSlot = false
	}
}

func (w *shardWorker) sent() {
	e := w.ready[0]
	w.ready = w.ready[1:]
	msg, cancel, sl := w.next, w.nextCancel, w.nextSlot
	w.next, w.nextCancel, w.nextSlot = nil, nil, nil
	w.haveSlot = false // the slot now travels with the message (ReleaseSlot may free it early)
	w.inflight++
	e.sentAt = time.Now()
	if w.park != nil && w.park.head == e {
		w.park.inFlight = true
	}
	go w.await(e, msg, cancel, sl)
}

// await reports the handler's verdict on msg to the loop and frees its slot.
func (w *shardWorker) await(e *entry, msg *message.Message, cancel context.CancelFunc, sl *slot) {
	var r result
	select {
	case <-msg.Acked():
		r = result{e: e, acked: true}
	case <-msg.Nacked():
		// The handler set the reason before it nacked; the closed channel orders the read.
		r = result{e: e, reason: msg.Metadata.Get(MetaFailureReason), park: parkUntil(msg), giveUp: msg.Metadata.Get(MetaGiveUp) != ""}
	case <-w.s.msgBase.Done():
		cancel()
		sl.release()
		return
	}
	cancel()
	sl.release()
	select {
	case w.results <- r:
	case <-w.done:
	}
}

func (w *shardWorker) accept(ctx context.Context, p page) {
	for _, e := range p.entries {
		w.pending = append(w.pending, e)
		q := append(w.aggs[e.rec.Aggregate], e)
		w.aggs[e.rec.Aggregate] = q
		if len(q) == 1 {
			w.makeReady(ctx, e)
		}
	}
	if p.end {
		w.ended = true
	}
}

// makeReady puts the new head of an aggregate's queue in line for delivery, unless the
// aggregate has a dead letter: then the record is parked behind it, keeping its order.
func (w *shardWorker) makeReady(ctx context.Context, e *entry) {
	if w.isStopping() {
		return
	}
	agg := e.rec.Aggregate
	if w.st.blockedBy(agg) {
		// The set only ever over-approximates (a re-drive elsewhere may have emptied it),
		// so a hit is confirmed against the table.
		var first string
		var found bool
		err := w.retryIO(ctx, "check dead letters", func(ctx context.Context) error {
			var err error
			first, found, err = w.s.dlq.FirstOf(ctx, e.rec.System, e.rec.Tenant, e.rec.Table, agg)
			return err
		})
		if err != nil {
			return
		}
		if found {
			w.deadLetter(ctx, e, "blocked behind "+first, first)
			return
		}
		w.st.unblock(agg)
		w.log.Info("aggregate has no dead letters left; delivering again", zap.String("aggregate", identity.LogKey(agg)))
	}
	if e.poison != "" {
		w.deadLetter(ctx, e, e.poison, "")
		return
	}
	w.ready = append(w.ready, e)
}

func (w *shardWorker) handle(ctx context.Context, r result, stopping bool) {
	w.inflight--
	e := r.e
	p := w.park
	if p != nil && p.head == e {
		p.inFlight = false
	}
	if r.acked {
		w.applied(e)
		if p != nil && p.head == e {
			w.endPark()
		}
		w.complete(ctx, e)
		w.updateWaiting()
		return
	}
	if stopping {
		return // not retried: the next holder of the shard redelivers it
	}
	switch {
	case r.giveUp:
		if p != nil && p.head == e {
			w.endPark()
		}
		reason := r.reason
		if reason == "" {
			reason = "given up by its handler"
		}
		w.deadLetter(ctx, e, reason, "")
		return
	case p != nil && p.head == e && !r.park.IsZero():
		e.attempts--
		w.reschedulePark(r.park)
		return
	case p != nil && p.head == e:
		// The parked record failed without asking to be parked again: its downstream
		// answered, so the park is over. The held records go on in order, and this one is
		// an ordinary failed attempt, retried after the usual backoff. Keeping the others
		// held behind it would deadlock a record that waits on one of them (a membership
		// whose user's create is held).
		w.endPark()
	case p != nil:
		w.holdFailed(e, r.park)
		return
	case !r.park.IsZero():
		w.startPark(e, r.park)
		return
	}
	if e.attempts < w.s.cfg.MaxAttempts {
		d := backoff(w.s.cfg.RetryBackoff, w.s.cfg.MaxRetryBackoff, e.attempts)
		w.log.Debug("record nacked; redelivering", zap.String("sequence_number", e.rec.SequenceNumber),
			zap.String("aggregate", identity.LogKey(e.rec.Aggregate)), zap.Int("attempt", e.attempts), zap.Duration("backoff", d))
		time.AfterFunc(d, func() {
			select {
			case w.retries <- e:
			case <-w.done:
			}
		})
		return
	}
	reason := r.reason
	if reason == "" {
		reason = fmt.Sprintf("handler nacked %d deliveries without giving a reason (use streams.FailureReason)", e.attempts)
	}
	w.deadLetter(ctx, e, reason, "")
}

// deadLetter stores e as a dead letter (failed, or parked behind another) and moves on.
// If it cannot be stored before the worker stops, the record stays unapplied and the
// checkpoint stays before it.
func (w *shardWorker) deadLetter(ctx context.Context, e *entry, reason, behind string) {
	rec := e.rec
	if err := w.retryIO(ctx, "store dead letter", func(ctx context.Context) error {
		return w.s.dlq.Add(ctx, rec, e.attempts, reason, behind)
	}); err != nil {
		return
	}
	fields := []zap.Field{zap.String("aggregate", identity.LogKey(rec.Aggregate)), zap.String("sequence_number", rec.SequenceNumber),
		zap.String("event_name", rec.EventName)}
	kind := "parked"
	if behind == "" {
		kind = "failed"
		w.st.block(rec.Aggregate, rec.SequenceNumber)
		w.log.Error("record dead-lettered; later records of its aggregate are parked until it is re-driven",
			append(fields, zap.Int("attempts", e.attempts), zap.String("reason", truncate(reason, 500)))...)
	} else {
		w.log.Warn("record parked behind a dead letter of its aggregate", append(fields, zap.String("blocked_behind", behind))...)
	}
	w.s.m.deadLetters.WithLabelValues(w.s.cfg.Consumer, rec.System, rec.Tenant, kind).Inc()
	w.s.m.parked.WithLabelValues(w.s.cfg.Consumer, rec.System, rec.Tenant).Inc()
	w.complete(ctx, e)
}

// complete marks e applied or dead-lettered, moves the checkpoint candidate over the
// finished prefix of the shard and lets the aggregate's next record go.
func (w *shardWorker) complete(ctx context.Context, e *entry) {
	e.done = true
	agg := e.rec.Aggregate
	q := w.aggs[agg][1:]
	if len(q) == 0 {
		delete(w.aggs, agg)
	} else {
		w.aggs[agg] = q
	}
	for len(w.pending) > 0 && w.pending[0].done {
		w.lastDone = w.pending[0].rec.SequenceNumber
		w.pending[0] = nil
		w.pending = w.pending[1:]
	}
	if len(q) > 0 {
		w.makeReady(ctx, q[0])
	}
}

func (w *shardWorker) applied(e *entry) {
	m, c := w.s.m, w.s.cfg.Consumer
	event := e.rec.EventName
	if e.rec.TTLDeletion {
		event = "TTL_REMOVE"
	}
	m.records.WithLabelValues(c, event).Inc()
	m.applySeconds.WithLabelValues(c).Observe(time.Since(e.sentAt).Seconds())
	// A REMOVE carries only the old image, whose stamp is the previous write's time.
	if t, ok := stampMillis(e.rec.NewImage, w.s.cfg.TimestampAttribute); ok {
		m.lagSeconds.WithLabelValues(c, e.rec.System, e.rec.Tenant).Set(time.Since(t).Seconds())
	}
}
