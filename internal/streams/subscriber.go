package streams

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
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
	dlq    *DeadLetters

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
		leases:            &leaseStore{db: cfg.DB, table: cfg.LeaseTable, consumer: cfg.Consumer},
		dlq:               NewDeadLetters(cfg.DB, cfg.DeadLetterTable, cfg.Consumer),
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

// DeadLetters is the consumer's dead-letter store.
func (s *Subscriber) DeadLetters() *DeadLetters { return s.dlq }

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

// discoveryLoop polls the Source and lists shards. Streams just found and streams whose
// shard just ended are listed first; the periodic sweep of every stream goes one stream
// at a time between them, so a new tenant never waits behind a sweep. Every
// DescribeStream and ListStreams call waits for the process's share of the account limit.
func (s *Subscriber) discoveryLoop() {
	defer s.loops.Done()
	ctx := s.loopCtx
	select {
	case <-s.firstRound:
	case <-s.stop:
		return
	}
	s.pollSource(ctx)
	src := time.NewTicker(s.cfg.SourceInterval)
	defer src.Stop()
	var sweep []string
	nextSweep := time.Now().Add(s.cfg.ShardSyncInterval)
	sweepTimer := time.NewTimer(s.cfg.ShardSyncInterval)
	defer sweepTimer.Stop()
	// Streams are listed several at a time, so the lease-table writes of one do not hold
	// up the next; the DescribeStream limiter paces the calls themselves.
	var running sync.WaitGroup
	defer running.Wait()
	slots := make(chan struct{}, syncConcurrency)
	async := func(fn func()) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		running.Add(1)
		go func() {
			defer running.Done()
			defer func() { <-slots }()
			fn()
		}()
	}
	for ctx.Err() == nil {
		switch arn, table, ok := s.nextUrgent(); {
		case ok && table != "":
			async(func() { s.resolveStream(ctx, table) })
		case ok:
			async(func() { s.syncStream(ctx, arn) })
		case len(sweep) > 0:
			arn := sweep[0]
			sweep = sweep[1:]
			async(func() { s.syncStream(ctx, arn) })
		}
		if len(sweep) == 0 && !time.Now().Before(nextSweep) {
			sweep = s.streamsToSync()
			nextSweep = time.Now().Add(s.cfg.ShardSyncInterval)
			sweepTimer.Reset(s.cfg.ShardSyncInterval)
		}
		if len(sweep) > 0 || s.hasUrgent() {
			// More to do: only look whether the Source is due.
			select {
			case <-src.C:
				s.pollSource(ctx)
			default:
			}
			continue
		}
		select {
		case <-s.stop:
			return
		case <-src.C:
			s.pollSource(ctx)
		case <-s.kick:
		case <-sweepTimer.C:
		}
	}
}

// nextUrgent takes the next urgent stream to list, or a table whose stream to find.
func (s *Subscriber) nextUrgent() (arn, table string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.urgent) > 0 {
		arn = s.urgent[0]
		s.urgent = s.urgent[1:]
		delete(s.urgentSet, arn)
		return arn, "", true
	}
	for t := range s.resolve {
		return "", t, true
	}
	return "", "", false
}

func (s *Subscriber) hasUrgent() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.urgent) > 0 || len(s.resolve) > 0
}

// streamsToSync picks the streams this process lists in a periodic sync: those it reads,
// those nobody alive reads, and those it has never listed. A stream read by a live peer is
// that peer's to list; DescribeStream allows only 10 calls per second per account.
func (s *Subscriber) streamsToSync() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	peer := map[string]bool{}
	for _, r := range s.rows {
		if r.Owner != "" && r.Owner != s.cfg.Owner && s.aliveLocked(r.Owner, now) {
			peer[r.StreamARN] = true
		}
	}
	var arns []string
	for arn, st := range s.streams {
		if st.listed == nil || !peer[arn] || s.hasWorkersLocked(arn) {
			arns = append(arns, arn)
		}
	}
	return arns
}

// aliveLocked reports whether an owner's heartbeat has moved within the lease duration,
// as observed by this process.
func (s *Subscriber) aliveLocked(id string, now time.Time) bool {
	if id == s.cfg.Owner {
		return true
	}
	o, ok := s.seen[id]
	return ok && now.Sub(o.changed) < s.cfg.LeaseDuration
}

// requestSync asks the discovery loop to list a stream's shards before its sweep.
func (s *Subscriber) requestSync(arn string) {
	s.mu.Lock()
	if !s.urgentSet[arn] {
		s.urgentSet[arn] = true
		s.urgent = append(s.urgent, arn)
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *Subscriber) pollSource(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, callTimeout)
	list, err := s.cfg.Source.Streams(sctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("list streams from source failed; keeping the current set", zap.Error(err))
		}
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	desired := map[string]Stream{}
	tables := map[string]bool{}
	for _, st := range list {
		if st.StreamARN == "" {
			tables[st.Table] = true
			arn, ok := s.arnByTable[st.Table]
			if !ok {
				// Found by the discovery loop with ListStreams, within its budget.
				s.resolve[st.Table] = st
				continue
			}
			st.StreamARN = arn
		}
		desired[st.StreamARN] = st
	}
	for t := range s.resolve {
		if !tables[t] {
			delete(s.resolve, t)
		}
	}

	known := map[string]map[string]string{} // stream → shard → parent, from the lease rows
	for _, r := range s.rows {
		if known[r.StreamARN] == nil {
			known[r.StreamARN] = map[string]string{}
		}
		known[r.StreamARN][r.ShardID] = r.Parent
	}
	balance := false
	for arn, st := range desired {
		if cur, ok := s.streams[arn]; ok {
			cur.removed = false
			continue
		}
		// A stream whose shards have lease rows (a restart, or a peer listed it) is read
		// from those rows at once; rows are written parents first, so they are a listing
		// a child can be judged on, and the sweep lists the stream again later. Only a
		// stream nobody has listed yet waits for its DescribeStream, ahead of the sweep.
		s.streams[arn] = &streamState{Stream: st, listed: known[arn]}
		if known[arn] != nil {
			balance = true
		} else if !s.urgentSet[arn] {
			s.urgentSet[arn] = true
			s.urgent = append(s.urgent, arn)
		}
		s.log.Info("following stream", zap.String("stream", arn), zap.String("system", st.System),
			zap.String("tenant", st.Tenant), zap.String("table", st.Table))
	}
	for arn, st := range s.streams {
		if _, ok := desired[arn]; ok {
			continue
		}
		if !st.removed {
			s.log.Info("stream no longer in source; releasing its shards", zap.String("stream", arn),
				zap.String("tenant", st.Tenant))
		}
		st.removed = true
		if !s.hasWorkersLocked(arn) {
			delete(s.streams, arn)
		}
	}
	if balance {
		s.localNeeded = true // mu is held
		select {
		case s.balanceNow <- struct{}{}:
		default:
		}
	}
}

// resolveStream finds the stream of a table the Source named without its ARN, and
// follows it from the next poll on (which is at once: it is listed as urgent).
func (s *Subscriber) resolveStream(ctx context.Context, table string) {
	s.mu.Lock()
	st, ok := s.resolve[table]
	delete(s.resolve, table)
	s.mu.Unlock()
	if !ok {
		return
	}
	arn, err := s.resolveARN(ctx, table)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("find stream of table failed", zap.String("system", st.System),
				zap.String("tenant", st.Tenant), zap.String("table", table), zap.Error(err))
		}
		return
	case arn == "":
		s.log.Debug("table has no stream yet", zap.String("tenant", st.Tenant), zap.String("table", table))
		return
	}
	st.StreamARN = arn
	s.mu.Lock()
	s.arnByTable[table] = arn
	if _, ok := s.streams[arn]; !ok {
		s.streams[arn] = &streamState{Stream: st}
		s.log.Info("following stream", zap.String("stream", arn), zap.String("system", st.System),
			zap.String("tenant", st.Tenant), zap.String("table", st.Table))
	}
	s.mu.Unlock()
	s.requestSync(arn)
}

func (s *Subscriber) hasWorkersLocked(arn string) bool {
	for _, w := range s.workers {
		if w.stream.StreamARN == arn {
			return true
		}
	}
	return false
}

// resolveARN finds the current stream of a table: ListStreams lists a table's disabled
// streams too (for 24 hours), so the newest label wins.
func (s *Subscriber) resolveARN(ctx context.Context, table string) (string, error) {
	var best, bestLabel string
	in := &dynamodbstreams.ListStreamsInput{TableName: aws.String(table)}
	for {
		if !s.limits.list.wait(ctx) {
			return "", ctx.Err()
		}
		s.m.apiCalls.WithLabelValues(s.cfg.Consumer, "ListStreams").Inc()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := s.cfg.Streams.ListStreams(cctx, in)
		cancel()
		if err != nil {
			return "", fmt.Errorf("list streams of %s: %w", table, err)
		}
		for _, st := range out.Streams {
			if label := aws.ToString(st.StreamLabel); best == "" || label > bestLabel {
				best, bestLabel = aws.ToString(st.StreamArn), label
			}
		}
		if out.LastEvaluatedStreamArn == nil {
			return best, nil
		}
		in.ExclusiveStartStreamArn = out.LastEvaluatedStreamArn
	}
}

// syncStream lists a stream's shards, adds lease rows for new ones and removes rows of
// finished shards the stream no longer lists.
func (s *Subscriber) syncStream(ctx context.Context, arn string) {
	s.mu.Lock()
	st, ok := s.streams[arn]
	if !ok || st.removed {
		s.mu.Unlock()
		return
	}
	stream := st.Stream
	first := st.listed == nil
	known := map[string]leaseRow{}
	for _, r := range s.rows {
		if r.StreamARN == arn {
			known[r.ShardID] = r
		}
	}
	s.mu.Unlock()
	log := s.log.With(zap.String("stream", arn), zap.String("tenant", stream.Tenant))

	shards, err := s.describe(ctx, arn)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if isResourceNotFound(err) {
			// The table's stream was replaced or disabled: find its current one next poll.
			s.mu.Lock()
			if s.arnByTable[stream.Table] == arn {
				delete(s.arnByTable, stream.Table)
			}
			s.mu.Unlock()
		}
		log.Warn("describe stream failed", zap.Error(err))
		return
	}
	listed := make(map[string]string, len(shards))
	for _, sh := range shards {
		listed[aws.ToString(sh.ShardId)] = aws.ToString(sh.ParentShardId)
	}
	// Parents first, so a child's row never exists without its listed parent's row.
	created := false
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		if _, ok := known[id]; ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := s.leases.createShard(cctx, stream, id, aws.ToString(sh.ParentShardId))
		cancel()
		if err != nil {
			log.Warn("create lease row failed", zap.String("shard", id), zap.Error(err))
			return // listed stays unknown, so nothing of this stream is judged on half the rows
		}
		// Known at once to the lease loop, which takes it without reading the partition;
		// if the row existed already (a peer wrote it), the condition of acquire sorts it.
		r := leaseRow{StreamARN: arn, ShardID: id, Parent: aws.ToString(sh.ParentShardId),
			System: stream.System, Tenant: stream.Tenant, Table: stream.Table}
		s.mu.Lock()
		if _, ok := s.rows[r.key()]; !ok {
			s.rows[r.key()] = r
		}
		s.mu.Unlock()
		created = true
	}
	defer func() {
		if created || first {
			// A stream just found, or new shards, get a lease round now rather than at the
			// next tick: a projector starting with a backlog began applying 2 s late.
			s.wantRound(false)
		}
	}()
	for id, r := range known {
		if _, ok := listed[id]; !ok && r.finished() {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			if err := s.leases.deleteFinished(cctx, arn, id); err != nil {
				log.Warn("delete finished lease row failed", zap.String("shard", id), zap.Error(err))
			}
			cancel()
		}
	}
	s.mu.Lock()
	st.listed = listed
	s.mu.Unlock()

	if st.loadedBlocked() {
		if err := s.loadBlocked(ctx, st); err != nil && ctx.Err() == nil {
			log.Warn("refresh dead letters failed", zap.Error(err))
		}
	}
}

// describe lists every shard of a stream, parents before children as DescribeStream
// returns them.
func (s *Subscriber) describe(ctx context.Context, arn string) ([]stypes.Shard, error) {
	var shards []stypes.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}
	for {
		if !s.limits.describe.wait(ctx) {
			return nil, ctx.Err()
		}
		s.m.apiCalls.WithLabelValues(s.cfg.Consumer, "DescribeStream").Inc()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := s.cfg.Streams.DescribeStream(cctx, in)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("describe stream %s: %w", arn, err)
		}
		if out.StreamDescription == nil {
			return shards, nil
		}
		shards = append(shards, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			return shards, nil
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
}

func (st *streamState) loadedBlocked() bool {
	st.blockMu.Lock()
	defer st.blockMu.Unlock()
	return st.blockedLoaded
}

// loadBlocked reads which aggregates of the stream's table have dead letters. It only
// adds to what is known: an entry is removed when a record of that aggregate finds no
// dead letter left (after a re-drive), never by a read that may predate a dead letter
// written a moment ago.
func (s *Subscriber) loadBlocked(ctx context.Context, st *streamState) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	blocked, n, err := s.dlq.blockedAggregates(cctx, st.System, st.Tenant, st.Table)
	if err != nil {
		return err
	}
	st.blockMu.Lock()
	defer st.blockMu.Unlock()
	if st.blocked == nil {
		st.blocked = map[string]string{}
	}
	for agg, seq := range blocked {
		if _, ok := st.blocked[agg]; !ok {
			st.blocked[agg] = seq
		}
	}
	st.blockedLoaded = true
	if n > 0 {
		s.m.parked.WithLabelValues(s.cfg.Consumer, st.System, st.Tenant).Set(float64(n))
	} else {
		// No series for a tenant without dead letters.
		s.m.parked.DeleteLabelValues(s.cfg.Consumer, st.System, st.Tenant)
	}
	return nil
}

func (st *streamState) blockedBy(aggregate string) bool {
	st.blockMu.Lock()
	defer st.blockMu.Unlock()
	_, ok := st.blocked[aggregate]
	return ok
}

func (st *streamState) block(aggregate, seq string) {
	st.blockMu.Lock()
	defer st.blockMu.Unlock()
	if st.blocked == nil {
		st.blocked = map[string]string{}
	}
	if _, ok := st.blocked[aggregate]; !ok {
		st.blocked[aggregate] = seq
	}
}

func (st *streamState) unblock(aggregate string) {
	st.blockMu.Lock()
	defer st.blockMu.Unlock()
	delete(st.blocked, aggregate)
}

func (s *Subscriber) leaseLoop() {
	defer s.loops.Done()
	t := time.NewTicker(s.cfg.leaseTick())
	defer t.Stop()
	s.mu.Lock()
	s.fullNeeded = true
	s.mu.Unlock()
	for {
		s.mu.Lock()
		full := s.fullNeeded || time.Since(s.lastFull) >= s.cfg.LeaseScanInterval
		local := s.localNeeded
		s.mu.Unlock()
		switch {
		case full || s.lightRound(s.loopCtx):
			s.balance(s.loopCtx, true)
		case local:
			s.balance(s.loopCtx, false)
		}
		s.firstRoundOnce.Do(func() { close(s.firstRound) })
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.balanceNow:
		}
	}
}

// wantRound asks the lease loop for a round at once: one on the rows it knows (new rows,
// a shard finished), or one that reads the whole partition first.
func (s *Subscriber) wantRound(full bool) {
	s.mu.Lock()
	if full {
		s.fullNeeded = true
	} else {
		s.localNeeded = true
	}
	s.mu.Unlock()
	select {
	case s.balanceNow <- struct{}{}:
	default:
	}
}

// lightRound reads only the heartbeat rows: it keeps liveness current, fences us when our
// heartbeats fail, and reports whether the whole partition must be read now (a process
// joined, left or died, or a peer asked us for a shard).
func (s *Subscriber) lightRound(ctx context.Context) bool {
	lctx, cancel := context.WithTimeout(ctx, callTimeout)
	owners, err := s.leases.loadOwners(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("read lease owners failed", zap.Error(err))
		}
		return false
	}
	now := time.Now()
	fenced := s.fenced()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	_, changed := s.observeOwnersLocked(owners, now)
	if fenced {
		s.fullNeeded = true // to take shards again once heartbeats get through
		for _, w := range s.workers {
			if !w.isStopping() {
				w.log.Warn("heartbeats are failing; stopping the shard and cancelling its handlers before peers take it over")
			}
			w.stopGracefully(now)
		}
	}
	return changed || len(s.handoverRequested) > 0
}

// observeOwnersLocked notes the heartbeats read, and returns which owners are alive and
// whether that set, or the handovers asked of us, changed since the last look.
func (s *Subscriber) observeOwnersLocked(owners []ownerRow, now time.Time) (map[string]bool, bool) {
	me := s.cfg.Owner
	present := map[string]bool{}
	changed := false
	for _, o := range owners {
		present[o.ID] = true
		if prev, ok := s.seen[o.ID]; !ok || prev.heartbeat != o.Heartbeat {
			s.seen[o.ID] = ownerSeen{heartbeat: o.Heartbeat, changed: now}
		}
		if o.ID == me && o.Asks != s.myAsks {
			s.myAsks, changed = o.Asks, true
		}
		// A peer that released or finished a shard: there may be one to take.
		if o.ID != me && o.Releases != s.releasesSeen[o.ID] {
			s.releasesSeen[o.ID], changed = o.Releases, true
		}
	}
	for id := range s.seen {
		if !present[id] {
			delete(s.seen, id)
		}
	}
	for id := range s.releasesSeen {
		if !present[id] {
			delete(s.releasesSeen, id)
		}
	}
	alive := map[string]bool{me: true}
	live := 1
	for id := range present {
		if id != me && s.aliveLocked(id, now) {
			alive[id] = true
			live++
		}
	}
	if len(alive) != len(s.lastAlive) {
		changed = true
	}
	for id := range alive {
		if !s.lastAlive[id] {
			changed = true
		}
	}
	s.lastAlive = alive
	s.limits.setProcesses(s.cfg, live)
	return alive, changed
}

// balance is one lease round: read the lease table, let go of what we lost or were asked
// to hand over, then take free and dead shards up to a fair share, and ask the busiest
// peer for one shard if we are two or more below it.
func (s *Subscriber) balance(ctx context.Context, reload bool) {
	var rows []leaseRow
	var owners []ownerRow
	if reload {
		lctx, cancel := context.WithTimeout(ctx, callTimeout)
		var err error
		rows, owners, err = s.leases.load(lctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("read leases failed", zap.Error(err))
			}
			return
		}
	}
	now := time.Now()
	me := s.cfg.Owner
	fenced := s.fenced()

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.localNeeded = false
	var aliveSet map[string]bool
	if reload {
		s.rows = make(map[string]leaseRow, len(rows))
		for _, r := range rows {
			s.rows[r.key()] = r
		}
		s.lastFull, s.fullNeeded = now, false
		// A snapshot, as alive is also used after the lock is let go.
		aliveSet, _ = s.observeOwnersLocked(owners, now)
	} else {
		// Between full reads the rows we know are ours to act on: every write below is
		// conditional on the row as we know it.
		rows = make([]leaseRow, 0, len(s.rows))
		for _, r := range s.rows {
			rows = append(rows, r)
		}
		aliveSet = maps.Clone(s.lastAlive)
		aliveSet[me] = true
	}
	byStream := map[string]map[string]leaseRow{}
	for _, r := range rows {
		if byStream[r.StreamARN] == nil {
			byStream[r.StreamARN] = map[string]leaseRow{}
		}
		byStream[r.StreamARN][r.ShardID] = r
	}
	alive := func(id string) bool { return aliveSet[id] }

	// Let go of what is no longer ours to hold.
	for key, w := range s.workers {
		r, ok := s.rows[key]
		switch {
		case !ok || r.Owner != me || r.Token != w.token:
			// A worker that is stopping may just have released or finished the lease
			// itself; only a running one has lost it.
			if !w.isStopping() {
				w.log.Warn("lease taken over by another process; stopping the shard without writing",
					zap.String("new_owner", r.Owner))
			}
			w.abandonNow()
		case fenced:
			if !w.isStopping() {
				w.log.Warn("heartbeats are failing; stopping the shard and cancelling its handlers before peers take it over")
			}
			// Peers may take the lease within a tick: no grace for in-flight handlers.
			w.stopGracefully(now)
		case r.HandoverTo != "" && r.HandoverTo != me:
			if !w.isStopping() {
				w.log.Info("handing shard over", zap.String("to", r.HandoverTo))
			}
			w.stopGracefully(now.Add(s.cfg.ShutdownTimeout))
		case s.streams[w.stream.StreamARN] == nil || s.streams[w.stream.StreamARN].removed:
			w.stopGracefully(now.Add(s.cfg.ShutdownTimeout))
		}
	}

	for key, at := range s.handoverRequested {
		if r, ok := s.rows[key]; !ok || r.Owner == me || now.Sub(at) > 2*s.cfg.LeaseDuration {
			delete(s.handoverRequested, key)
		}
	}
	view := leaseView{me: me, byStream: byStream, listed: map[string]map[string]string{}, alive: aliveSet,
		running: make(map[string]bool, len(s.workers)), held: len(s.handoverRequested)}
	for arn, st := range s.streams {
		if !st.removed && st.listed != nil {
			view.listed[arn] = st.listed
		}
	}
	for key, w := range s.workers {
		view.running[key] = true
		if !w.isStopping() {
			view.held++
		}
	}
	plan := planLeases(view)
	eligible, counts, fair, held := plan.eligible, plan.counts, plan.fair, view.held
	s.mu.Unlock()

	if fenced {
		s.mu.Lock()
		s.fullNeeded = true
		s.mu.Unlock()
		return
	}
	free, dead := plan.free, plan.dead // shuffled in place: plan.want takes them in this order
	rand.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	rand.Shuffle(len(dead), func(i, j int) { dead[i], dead[j] = dead[j], dead[i] })
	// Take up to the fair share, several at a time: a process starting among thousands
	// of streams would otherwise take them one write latency after the other.
	want := plan.want(held)
	var got, missed atomic.Int64
	var g errgroup.Group
	g.SetLimit(acquireConcurrency)
	for _, r := range want {
		g.Go(func() error {
			if s.acquire(ctx, r) {
				got.Add(1)
			} else {
				missed.Add(1)
			}
			return nil
		})
	}
	_ = g.Wait()
	held += int(got.Load())
	if missed.Load() > 0 && held < fair {
		// A peer was quicker, or the rows we acted on were stale: read them all next
		// round and try the others.
		s.mu.Lock()
		s.fullNeeded = true
		s.mu.Unlock()
	}

	if held < fair {
		s.requestOneHandover(ctx, eligible, counts, held, alive)
	}
	if reload {
		s.cleanupDeadOwners(ctx, owners, rows, alive)
	}
}

// parentDone reports whether a shard's parent is out of the way: finished, or neither
// listed nor known (trimmed long ago, or never seen because this consumer started later).
func parentDone(r leaseRow, rows map[string]leaseRow, listed map[string]string) bool {
	if r.Parent == "" {
		return true
	}
	if p, ok := rows[r.Parent]; ok {
		return p.finished()
	}
	_, isListed := listed[r.Parent]
	return !isListed
}

// acquire takes one lease and starts its worker.
func (s *Subscriber) acquire(ctx context.Context, r leaseRow) bool {
	token := uuid.NewString()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	got, err := s.leases.acquire(cctx, r, s.cfg.Owner, token)
	cancel()
	log := s.log.With(zap.String("stream", r.StreamARN), zap.String("shard", r.ShardID), zap.String("tenant", r.Tenant))
	if err != nil {
		if !errors.Is(err, errLeaseLost) && ctx.Err() == nil {
			log.Warn("acquire lease failed", zap.Error(err))
		}
		return false
	}
	s.mu.Lock()
	st := s.streams[r.StreamARN]
	if !s.closed && st != nil && !st.removed {
		s.rows[got.key()] = got
		s.startWorkerLocked(st, got)
		s.mu.Unlock()
		if r.Owner != "" && r.Owner != s.cfg.Owner {
			log.Info("took over lease of a silent process", zap.String("previous_owner", r.Owner))
		}
		return true
	}
	s.mu.Unlock()
	// Stopped meanwhile: give it straight back rather than leave it to expire.
	cctx, cancel = context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := s.leases.release(cctx, got.StreamARN, got.ShardID, s.cfg.Owner, token, ""); err != nil {
		log.Warn("giving back a lease taken while stopping failed", zap.Error(err))
	}
	return false
}

// requestOneHandover asks the busiest live peer, if it holds at least two shards more
// than we do, to hand one over; one request per round keeps balancing from thrashing.
func (s *Subscriber) requestOneHandover(ctx context.Context, eligible []leaseRow, counts map[string]int, held int, alive func(string) bool) {
	var busiest string
	for id, n := range counts {
		if n >= held+2 && (busiest == "" || n > counts[busiest]) {
			busiest = id
		}
	}
	if busiest == "" {
		return
	}
	for _, r := range eligible {
		if r.Owner != busiest || r.HandoverTo != "" || !alive(r.Owner) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := s.leases.requestHandover(cctx, r, s.cfg.Owner)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.handoverRequested[r.key()] = time.Now()
			s.mu.Unlock()
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			if err := s.leases.askOwner(cctx, r.Owner); err != nil {
				s.log.Warn("telling the holder of a handover failed; it sees the request at its next full read", zap.Error(err))
			}
			cancel()
			s.log.Info("asked for a shard to balance load", zap.String("stream", r.StreamARN),
				zap.String("shard", r.ShardID), zap.String("from", busiest))
		}
		return
	}
}

// cleanupDeadOwners deletes heartbeat rows of owners that stopped beating and hold
// nothing, so the table does not collect a row per process ever started.
func (s *Subscriber) cleanupDeadOwners(ctx context.Context, owners []ownerRow, rows []leaseRow, alive func(string) bool) {
	holding := map[string]bool{}
	for _, r := range rows {
		if r.Owner != "" {
			holding[r.Owner] = true
		}
	}
	for _, o := range owners {
		if alive(o.ID) || holding[o.ID] {
			continue
		}
		s.mu.Lock()
		seen, ok := s.seen[o.ID]
		s.mu.Unlock()
		if !ok || seen.heartbeat != o.Heartbeat {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		if err := s.leases.deleteOwner(cctx, o.ID, o.Heartbeat); err != nil && ctx.Err() == nil {
			s.log.Warn("delete heartbeat row of dead process failed", zap.String("dead_owner", o.ID), zap.Error(err))
		}
		cancel()
	}
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
