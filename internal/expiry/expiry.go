// Package expiry ends memberships on time (API.md, "Memberships that expire";
// docs/expiry.md): a scheduler reads the due index (dynamo.Expiries) and removes each
// member whose expiry has come by an ordinary command, commands.RemoveMember with
// IfExpiresAt, as the actor "system:expiry". DynamoDB's TTL plays no part.
//
// Exactly once: the removal is conditioned, in its transaction, on the group's version
// and on the membership still expiring at that instant, so a renewal or a removal by hand
// first wins, and of two schedulers racing over one entry (a lease run out mid-sweep) one
// removes the member and the other finds nothing to do. Over an outage: the scheduler
// notes the first hour it has not yet swept empty (the mark) and, when it starts, reads
// every hour from there to now.
package expiry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// Actor is who the log names for a removal the scheduler made.
const Actor = "system:expiry"

// Defaults of a Scheduler.
const (
	// DefaultInterval is how often Run sweeps: well within the minute API.md allows.
	DefaultInterval = 15 * time.Second
	// DefaultLease is how long a sweep's lease keeps other processes out.
	DefaultLease = 2 * time.Minute
	// DefaultLookback is how far back a scheduler that finds no mark begins (a stage's
	// first start): an entry is never older than the stage's first expiring membership.
	DefaultLookback = 7 * 24 * time.Hour
	// DefaultGrace is how long after its end an hour is read again before the mark passes
	// it: a members change's entries are written just after its record, so they may land
	// in an hour a moment after it ended.
	DefaultGrace = time.Hour
)

// Finder finds a live user or group by its immutable id (dynamo.CommandStore.FindByID).
type Finder interface {
	FindByID(ctx context.Context, t commands.Tenant, kind events.AggregateKind, id string) (key string, ok bool, err error)
}

// Scheduler removes the members whose expiry has come.
type Scheduler struct {
	Due    *dynamo.Expiries
	Find   Finder
	Remove commands.RemoveMemberHandler
	// Now is the clock (tests inject one); nil is time.Now.
	Now func() time.Time
	// Owner names this process in the lease; "" is a new uuid per Scheduler.
	Owner                  string
	Lease, Lookback, Grace time.Duration
	Log                    *zap.Logger
}

func (s *Scheduler) now() time.Time {
	if s.Now == nil {
		return time.Now().UTC()
	}
	return s.Now().UTC()
}

func (s *Scheduler) log() *zap.Logger {
	if s.Log == nil {
		return zap.NewNop()
	}
	return s.Log
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Result is what one sweep did.
type Result struct {
	// Leased is false when another process held the lease: the sweep did nothing.
	Leased bool
	// Done counts the entries handled: the member removed, or found to expire no longer
	// then (renewed, removed by hand, or gone with its user or group).
	Done int
	// Failed counts entries left for the next sweep.
	Failed int
}

// Sweep removes every member whose expiry has come, once, if it can take the lease.
func (s *Scheduler) Sweep(ctx context.Context) (Result, error) {
	if s.Owner == "" {
		s.Owner = uuid.NewString()
	}
	now := s.now()
	ok, err := s.Due.Lease(ctx, s.Owner, now, now.Add(orDefault(s.Lease, DefaultLease)))
	if err != nil || !ok {
		return Result{}, err
	}
	res := Result{Leased: true}
	mark, err := s.Due.Mark(ctx)
	if err != nil {
		return res, err
	}
	if mark.IsZero() {
		mark = now.Add(-orDefault(s.Lookback, DefaultLookback)).Truncate(time.Hour)
	}
	grace := orDefault(s.Grace, DefaultGrace)
	next, closing := mark, true
	var firstErr error
	for h := mark; !h.After(now); h = h.Add(time.Hour) {
		due, err := s.Due.Due(ctx, dynamo.ExpiryHour(h), now)
		if err != nil {
			return res, err
		}
		left := false
		for _, d := range due {
			err := s.expire(ctx, d)
			switch {
			case err != nil:
				res.Failed++
				left = true
				if firstErr == nil {
					firstErr = err
				}
				s.log().Warn("expiry left for the next sweep", zap.String("system", d.Tenant.System),
					zap.String("tenant", d.Tenant.ID), zap.String("group_id", d.GroupID), zap.String("user_id", d.UserID), zap.Error(err))
			default:
				res.Done++
			}
		}
		if closing && !left && h.Add(time.Hour+grace).Before(now) {
			next = h.Add(time.Hour)
		} else {
			closing = false
		}
	}
	if next.After(mark) {
		if err := s.Due.SetMark(ctx, next); err != nil {
			return res, err
		}
	}
	return res, firstErr
}

// expire removes d's member if its membership still expires at d.At, then deletes the
// entry.
func (s *Scheduler) expire(ctx context.Context, d dynamo.DueExpiry) error {
	if err := s.removeMember(ctx, d); err != nil {
		return err
	}
	return s.Due.Done(ctx, d)
}

func (s *Scheduler) removeMember(ctx context.Context, d dynamo.DueExpiry) error {
	group, ok, err := s.Find.FindByID(ctx, d.Tenant, events.KindGroup, d.GroupID)
	if gone(err) || (err == nil && !ok) {
		return nil // the group (or the tenant) is gone, and the membership with it
	}
	if err != nil {
		return err
	}
	user, ok, err := s.Find.FindByID(ctx, d.Tenant, events.KindUser, d.UserID)
	if gone(err) || (err == nil && !ok) {
		return nil // deleted or erased: its memberships went with it
	}
	if err != nil {
		return err
	}
	at := d.At
	meta := commands.Meta{Actor: Actor, CommandID: uuid.NewString()}
	_, err = s.Remove.Handle(ctx, d.Tenant, commands.RemoveMember{Group: group, Username: user, IfExpiresAt: &at}, meta)
	if gone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove an expired member: %w", err)
	}
	return nil
}

func gone(err error) bool {
	return err != nil && apperr.KindOf(err) == apperr.KindNotFound
}

// Run sweeps every interval (0: DefaultInterval) until ctx ends, logging what fails.
func (s *Scheduler) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(orDefault(interval, DefaultInterval))
	defer t.Stop()
	for {
		res, err := s.Sweep(ctx)
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log().Warn("expiry sweep", zap.Error(err))
		}
		if res.Done > 0 {
			s.log().Info("expiries handled", zap.Int("done", res.Done))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
