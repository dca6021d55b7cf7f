package streams

import (
	"context"
)

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
	blocked, n, err := s.dlq.BlockedIn(cctx, st.System, st.Tenant, st.Table)
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
