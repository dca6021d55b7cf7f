package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/queries"
)

// countingDB counts the GetItem calls the query API makes on the read model tables (not
// the tenant rows): the reads an X-Min-Version wait costs.
type countingDB struct {
	queries.DB
	viewGets atomic.Int64
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if in.TableName != nil && strings.HasSuffix(*in.TableName, "_users") {
		c.viewGets.Add(1)
	}
	return c.DB.GetItem(ctx, in, opts...)
}

// floodOutcome tallies the answers of a flood of waiting reads.
type floodOutcome struct {
	mu sync.Mutex
	// refused were turned away at once (a cap), notReached waited the whole wait, and
	// overloaded met a DynamoDB Local that the flood had slowed past the SDK's patience:
	// each is a 503 with Retry-After, and nothing else is an acceptable answer.
	refused, notReached, overloaded int
	// cancelled were still waiting when the test ended the flood.
	cancelled     int
	badRetryAfter int
	unexpected    []string
	done          atomic.Int64
}

func (o *floodOutcome) record(ctx context.Context, r response, err error) {
	defer o.done.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil && ctx.Err() != nil {
		o.cancelled++
		return
	}
	if err != nil {
		o.unexpected = append(o.unexpected, err.Error())
		return
	}
	var p struct {
		Code   string `json:"code"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(r.body, &p)
	if r.status != http.StatusServiceUnavailable || p.Code != "unavailable" {
		o.unexpected = append(o.unexpected, fmt.Sprintf("%d %s", r.status, r.body))
		return
	}
	if r.header.Get("Retry-After") == "" {
		o.badRetryAfter++
	}
	switch {
	case strings.Contains(p.Detail, "too many"):
		o.refused++
	case strings.Contains(p.Detail, "has not reached version"):
		o.notReached++
	case p.Detail == "service temporarily unavailable, retry later":
		o.overloaded++
	default:
		o.unexpected = append(o.unexpected, fmt.Sprintf("%d %s", r.status, r.body))
	}
}

// flood sends n reads of paths(i) with X-Min-Version 1000 (a version never reached) at
// once; ending ctx hangs up on those still waiting. finished waits for every answer.
func flood(ctx context.Context, a *app, n int, path func(i int) string) (o *floodOutcome, finished func()) {
	o = &floodOutcome{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := a.do(ctx, bootstrap, path(i), "X-Min-Version", "1000")
			o.record(ctx, r, err)
		}()
	}
	return o, wg.Wait
}

func (o *floodOutcome) answered() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused + o.notReached + o.overloaded + len(o.unexpected)
}

// pollsPerWait is how many reads one watch makes at most in a wait of d (the schedule of
// internal/queries: 20 reads 10 ms apart, then doubling up to 250 ms), plus one for a poll
// in flight when the wait ends.
func pollsPerWait(d time.Duration) int64 {
	polls, delay, elapsed := int64(0), 10*time.Millisecond, time.Duration(0)
	for elapsed < d {
		elapsed += delay
		polls++
		if polls >= 20 {
			delay = min(2*delay, 250*time.Millisecond)
		}
	}
	return polls + 1
}

func TestMinVersionFlood(t *testing.T) {
	const n = 2000
	const waitFor = 2 * time.Second

	t.Run("2,000 reads waiting for one user share one poller", func(t *testing.T) {
		db := &countingDB{}
		a := startApp(t, options{minVersionWait: waitFor,
			wrapDB: func(d queries.DB) queries.DB { db.DB = d; return db },
			// Caps above the flood: this part is about sharing, not refusing.
			env: map[string]string{"SSO_MIN_VERSION_WAITERS": "5000", "SSO_MIN_VERSION_WAITERS_PER_TENANT": "5000"}})
		f := a.tenant(t, tenantA)
		apply(t, f, f.CreateUser(events.User{Username: "jdoe"}))

		start := time.Now()
		o, finished := flood(context.Background(), a, n, func(int) string { return tenantPath(tenantA, "/users/jdoe") })
		finished()
		lasted := time.Since(start)
		if len(o.unexpected) > 0 || o.badRetryAfter > 0 {
			t.Fatalf("%d unexpected answers (%d without Retry-After): %v", len(o.unexpected), o.badRetryAfter, o.unexpected[:min(5, len(o.unexpected))])
		}
		if o.notReached+o.overloaded != n || o.notReached == 0 {
			t.Errorf("%d of %d reads waited and were told the version was not reached (refused %d, overloaded %d)", o.notReached, n, o.refused, o.overloaded)
		}
		// The reads are one poller's, for as long as requests kept coming (a few pollers'
		// if the watch ended in a lull and started again). A poll per request would be n
		// times a watch's reads.
		bound := 3 * pollsPerWait(lasted)
		if got := db.viewGets.Load(); got > bound {
			t.Errorf("%d reads of the view for %d waiting requests, want at most %d (one poller's)", got, n, bound)
		}
		t.Logf("waited %d, overloaded %d, view reads %d in %v", o.notReached, o.overloaded, db.viewGets.Load(), lasted)
	})

	t.Run("2,000 reads waiting for different users are capped, and other reads are answered meanwhile", func(t *testing.T) {
		db := &countingDB{}
		// The waits outlast the test: the flood ends only when the test hangs up, so it is
		// surely in flight while the other reads are made.
		a := startApp(t, options{minVersionWait: time.Minute, wrapDB: func(d queries.DB) queries.DB { db.DB = d; return db }})
		fa := a.tenant(t, tenantA)
		apply(t, fa, fa.CreateUser(events.User{Username: "jdoe"}))
		fb := a.tenant(t, tenantB)
		apply(t, fb, fb.CreateUser(events.User{Username: "bob"}))

		start := time.Now()
		ctx, hangUp := context.WithCancel(context.Background())
		defer hangUp()
		o, finished := flood(ctx, a, n, func(i int) string { return tenantPath(tenantA, fmt.Sprintf("/users/ghost-%d", i)) })
		// Every read beyond tenant A's cap of 128 waiters is answered at once; the 128 wait.
		eventually(t, time.Minute, func() bool { return o.answered() >= n-queries.DefaultMaxTenantWaiters })

		if r := a.get(t, bootstrap, tenantPath(tenantA, "/users/jdoe")); r.status != http.StatusOK {
			t.Errorf("GET a user of the flooded tenant: %d %s", r.status, r.body)
		}
		if r := a.get(t, bootstrap, tenantPath(tenantB, "/users/bob"), "X-Min-Version", "1"); r.status != http.StatusOK {
			t.Errorf("another tenant's read of a version already there: %d %s", r.status, r.body)
		}
		applied := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			applied <- fb.Apply(context.Background(), fb.UpdateUser("bob", func(u *events.User) { u.FirstName = "Bob" }))
		}()
		if r := a.get(t, bootstrap, tenantPath(tenantB, "/users/bob"), "X-Min-Version", "2"); r.status != http.StatusOK {
			t.Errorf("another tenant's wait for a version written 300 ms later: %d %s", r.status, r.body)
		}
		if err := <-applied; err != nil {
			t.Fatal(err)
		}
		if got := o.answered(); got != n-queries.DefaultMaxTenantWaiters {
			t.Errorf("%d flood reads answered while the tenant's waiters were full, want %d", got, n-queries.DefaultMaxTenantWaiters)
		}
		lasted := time.Since(start)
		hangUp()
		finished()

		if len(o.unexpected) > 0 || o.badRetryAfter > 0 || o.notReached > 0 {
			t.Fatalf("%d unexpected answers (%d without Retry-After, %d 'not reached'): %v", len(o.unexpected), o.badRetryAfter, o.notReached, o.unexpected[:min(5, len(o.unexpected))])
		}
		if o.cancelled != queries.DefaultMaxTenantWaiters || o.refused == 0 {
			t.Errorf("refused %d, overloaded %d, waited until the test hung up %d; want %d waiting", o.refused, o.overloaded, o.cancelled, queries.DefaultMaxTenantWaiters)
		}
		// A refused read reads nothing; each waiting one has its own watch. The other reads
		// above are two plain reads and two watches.
		bound := 4 + int64(queries.DefaultMaxTenantWaiters)*pollsPerWait(lasted)
		if got := db.viewGets.Load(); got > bound {
			t.Errorf("%d reads of the view, want at most %d", got, bound)
		}
		t.Logf("refused at once %d, overloaded %d, waited %d, view reads %d in %v", o.refused, o.overloaded, o.cancelled, db.viewGets.Load(), lasted)
	})
}
