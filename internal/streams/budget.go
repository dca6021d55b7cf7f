package streams

import (
	"context"
	"sync"
	"time"
)

// AWS limits the Streams API per shard (GetRecords; at most two readers per shard, and a
// rate it does not publish: we budget 5 calls per second, as Kinesis allows) and per
// account (DescribeStream 10/s, ListStreams 5/s). Every consumer of a stream and every
// process of a consumer share them, so each process keeps to its share:
//
//	GetRecords per shard:     ShardReadRate / Consumers              (one process reads a shard)
//	DescribeStream, account:  DescribeStreamRate / Consumers / live processes of the consumer
//	ListStreams, account:     ListStreamsRate / Consumers / live processes of the consumer
//
// The live process count is what the last lease round saw, so the budget follows scaling.

// limiter is a token bucket: rate tokens per second, at most burst saved up. Waiting
// reserves a token (the balance may go negative), so callers queue in arrival order
// without polling.
type limiter struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newLimiter(rate, burst float64) *limiter {
	return &limiter{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

func (l *limiter) refillLocked(now time.Time) {
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
}

// wait takes a token, sleeping until it is there; false when ctx ends first (the token
// is given back).
func (l *limiter) wait(ctx context.Context) bool {
	l.mu.Lock()
	now := time.Now()
	l.refillLocked(now)
	l.tokens--
	var d time.Duration
	if l.tokens < 0 {
		d = time.Duration(-l.tokens / l.rate * float64(time.Second))
	}
	l.mu.Unlock()
	if d == 0 {
		return true
	}
	if sleep(ctx, d) {
		return true
	}
	l.mu.Lock()
	l.tokens++
	l.mu.Unlock()
	return false
}

// setRate changes the rate from now on.
func (l *limiter) setRate(rate float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rate == l.rate {
		return
	}
	l.refillLocked(time.Now())
	l.rate = rate
}

// accountLimits are the process's shares of the account-wide Streams limits.
type accountLimits struct {
	describe *limiter
	list     *limiter
}

func newAccountLimits(c Config) *accountLimits {
	a := &accountLimits{describe: newLimiter(1, 1), list: newLimiter(1, 1)}
	a.setProcesses(c, 1)
	return a
}

// setProcesses splits the account budgets over the consumers and the processes of ours.
func (a *accountLimits) setProcesses(c Config, processes int) {
	share := float64(c.Consumers * max(1, processes))
	a.describe.setRate(c.DescribeStreamRate / share)
	a.list.setRate(c.ListStreamsRate / share)
}

// shardReadInterval is the least time between two GetRecords calls of this process on
// one shard.
func (c Config) shardReadInterval() time.Duration {
	return time.Duration(float64(c.Consumers) / c.ShardReadRate * float64(time.Second))
}

// idlePause is the pause after the n-th empty page in a row (from 1): PollInterval,
// doubling up to IdlePollMax.
func (c Config) idlePause(n int) time.Duration {
	d := c.PollInterval
	for i := 1; i < n && d < c.IdlePollMax; i++ {
		d *= 2
	}
	return min(d, c.IdlePollMax)
}
