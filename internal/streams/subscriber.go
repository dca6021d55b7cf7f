package streams

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/zap"
)

// callTimeout bounds one AWS call, so a hung connection cannot stall a loop.
const callTimeout = 10 * time.Second

// acquireConcurrency and syncConcurrency bound the lease-table writes a lease round and
// the discovery loop make at once (DescribeStream itself is paced by its limiter).
const (
	acquireConcurrency = 16
	syncConcurrency    = 8
)

// Subscriber consumes DynamoDB streams as a watermill message.Subscriber. See the package
// documentation for how it leases shards, orders, retries and checkpoints.
type Subscriber struct {
	cfg    Config
	log    *zap.Logger
	m      *metrics
	leases *leaseStore
	dlq    DeadLetterStore

	out chan *message.Message
	// sem holds a token per message delivered and not yet acked or nacked.
	sem chan struct{}

	mu                sync.Mutex
	subscribed        bool
	closed            bool
	streams           map[string]*streamState // by stream ARN
	arnByTable        map[string]string       // streams the Source names by table only
	rows              map[string]leaseRow     // last lease table snapshot, by lease key
	workers           map[string]*shardWorker // by lease key
	seen              map[string]ownerSeen    // heartbeat observations, by owner id
	handoverRequested map[string]time.Time    // lease keys asked of their holders
	parkedShards      map[[2]string]int       // (system, tenant) → shards parked by a handler
	closeErrs         []error

	lastBeat atomic.Int64 // unix nanoseconds of the last successful heartbeat

	stop chan struct{} // closed when Close begins
	// Discovery work that must not wait behind a sweep of every stream: streams just
	// found and streams with a shard just finished (urgent, listed first), and tables
	// whose stream ARN the Source did not give (resolve). kick wakes the loop.
	urgent    []string
	urgentSet map[string]bool
	resolve   map[string]Stream // by table
	kick      chan struct{}
	limits    *accountLimits
	// firstRound is closed after the first lease round: the lease rows it read tell the
	// discovery loop which streams' shards are known already.
	firstRound     chan struct{}
	firstRoundOnce sync.Once
	// Guarded by mu: when the partition was last read whole, whether the next round must
	// read it or may act on the rows known, the live owners and our handover asks last
	// seen.
	lastFull     time.Time
	fullNeeded   bool
	localNeeded  bool
	lastAlive    map[string]bool
	myAsks       int64
	releasesSeen map[string]int64 // peers' release counters last seen
	balanceNow   chan struct{}    // a lease round at once (a stream was found, or new shards)
	loopCtx      context.Context
	loopCancel   context.CancelFunc
	loops        sync.WaitGroup
	workersWG    sync.WaitGroup
	// The heartbeat goes on until every worker has stopped, so that no peer takes a
	// lease while one of our handlers still runs: stopBeat ends it, beatDone says so.
	stopBeat chan struct{}
	beatDone chan struct{}
	// msgBase is the parent of every message context. It does not end with the
	// Subscribe context, so in-flight handlers can finish during a graceful stop; Close
	// cancels it last.
	msgBase   context.Context
	msgCancel context.CancelFunc
	closeOnce sync.Once
	closeErr  error
}

var _ message.Subscriber = (*Subscriber)(nil)

type ownerSeen struct {
	heartbeat int64
	changed   time.Time
}

// streamState is what the Subscriber knows of one followed stream.
type streamState struct {
	Stream
	// listed is the last DescribeStream result (shard → parent); nil until the first.
	listed  map[string]string
	removed bool // the Source no longer names it: let its shards go

	blockMu       sync.Mutex
	blocked       map[string]string // aggregate → sequence number of its first dead letter
	blockedLoaded bool
}

// NewSubscriber checks cfg and prepares a Subscriber; nothing runs before Subscribe.
func NewSubscriber(cfg Config) (*Subscriber, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, fmt.Errorf("streams: register metrics: %w", err)
	}
	loopCtx, loopCancel := context.WithCancel(context.Background())
	msgBase, msgCancel := context.WithCancel(context.Background())
	return &Subscriber{
		cfg:               cfg,
		log:               cfg.Logger.With(zap.String("consumer", cfg.Consumer), zap.String("owner", cfg.Owner)),
		m:                 m,
		leases:            &leaseStore{db: cfg.DB, table: cfg.LeaseTable, consumer: cfg.Consumer, address: cfg.Address},
		dlq:               cfg.DeadLetters,
		out:               make(chan *message.Message),
		sem:               make(chan struct{}, cfg.MaxInFlight),
		streams:           map[string]*streamState{},
		arnByTable:        map[string]string{},
		rows:              map[string]leaseRow{},
		workers:           map[string]*shardWorker{},
		seen:              map[string]ownerSeen{},
		handoverRequested: map[string]time.Time{},
		parkedShards:      map[[2]string]int{},
		releasesSeen:      map[string]int64{},
		stop:              make(chan struct{}),
		urgentSet:         map[string]bool{},
		resolve:           map[string]Stream{},
		kick:              make(chan struct{}, 1),
		limits:            newAccountLimits(cfg),
		firstRound:        make(chan struct{}),
		balanceNow:        make(chan struct{}, 1),
		stopBeat:          make(chan struct{}),
		beatDone:          make(chan struct{}),
		loopCtx:           loopCtx,
		loopCancel:        loopCancel,
		msgBase:           msgBase,
		msgCancel:         msgCancel,
	}, nil
}

// Owner is this process's owner id in the lease table.
func (s *Subscriber) Owner() string { return s.cfg.Owner }

// Subscribe starts consuming and returns the channel of records. The topic only labels
// the subscription: what is read comes from Config.Source, and leases and checkpoints
// belong to Config.Consumer. A Subscriber can be subscribed once.
//
// Several messages are out at a time (up to MaxInFlight, never two of one aggregate), so
// a consumer reading the channel directly must not wait for one ack before reading the
// next; watermill's router handles each message in its own goroutine.
//
// When ctx ends the Subscriber stops as by Close.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, errors.New("streams: subscriber is closed")
	case s.subscribed:
		s.mu.Unlock()
		return nil, errors.New("streams: subscriber is already subscribed")
	}
	s.subscribed = true
	// Messages carry the values of ctx but not its end: in-flight handlers may finish
	// after ctx is cancelled.
	s.msgCancel()
	s.msgBase, s.msgCancel = context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Unlock()

	// The first heartbeat is synchronous: peers count us before we hold anything, and a
	// missing table or bad credentials fail here, not in a log.
	hctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := s.leases.heartbeat(hctx, s.cfg.Owner)
	cancel()
	if err != nil {
		s.mu.Lock()
		s.subscribed = false
		s.mu.Unlock()
		return nil, fmt.Errorf("streams: subscribe %s: %w", topic, err)
	}
	s.lastBeat.Store(time.Now().UnixNano())
	s.log.Info("stream subscriber started", zap.String("topic", topic))

	s.loops.Add(2)
	go s.heartbeatLoop()
	go s.discoveryLoop()
	go s.leaseLoop()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.stop:
		}
	}()
	return s.out, nil
}

// Close stops reading, waits (up to ShutdownTimeout) for in-flight messages to be acked or
// nacked, then cancels the contexts of the handlers still running and waits until they
// have returned, writes final checkpoints, releases the leases so that another process
// takes the shards over at once, and closes the output channel. Heartbeats go on until
// then, so no peer takes a shard while one of our handlers runs; a handler that ignores
// its context therefore holds Close (and its shard) until it returns. Nacked in-flight
// records are not retried: the next holder of the shard redelivers them.
func (s *Subscriber) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown() })
	return s.closeErr
}

func (s *Subscriber) shutdown() error {
	s.mu.Lock()
	s.closed = true
	subscribed := s.subscribed
	msgCancel := s.msgCancel
	s.mu.Unlock()
	close(s.stop)
	s.loopCancel()
	if !subscribed {
		msgCancel()
		close(s.out)
		return nil
	}
	s.loops.Wait()

	deadline := time.Now().Add(s.cfg.ShutdownTimeout)
	s.mu.Lock()
	for _, w := range s.workers {
		w.stopGracefully(deadline)
	}
	s.mu.Unlock()
	s.workersWG.Wait()
	close(s.stopBeat)
	<-s.beatDone

	// Deleting our heartbeat row last lets peers take at once any lease whose release
	// failed above.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err := s.leases.deleteOwner(ctx, s.cfg.Owner, -1)
	msgCancel()
	close(s.out)

	s.mu.Lock()
	errs := append(s.closeErrs, err)
	s.mu.Unlock()
	s.log.Info("stream subscriber stopped")
	return errors.Join(errs...)
}

// Ready reports whether the Subscriber is running and its heartbeats get through; a
// process that cannot heartbeat is about to lose its leases. For /readyz.
func (s *Subscriber) Ready() error {
	s.mu.Lock()
	subscribed, closed := s.subscribed, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return errors.New("stream subscriber closed")
	case !subscribed:
		return errors.New("stream subscriber not started")
	}
	if age := time.Since(time.Unix(0, s.lastBeat.Load())); age > s.cfg.LeaseDuration {
		return fmt.Errorf("stream subscriber: no heartbeat for %s", age.Round(time.Millisecond))
	}
	return nil
}

func (s *Subscriber) heartbeatLoop() {
	defer close(s.beatDone)
	t := time.NewTicker(s.cfg.leaseTick())
	defer t.Stop()
	for {
		select {
		case <-s.stopBeat:
			return
		case <-t.C:
		}
		// A slow beat still counts if it lands well within the lease; ticks missed
		// meanwhile are dropped by the ticker.
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.LeaseDuration/2)
		err := s.leases.heartbeat(ctx, s.cfg.Owner)
		cancel()
		if err != nil {
			if !s.isClosed() {
				s.log.Warn("heartbeat failed", zap.Error(err))
			}
			continue
		}
		s.lastBeat.Store(time.Now().UnixNano())
	}
}

func (s *Subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// fenced reports whether our heartbeats have failed for so long that peers may already
// take our leases: then we stop our shards rather than race the new holders.
func (s *Subscriber) fenced() bool {
	return time.Since(time.Unix(0, s.lastBeat.Load())) > s.cfg.LeaseDuration-s.cfg.leaseTick()
}

func (s *Subscriber) startWorkerLocked(st *streamState, r leaseRow) {
	w := newShardWorker(s, st, r)
	s.workers[r.key()] = w
	s.workersWG.Add(1)
	s.m.leasesHeld.WithLabelValues(s.cfg.Consumer).Inc()
	go w.run()
}

// workerExited is called by a worker as its last act.
func (s *Subscriber) workerExited(w *shardWorker, finished bool, err error) {
	s.mu.Lock()
	if s.workers[w.key] == w {
		delete(s.workers, w.key)
	}
	if err != nil && s.closed { // earlier failures were logged; Close reports its own
		s.closeErrs = append(s.closeErrs, err)
	}
	s.mu.Unlock()
	s.m.leasesHeld.WithLabelValues(s.cfg.Consumer).Dec()
	if finished {
		// The children may be eligible now: list the stream (new children) and take them.
		s.mu.Lock()
		if r, ok := s.rows[w.key]; ok {
			r.Owner, r.Token, r.HandoverTo, r.Checkpoint = "", "", "", shardEnd
			s.rows[w.key] = r
		}
		s.mu.Unlock()
		s.requestSync(w.stream.StreamARN)
		s.wantRound(false)
	} else {
		// A shard we let go (fenced, handed over, lost) may be ours to take again, or a
		// peer's now: read the leases.
		s.wantRound(true)
	}
	s.workersWG.Done()
}

// backoff is the pause before retry number attempt (from 1): doubling from base up to
// max, with jitter so that processes retrying the same failure spread out.
func backoff(base, max time.Duration, attempt int) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx ends; it reports whether the wait was complete.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
