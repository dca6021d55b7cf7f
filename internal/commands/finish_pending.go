package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// StageTablesMessage is the log line, written by each round that finishes pending tenants,
// that carries the stage's table count (field "tables"): a metric filter on it is the
// stage's table-count metric, whose alarm warns before the account's table quota.
const StageTablesMessage = "stage tables"

// FinishPendingOptions bound one round of FinishPending.
type FinishPendingOptions struct {
	// Concurrency is how many tenants are finished side by side (0: 32). DynamoDB makes at
	// most 250 tables with secondary indexes at a time (3 per tenant): more would only be
	// refused and asked again.
	Concurrency int
	// Reserve is the time kept before ctx's deadline: no tenant is begun within it, and
	// each one's finishing ends when it begins (0: 3s). What is not finished stays
	// provisioning for the next round.
	Reserve time.Duration
	// OnFinished, when set, is called for each tenant finished (from several goroutines).
	OnFinished func(TenantRecord)
}

// FinishPendingResult says what a round did.
type FinishPendingResult struct {
	Finished int
	// Left are the tenants not finished in this round (not begun before the reserve, or
	// still waiting for DynamoDB): a later round finishes them.
	Left int
}

// FinishPending finishes the given tenants (those left provisioning or dropping) side by
// side, at most opts.Concurrency at a time, and stops before ctx's deadline (less the
// reserve), so that a Lambda invocation ends on its own instead of being cut off. The error
// joins the tenants that failed for another reason than time or DynamoDB's "later"
// (ErrTablesLater) or the drop that Finish completes.
func (h ProvisionTenantHandler) FinishPending(ctx context.Context, recs []TenantRecord, opts FinishPendingOptions) (FinishPendingResult, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 32
	}
	if opts.Reserve <= 0 {
		opts.Reserve = 3 * time.Second
	}
	work := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		work, cancel = context.WithDeadline(ctx, deadline.Add(-opts.Reserve))
		defer cancel()
	}
	var (
		mu     sync.Mutex
		res    FinishPendingResult
		failed []error
		wg     sync.WaitGroup
	)
	next := make(chan TenantRecord)
	for range min(opts.Concurrency, len(recs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rec := range next {
				done, err := h.Finish(work, rec)
				mu.Lock()
				switch {
				case err == nil:
					res.Finished++
				case rec.Status == TenantDropping || done.Status == TenantDropping,
					errors.Is(err, ErrTablesLater), work.Err() != nil:
					res.Left++
				default:
					res.Left++
					failed = append(failed, fmt.Errorf("%s/%s: %w", rec.System, rec.ID, err))
				}
				mu.Unlock()
				if err == nil && opts.OnFinished != nil {
					opts.OnFinished(done)
				}
			}
		}()
	}
	begun := 0
feed:
	for _, rec := range recs {
		select {
		case next <- rec:
			begun++
		case <-work.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	res.Left += len(recs) - begun
	return res, errors.Join(failed...)
}
