// Package bounded keeps one call of resumable work (an erasure's first pass, the member
// index's backfill) within its time, docs/erasure.md "The bound": the work stops at its
// next safe point (between segments, batches and phases) once the call's soft deadline has
// passed, and keeps its position for the next call.
package bounded

import (
	"context"
	"time"
)

type softDeadlineKey struct{}

// Limits are the time of one call: at most Budget, and Margin kept before its context's
// deadline (a Lambda invocation's) for the step under way and the answer.
type Limits struct {
	Budget, Margin time.Duration
}

// Context is ctx with the soft deadline of one call: Budget from now, Margin before ctx's
// deadline, or the soft deadline of a call it runs within, whichever comes first.
func (l Limits) Context(ctx context.Context) context.Context {
	at := time.Now().Add(l.Budget)
	if d, ok := ctx.Deadline(); ok && d.Add(-l.Margin).Before(at) {
		at = d.Add(-l.Margin)
	}
	if outer := Deadline(ctx); !outer.IsZero() && outer.Before(at) {
		at = outer
	}
	return WithDeadline(ctx, at)
}

// WithDeadline is ctx with the soft deadline at; the zero time lifts it (work that must
// finish once begun).
func WithDeadline(ctx context.Context, at time.Time) context.Context {
	return context.WithValue(ctx, softDeadlineKey{}, at)
}

// Deadline is ctx's soft deadline; zero when it has none.
func Deadline(ctx context.Context) time.Time {
	at, _ := ctx.Value(softDeadlineKey{}).(time.Time)
	return at
}

// Passed reports whether ctx's soft deadline has passed.
func Passed(ctx context.Context) bool {
	at := Deadline(ctx)
	return !at.IsZero() && time.Now().After(at)
}
