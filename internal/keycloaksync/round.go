package keycloaksync

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
)

// RoundOptions shape one scheduled invocation of Lambda mode's reconcile round.
type RoundOptions struct {
	// Owner names this invocation in the round's lease (unique per invocation).
	Owner string
	// Interval is SSO_RECONCILE_INTERVAL: a pass over every tenant starts at most once an
	// interval (from the start of the last one); a pass that does not fit in one
	// invocation goes on at the next, whatever the interval.
	Interval time.Duration
	// Concurrency bounds the realms reconciled at once (DefaultReconcileConcurrency).
	Concurrency int
}

// RoundResult is what one invocation did.
type RoundResult struct {
	// Busy: another invocation holds the round; this one did nothing.
	Busy bool
	// NotDue: the last pass ended and the interval since its start has not passed.
	NotDue bool
	// Reconciled and Failed count the tenants this invocation reconciled; PassEnded says
	// it reached the end of the tenant list.
	Reconciled, Failed int
	PassEnded          bool
	Cursor             string
}

// Stops within an invocation: no tenant is started in the last tenth of the time left
// (at most roundStopStarting), and the reconciles still running are cut a twentieth
// before the deadline (at most roundCut), so that the cursor is saved before it.
const (
	roundStopStarting = time.Minute
	roundCut          = 5 * time.Second
)

// Round is one scheduled invocation of the reconcile round (Lambda mode, where nothing
// runs between invocations): a pass visits every tenant with Keycloak settings in key
// order, a few at a time, starting after the cursor the last invocation saved and
// stopping before ctx's deadline, so that at any number of tenants every one is reached
// within a pass, however many invocations it takes. A lease in the status table keeps
// invocations — a schedule firing while one still runs, Lambda's retries — from working
// on the round side by side. A tenant whose reconcile the deadline cuts is done first by the
// next invocation; cut again, it counts as failed for this pass, which goes on past it. Needs
// ReconcilerConfig.Statuses.
func (r *Reconciler) Round(ctx context.Context, opts RoundOptions) (RoundResult, error) {
	st := r.cfg.Statuses
	if st == nil {
		return RoundResult{}, errors.New("reconcile round: no status table")
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultReconcileConcurrency
	}
	now := time.Now()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = now.Add(15 * time.Minute)
	}
	left := deadline.Sub(now)
	stopStarting := deadline.Add(-min(left/10, roundStopStarting))
	cut := deadline.Add(-min(left/20, roundCut))

	state, ok, err := st.ClaimRound(ctx, opts.Owner, now, deadline.Add(roundCut))
	if err != nil || !ok {
		return RoundResult{Busy: !ok}, err
	}
	release := func(state dynamo.ReconcileRound) error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return st.SaveRound(sctx, opts.Owner, state, true)
	}
	if state.Cursor == "" && len(state.Retry) == 0 {
		started, _ := dynamo.ParseTime(state.PassStartedAt)
		// Nine tenths: a schedule of the interval's period that fires a little early must
		// not skip a pass.
		if state.PassStartedAt != "" && now.Before(started.Add(opts.Interval*9/10)) {
			return RoundResult{NotDue: true}, release(state)
		}
		state.PassStartedAt = dynamo.FormatTime(now)
	}

	rows, err := r.Tenants(ctx, "", "")
	if err != nil {
		return RoundResult{}, errors.Join(err, release(state))
	}
	key := func(t dynamo.Tenant) string { return t.SystemID + "/" + t.TenantID }
	sort.Slice(rows, func(i, j int) bool { return key(rows[i]) < key(rows[j]) })
	start := sort.Search(len(rows), func(i int) bool { return key(rows[i]) > state.Cursor })

	// The tenants the last invocation's deadline cut come first, once; then the pass goes
	// on after the cursor.
	type job struct {
		row   dynamo.Tenant
		retry bool
	}
	var jobs []job
	byKey := make(map[string]dynamo.Tenant, len(rows))
	for _, row := range rows {
		byKey[key(row)] = row
	}
	for _, k := range state.Retry {
		if row, ok := byKey[k]; ok {
			jobs = append(jobs, job{row, true})
		}
	}
	retries := len(jobs)
	for _, row := range rows[start:] {
		jobs = append(jobs, job{row, false})
	}

	cutCtx, cancel := context.WithDeadline(ctx, cut)
	defer cancel()
	var (
		res   RoundResult
		retry []string
		mu    sync.Mutex
		wg    sync.WaitGroup
	)
	slots := make(chan struct{}, opts.Concurrency)
	next := 0
	for ; next < len(jobs); next++ {
		j := jobs[next]
		if _, parked := r.cfg.Health.Parked(j.row.SystemID, j.row.TenantID); parked {
			continue // its realm fails: the next pass comes back to it
		}
		select {
		case slots <- struct{}{}:
		case <-cutCtx.Done():
		}
		if cutCtx.Err() != nil || time.Now().After(stopStarting) {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			_, err := r.Tenant(cutCtx, j.row, Options{})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil || errors.Is(err, ErrNoKeycloak):
				res.Reconciled++
			case cutCtx.Err() != nil && !j.retry:
				retry = append(retry, key(j.row)) // cut by this invocation's deadline
			default:
				res.Failed++
				r.cfg.Log.Warn("reconcile failed", zap.String("tenant", key(j.row)), zap.Error(err))
			}
		}()
	}
	wg.Wait()
	for _, j := range jobs[min(next, retries):retries] {
		retry = append(retry, key(j.row)) // not reached: still to do first
	}
	state.Retry = retry
	if main := next - retries; main > 0 {
		state.Cursor = key(rows[start+main-1])
	}
	if next >= len(jobs) && len(retry) == 0 {
		res.PassEnded = true
		state.Cursor, state.PassEndedAt = "", dynamo.FormatTime(time.Now())
		state.Passes++
	}
	res.Cursor = state.Cursor
	r.cfg.Log.Info("reconcile round: invocation done", zap.Int("tenants", len(rows)), zap.Int("from", start), zap.Int("to", start+max(next-retries, 0)),
		zap.Int("reconciled", res.Reconciled), zap.Int("failed", res.Failed), zap.Bool("pass_ended", res.PassEnded))
	if err := release(state); err != nil {
		return res, fmt.Errorf("%w (the next invocation goes over this one's tenants again)", err)
	}
	return res, nil
}
