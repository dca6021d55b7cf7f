package commands

import (
	"context"
	"errors"
	"sync"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// A crowd of writers to one aggregate (an identity provider pushing joins to "Everyone",
// an import, a bulk action) would otherwise land quadratically: every write that wins the
// aggregate's next version sends each loser back to read the aggregate again and race the
// others once more. retryInTurn lets a command race once; once it lost, it waits for its
// turn among this process's commands on the same aggregate, so that the losers land one
// after another. The version condition stays what keeps the aggregate right: turns order
// the commands of one process only, and a command of another process still races them.

// aggregateTurns are the process's turns, one queue per contended aggregate.
var aggregateTurns turns

type turns struct {
	mu     sync.Mutex
	queues map[string]*turnQueue
}

// turnQueue is one aggregate's turn: a slot that one command holds at a time. A channel's
// blocked senders are woken in the order they came, so waiters go first come, first served.
type turnQueue struct {
	slot  chan struct{}
	users int
}

// take waits for key's turn, or for ctx to end; release gives the turn to the next waiter.
func (t *turns) take(ctx context.Context, key string) (release func(), err error) {
	t.mu.Lock()
	if t.queues == nil {
		t.queues = map[string]*turnQueue{}
	}
	q := t.queues[key]
	if q == nil {
		q = &turnQueue{slot: make(chan struct{}, 1)}
		t.queues[key] = q
	}
	q.users++
	t.mu.Unlock()
	select {
	case q.slot <- struct{}{}:
		return func() { <-q.slot; t.leave(key, q) }, nil
	case <-ctx.Done():
		t.leave(key, q)
		return nil, ctx.Err()
	}
}

func (t *turns) leave(key string, q *turnQueue) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q.users--; q.users == 0 {
		delete(t.queues, key)
	}
}

// retryInTurn is retry for a command on a group that many writers change at once (its
// members): its first attempt runs at once; after a lost race, the rest run in the group's
// turn.
func retryInTurn(ctx context.Context, t Tenant, group string, attempt func() error) error {
	err := attempt()
	if !lostRace(err) {
		return err
	}
	release, err := aggregateTurns.take(ctx, t.System+"/"+t.ID+"/"+string(events.KindGroup)+"#"+identity.GroupKey(group))
	if err != nil {
		return err
	}
	defer release()
	return retry(ctx, attempt)
}

// lostRace reports whether err is a lost race on state the client did not pin, which
// retry runs again.
func lostRace(err error) bool {
	return errors.Is(err, ErrVersionConflict) || errors.Is(err, ErrMembershipConflict)
}
