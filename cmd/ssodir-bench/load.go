package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// op is one measured operation of worker w; its latency is recorded when it returns nil.
type op func(ctx context.Context, w int) error

// sample is what one measuring window saw.
type sample struct {
	ops       int
	elapsed   time.Duration
	latencies []time.Duration
}

func (s sample) rate() float64 { return float64(s.ops) / s.elapsed.Seconds() }

// closed runs conc workers that call f back to back for d and records every latency. An
// error stops the window and is returned.
func closed(ctx context.Context, conc int, d time.Duration, f op) (sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		lats  []time.Duration
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1024)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t := time.Now()
				if err := f(ctx, w); err != nil {
					mu.Lock()
					if first == nil && ctx.Err() == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					break
				}
				local = append(local, time.Since(t))
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if first != nil {
		return sample{}, first
	}
	if err := ctx.Err(); err != nil {
		return sample{}, err
	}
	return sample{ops: len(lats), elapsed: time.Since(start), latencies: lats}, nil
}

// count runs conc workers over n operations (f gets the operation's index) and records
// every latency.
func count(ctx context.Context, conc, n int, f func(ctx context.Context, i int) error) (sample, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		lats  = make([]time.Duration, 0, n)
		first error
		wg    sync.WaitGroup
	)
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t := time.Now()
				if err := f(ctx, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					cancel()
					return
				}
				d := time.Since(t)
				mu.Lock()
				lats = append(lats, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return sample{}, first
	}
	return sample{ops: len(lats), elapsed: time.Since(start), latencies: lats}, ctx.Err()
}

// open starts f at a fixed rate for d, each call in its own goroutine (an open loop: a slow
// call does not hold back the next), and waits for all of them. f records what it measures
// itself; open returns how many it started and the first error.
func open(ctx context.Context, rate float64, d time.Duration, f func(ctx context.Context, i int) error) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	interval := time.Duration(float64(time.Second) / rate)
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := time.Now()
	n := 0
	for ; ctx.Err() == nil; n++ {
		at := start.Add(time.Duration(n) * interval)
		if at.Sub(start) >= d {
			break
		}
		if wait := time.Until(at); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := f(ctx, i); err != nil && !errors.Is(err, context.Canceled) {
				once.Do(func() { first = err; cancel() })
			}
		}(n)
	}
	wg.Wait()
	return n, first
}

// percentile of sorted durations, in milliseconds (nearest rank).
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return ms(sorted[max(0, min(i, len(sorted)-1))])
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencyFigures are p50, p99 and max of a window's latencies, under the given prefix
// (none for no latencies).
func latencyFigures(prefix string, lats []time.Duration) map[string]float64 {
	if len(lats) == 0 {
		return map[string]float64{}
	}
	s := slices.Clone(lats)
	slices.Sort(s)
	return map[string]float64{prefix + "p50_ms": percentile(s, 50), prefix + "p99_ms": percentile(s, 99), prefix + "max_ms": percentile(s, 100)}
}

// rateFigures are a closed-loop window's rate under name plus its latency figures.
func rateFigures(name string, s sample) map[string]float64 {
	f := latencyFigures("", s.latencies)
	f[name] = s.rate()
	return f
}

// recorder collects latencies from many goroutines.
type recorder struct {
	mu   sync.Mutex
	lats []time.Duration
}

func (r *recorder) add(d time.Duration) {
	r.mu.Lock()
	r.lats = append(r.lats, d)
	r.mu.Unlock()
}

func (r *recorder) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.lats
	r.lats = nil
	return out
}

// retry runs f until it returns nil or the time is up (for waits on asynchronous state).
func waitFor(ctx context.Context, timeout, every time.Duration, what string, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := f()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
