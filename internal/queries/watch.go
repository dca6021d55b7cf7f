package queries

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
)

// Default caps of X-Min-Version reads waiting at once (SSO_MIN_VERSION_WAITERS and
// SSO_MIN_VERSION_WAITERS_PER_TENANT). At the benchmark's 178 writes/s with a read after
// each, about 40 reads wait at once on average (70 at its p99 lag); the tenant cap leaves
// room for that, and the process cap for a few busy tenants. A watch reads its item at
// most about 42 times in a 5 s wait however many requests share it, so the caps also
// bound what waiting costs in reads.
const (
	DefaultMaxWaiters       = 512
	DefaultMaxTenantWaiters = 128
)

// pollReadTimeout bounds one read of a watch; a waiter gives up at its own deadline anyway.
const pollReadTimeout = 5 * time.Second

// watchKey names a watched view item.
type watchKey struct{ system, tenant, id string }

func (k watchKey) tenantKey() string { return k.system + "/" + k.tenant }

// observation is one read of a watched item: raw is nil when the item is not there.
type observation struct {
	raw     map[string]types.AttributeValue
	version int64
	err     error
}

// waiter is one request waiting for a version; the poller sends on done at most once.
type waiter struct {
	min  int64
	done chan observation
}

// watch is one watched item: its waiters, served by one poller, and the poller's last
// observation (nil before its first read). wake tells the poller to read now: a projector
// said it wrote a version some waiter asks for.
type watch struct {
	waiters map[*waiter]struct{}
	last    *observation
	wake    chan struct{}
}

// watches make X-Min-Version reads shared and bounded: every request waiting on the same
// item subscribes to one watch, whose single poller reads the item (strongly consistent)
// at once and then on the schedule of pollStep/fastPolls/maxPoll, and hands each waiter
// the first observation at or past its version. A request makes no read of its own: one
// that joins a watch whose last observation already reaches its version is answered from
// it (X-Min-Version asks for that version or a later one); any other waits for the
// watch's next read, which starts after it joined. A watch ends with its last waiter. The
// number of waiters is capped per process and per tenant; beyond the caps a read is
// refused at once (503 with Retry-After), before it reads anything or starts a poller.
type watches struct {
	read      func(ctx context.Context, k watchKey) observation
	maxTotal  int
	maxTenant int
	// While every projector feed the process follows is connected (feeds > 0 and
	// connected == feeds), a watch reads when a notice wakes it, and polls only every
	// safetyPoll besides.
	feeds      atomic.Int32
	connected  atomic.Int32
	safetyPoll time.Duration
	// refused counts the reads refused beyond the caps; notices the feeds' notices.
	refused, notices atomic.Int64

	mu        sync.Mutex
	total     int
	perTenant map[string]int
	byKey     map[watchKey]*watch
}

func newWatches(maxTotal, maxTenant int, read func(ctx context.Context, k watchKey) observation) *watches {
	if maxTotal <= 0 {
		maxTotal = DefaultMaxWaiters
	}
	if maxTenant <= 0 {
		maxTenant = DefaultMaxTenantWaiters
	}
	return &watches{read: read, maxTotal: maxTotal, maxTenant: maxTenant, safetyPoll: maxPoll,
		perTenant: map[string]int{}, byKey: map[watchKey]*watch{}}
}

// errTooManyWaiters refuses a wait beyond the caps.
func errTooManyWaiters() error {
	return &apperr.Error{Kind: apperr.KindUnavailable, Code: apperr.CodeUnavailable,
		Message:    "too many reads are waiting for a version; retry later",
		RetryAfter: minVersionRetryAfter}
}

// subscribe admits a waiter for k, starting the watch's poller if it is the first. A
// watch whose last observation already satisfies min answers at once (ready).
func (w *watches) subscribe(k watchKey, min int64) (wt *waiter, ready *observation, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wa, ok := w.byKey[k]
	if ok && wa.last != nil && wa.last.raw != nil && wa.last.version >= min {
		// Answered without waiting or reading: no place is taken, so no cap applies.
		return nil, wa.last, true
	}
	tk := k.tenantKey()
	if w.total >= w.maxTotal || w.perTenant[tk] >= w.maxTenant {
		w.refused.Add(1)
		return nil, nil, false
	}
	w.total++
	w.perTenant[tk]++
	wt = &waiter{min: min, done: make(chan observation, 1)}
	if !ok {
		wa = &watch{waiters: map[*waiter]struct{}{}, wake: make(chan struct{}, 1)}
		w.byKey[k] = wa
		go w.poll(k, wa)
	}
	wa.waiters[wt] = struct{}{}
	return wt, nil, true
}

// leave gives a waiter's place back; it reports whether the waiter was still subscribed
// (false: the poller has already sent it an observation).
func (w *watches) leave(k watchKey, wt *waiter) (subscribed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total--
	tk := k.tenantKey()
	if w.perTenant[tk]--; w.perTenant[tk] <= 0 {
		delete(w.perTenant, tk)
	}
	if wa, ok := w.byKey[k]; ok {
		if _, subscribed = wa.waiters[wt]; subscribed {
			delete(wa.waiters, wt)
		}
	}
	return subscribed
}

// notify wakes the watch of k if a waiter asks for version or less: a projector has
// written that version (progress.Notice). The watch then reads the item; a notice is never
// an answer by itself.
func (w *watches) notify(k watchKey, version int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wa, ok := w.byKey[k]
	if !ok {
		return
	}
	for wt := range wa.waiters {
		if wt.min <= version {
			select {
			case wa.wake <- struct{}{}:
			default: // a wake is already pending
			}
			return
		}
	}
}

// feedsLive reports whether every projector feed followed is connected.
func (w *watches) feedsLive() bool {
	n := w.feeds.Load()
	return n > 0 && w.connected.Load() == n
}

// waiting is how many reads wait now, in all and for one tenant.
func (w *watches) waiting(system, tenant string) (total, ofTenant int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total, w.perTenant[system+"/"+tenant]
}

// wait blocks until the item k reaches version min, the wait is over, or ctx is done.
func (w *watches) wait(ctx context.Context, k watchKey, min int64, wait time.Duration, what string) (observation, error) {
	wt, ready, ok := w.subscribe(k, min)
	if !ok {
		return observation{}, errTooManyWaiters()
	}
	if ready != nil {
		return *ready, nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var timedOut bool
	select {
	case obs := <-wt.done:
		w.leave(k, wt)
		return obs, obs.err
	case <-timer.C:
		timedOut = true
	case <-ctx.Done():
	}
	if !w.leave(k, wt) {
		// The poller answered while the wait ended: take its answer.
		obs := <-wt.done
		return obs, obs.err
	}
	if timedOut {
		return observation{}, &apperr.Error{Kind: apperr.KindUnavailable, Code: apperr.CodeUnavailable,
			Message:    fmt.Sprintf("the %s has not reached version %d yet, retry later", what, min),
			RetryAfter: minVersionRetryAfter}
	}
	return observation{}, apperr.Unavailable(ctx.Err(), minVersionRetryAfter)
}

// poll is a watch's one poller: it reads the item until no waiter is left, at once and
// then backing off as the watch ages, so a watch costs at most about fastPolls +
// wait/maxPoll reads per wait however many requests share it. While the projectors' feeds
// are connected it reads when woken by a notice, and every safetyPoll besides.
func (w *watches) poll(k watchKey, wa *watch) {
	delay := pollStep
	for polls := 0; ; polls++ {
		if polls > 0 {
			pause := delay
			if w.feedsLive() {
				pause = max(delay, w.safetyPoll)
			}
			timer := time.NewTimer(pause)
			select {
			case <-timer.C:
			case <-wa.wake:
				timer.Stop()
			}
			if polls >= fastPolls {
				delay = min(2*delay, maxPoll)
			}
		}
		w.mu.Lock()
		if len(wa.waiters) == 0 {
			delete(w.byKey, k)
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), pollReadTimeout)
		obs := w.read(ctx, k)
		cancel()

		// A fault the next poll may not meet (throttling, a slow or unreachable DynamoDB)
		// is not every waiter's answer: the poller tries again on its schedule, and a
		// waiter it cannot serve in time gets the usual 503 at its deadline.
		if obs.err != nil && apperr.KindOf(obs.err) == apperr.KindUnavailable {
			continue
		}
		w.mu.Lock()
		if obs.err == nil {
			wa.last = &obs
		}
		for wt := range wa.waiters {
			if obs.err != nil || (obs.raw != nil && obs.version >= wt.min) {
				wt.done <- obs
				delete(wa.waiters, wt)
			}
		}
		if len(wa.waiters) == 0 {
			delete(w.byKey, k)
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}
