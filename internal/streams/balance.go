package streams

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"slices"
	"strings"
)

// leaseView is what a balance round decides on: a snapshot taken under the subscriber's
// lock, so that the decision itself is a pure function (planLeases) of it.
type leaseView struct {
	me string
	// byStream is every known lease row, by stream ARN and shard id.
	byStream map[string]map[string]leaseRow
	// listed is, for each followed stream listed at least once, its last DescribeStream
	// answer (shard → parent).
	listed map[string]map[string]string
	// alive is the set of live owners, this process included.
	alive map[string]bool
	// running holds the lease keys this process has a worker for (stopping or not).
	running map[string]bool
	// held counts the leases this process holds or is being handed: running workers not
	// stopping, plus handovers it asked for.
	held int
}

// leasePlan is a balance round's decision.
type leasePlan struct {
	// eligible are the shards that may be read now: unfinished, of a followed stream, with
	// the parent finished (or gone from both the stream and the lease table).
	eligible []leaseRow
	// counts is how many eligible leases each live peer holds.
	counts map[string]int
	// fair is this process's fair share of the eligible leases.
	fair int
	// take are the leases to acquire, at most fair-held of them: first those the lease
	// table says are ours but that have no worker (our acquire's answer was lost), then
	// free ones, then those of dead owners. Free and dead ones are in key order; the
	// caller shuffles them so that peers starting together do not race for the same.
	mine, free, dead []leaseRow
}

// planLeases decides a balance round from a snapshot.
func planLeases(v leaseView) leasePlan {
	var p leasePlan
	for arn, listed := range v.listed {
		for _, r := range v.byStream[arn] {
			if r.finished() || !parentDone(r, v.byStream[arn], listed) {
				continue
			}
			p.eligible = append(p.eligible, r)
		}
	}
	slices.SortFunc(p.eligible, func(a, b leaseRow) int { return strings.Compare(a.key(), b.key()) })
	p.counts = map[string]int{}
	for _, r := range p.eligible {
		if r.Owner != "" && r.Owner != v.me && v.alive[r.Owner] {
			p.counts[r.Owner]++
		}
	}
	liveOwners := max(1, len(v.alive))
	p.fair = (len(p.eligible) + liveOwners - 1) / liveOwners
	for _, r := range p.eligible {
		if v.running[r.key()] {
			continue
		}
		switch {
		case r.Owner == v.me:
			p.mine = append(p.mine, r)
		case r.Owner == "":
			p.free = append(p.free, r)
		case !v.alive[r.Owner]:
			p.dead = append(p.dead, r)
		}
	}
	return p
}

// want is the leases to acquire, given the free and dead ones in the order to try them.
func (p leasePlan) want(held int) []leaseRow {
	want := slices.Concat(p.mine, p.free, p.dead)
	return want[:min(len(want), max(0, p.fair-held))]
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
