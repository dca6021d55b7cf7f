package webhooks

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/changefeed"
)

// A page of changes goes out side by side: up to Options.InFlight POSTs at a time to one
// endpoint, but never two of one aggregate. An aggregate's changes of the page form a
// chain, POSTed one after another in feed order, a change only once the one before it was
// answered 2xx; chains start in the order of their first change. A failed attempt stops
// every chain before its next POST. The endpoint's position then moves to the end of the
// longest run of delivered changes from the page's start, and the delivered changes after
// it are kept with it (`ahead`): the next run, of this process or another, passes over
// them, so no aggregate's change is sent again after its later one, and the failed change
// is the next sent of its aggregate. Only a crash between a 2xx and the page's write sends
// the page's delivered changes again (at least once; each aggregate's in order again).

// pageState is what a page's chains report.
type pageState struct {
	mu      sync.Mutex
	stopped bool    // an attempt failed, or the lease was lost: no POST starts
	done    []bool  // delivered, passed over, or delivered before (ahead)
	sent    []bool  // delivered by this run
	failed  []int   // the page's indexes whose attempt failed
	status  []int   // the answers of failed attempts
	errs    []error // their errors
	records []Delivery
}

func (s *pageState) halted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// deliverPage delivers one page of the endpoint's changes and writes where the endpoint
// stands: nil to read on, errFailed after a failed attempt, errLost or ctx's error.
func (d *Deliverer) deliverPage(ctx context.Context, e Endpoint, secrets []string, page changefeed.Page) (Endpoint, error) {
	n := len(page.Events)
	st := &pageState{done: make([]bool, n), sent: make([]bool, n), status: make([]int, n), errs: make([]error, n)}
	heads := make([]eventHeader, n)
	var chains [][]int
	chainOf := map[string]int{}
	for i, raw := range page.Events {
		heads[i] = headerOf(raw)
		if !wanted(e.Types, heads[i].Type) || slices.Contains(e.ahead, page.At[i].After) {
			st.done[i] = true
			continue
		}
		c, ok := chainOf[heads[i].Data.ID]
		if !ok {
			c = len(chains)
			chainOf[heads[i].Data.ID] = c
			chains = append(chains, nil)
		}
		chains[c] = append(chains[c], i)
	}

	// The change after the position is the one earlier attempts failed at (if any): its
	// attempt is counted on from theirs; every other change's is its first.
	first := slices.Index(st.done, false)
	attemptAt := func(i int) int {
		if i == first {
			return e.Attempt + 1
		}
		return 1
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The lease is renewed while the page is under way (an attempt may take Timeout).
	renewDone, renewErr := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(renewDone)
		t := time.NewTicker(max(d.o.Lease/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
				if err := d.store.renew(pctx, e, d.owner, d.o.Lease); err != nil && pctx.Err() == nil {
					st.mu.Lock()
					st.stopped = true
					st.mu.Unlock()
					renewErr <- err
					cancel()
					return
				}
			}
		}
	}()

	sem := make(chan struct{}, d.o.InFlight)
	var wg sync.WaitGroup
	for _, c := range chains {
		select {
		case sem <- struct{}{}:
		case <-pctx.Done():
		}
		if pctx.Err() != nil || st.halted() {
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, i := range c {
				if st.halted() || pctx.Err() != nil {
					return
				}
				status, perr := d.post(pctx, e.URL, secrets, heads[i].ID, page.Events[i])
				if perr != nil && pctx.Err() != nil {
					return // stopping: not the endpoint's failure
				}
				at := d.store.now()
				rec := Delivery{EventID: heads[i].ID, Type: heads[i].Type, Position: page.At[i].After, ResponseStatus: status, At: at}
				st.mu.Lock()
				if perr == nil {
					d.attempts.WithLabelValues("delivered").Inc()
					rec.Status, rec.Attempt = "delivered", attemptAt(i)
					st.done[i], st.sent[i] = true, true
					st.records = append(st.records, rec)
				} else {
					d.attempts.WithLabelValues("failed").Inc()
					st.stopped = true
					st.failed = append(st.failed, i)
					st.status[i], st.errs[i] = status, perr
				}
				st.mu.Unlock()
				if perr != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	cancel()
	<-renewDone
	select {
	case err := <-renewErr:
		return e, err
	default:
	}
	return d.settle(ctx, e, page, st)
}

// settle writes where the endpoint stands after a page: its position at the end of the
// page's delivered start, the delivered changes after it, the page's attempts, and after
// a failed attempt the next one's time (or the endpoint disabled).
func (d *Deliverer) settle(ctx context.Context, e Endpoint, page changefeed.Page, st *pageState) (Endpoint, error) {
	// Writes go on for a few seconds after ctx ends: what the endpoint got is kept, so
	// that the next holder does not send it again.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer wcancel()
	k := slices.Index(st.done, false)
	to, delivered := page.Next, slices.Contains(st.sent, true)
	var ahead []int64
	if k >= 0 {
		to = e.Position
		if k > 0 {
			to = page.At[k-1]
		}
		for i := k + 1; i < len(st.done); i++ {
			if st.done[i] && (st.sent[i] || slices.Contains(e.ahead, page.At[i].After)) {
				ahead = append(ahead, page.At[i].After)
			}
		}
	}
	attempt, since := e.Attempt, e.FailingSince
	if to.After > e.Position.After {
		attempt, since = 0, time.Time{} // the change failing now is another
	}
	records := st.records
	now := d.store.now()
	var next time.Time
	lastErr, lastStatus := "", 0
	if len(st.failed) > 0 {
		// The endpoint's failure is its earliest change's in the feed.
		f := slices.Min(st.failed)
		attempt++
		if since.IsZero() {
			since = now
		}
		next, lastErr, lastStatus = now.Add(d.o.Backoff(attempt)), st.errs[f].Error(), st.status[f]
		for _, i := range st.failed {
			h := headerOf(page.Events[i])
			n := 1
			if i == f {
				n = attempt
			}
			rec := Delivery{EventID: h.ID, Type: h.Type, Position: page.At[i].After, Attempt: n, Status: "failed",
				Error: st.errs[i].Error(), ResponseStatus: st.status[i], At: now}
			if now.Sub(since) < d.o.GiveUp {
				rec.NextAttempt = next
			}
			records = append(records, rec)
		}
	}
	// The page's records go before its position: a process killed between the two sends
	// the page again (at least once), rather than moving past changes whose deliveries
	// are then never listed.
	if err := d.store.recordAll(wctx, e, records); err != nil {
		d.log.Warn("webhooks: could not record deliveries", zap.String("webhook", e.ID), zap.Error(err))
	}
	var err error
	if to.After > e.Position.After || !slices.Equal(ahead, e.ahead) {
		e, err = d.store.advance(wctx, e, d.owner, to, ahead, delivered, d.o.Lease)
	}
	if err != nil {
		return e, err
	}
	if len(st.failed) == 0 {
		return e, ctx.Err()
	}
	e.Attempt, e.FailingSince, e.NextAttempt, e.LastError, e.LastStatus = attempt, since, next, lastErr, lastStatus
	if now.Sub(since) >= d.o.GiveUp {
		return e, d.disable(ctx, e)
	}
	if err := d.store.fail(ctx, e, d.owner, false); err != nil {
		return e, err
	}
	return e, errFailed
}
