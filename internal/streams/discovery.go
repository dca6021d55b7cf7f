package streams

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"
)

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
