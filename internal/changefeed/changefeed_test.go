package changefeed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// feedTable makes a feed table of the test's own.
func feedTable(t *testing.T) string {
	t.Helper()
	name := changefeed.TableName(dynamo.Names{Prefix: dynamotest.UniqueName("cf")})
	if err := dynamo.EnsureTable(context.Background(), dynamotest.Current(t).DynamoDB(), changefeed.Table(name)); err != nil {
		t.Fatal(err)
	}
	return name
}

func change(agg string, v int64) changefeed.Change {
	ev, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-v%d", agg, v), "data": map[string]any{"id": agg, "version": v}})
	return changefeed.Change{System: "s1", Tenant: "t1", Aggregate: agg, Version: v, Event: ev}
}

type seen struct {
	ID   string `json:"id"`
	Data struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
	} `json:"data"`
}

// walk reads the feed from p until a page comes back empty, as a consumer would.
func walk(t *testing.T, r *changefeed.Reader, p changefeed.Position, limit int) ([]seen, changefeed.Position) {
	t.Helper()
	var out []seen
	for {
		page, err := r.Read(context.Background(), "s1", "t1", p, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, raw := range page.Events {
			var s seen
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		if page.Next.After < p.After {
			t.Fatalf("the cursor went back from %d to %d", p.After, page.Next.After)
		}
		p = page.Next
		if len(page.Events) == 0 {
			return out, p
		}
	}
}

func TestAChangeAppendedAgainIsInTheFeedOnce(t *testing.T) {
	t.Parallel()
	db, table := dynamotest.Current(t).DynamoDB(), feedTable(t)
	a := changefeed.NewAppender(db, table, changefeed.Options{})
	ctx := context.Background()
	for _, c := range []changefeed.Change{change("u1", 1), change("u1", 1), change("u2", 1), change("u1", 2), change("u1", 1), change("u2", 1)} {
		if err := a.Append(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := walk(t, changefeed.NewReader(db, table, 0, nil), changefeed.Position{}, 2)
	want := []string{"u1-v1", "u2-v1", "u1-v2"}
	if len(got) != len(want) {
		t.Fatalf("feed holds %v, want %v", got, want)
	}
	for i, s := range got {
		if s.ID != want[i] {
			t.Errorf("change %d is %s, want %s", i, s.ID, want[i])
		}
	}
}

// TestConcurrentAppendersAndAWalkSeeEveryChangeOnceInOrder: two appenders (two projector
// processes holding different shards) append the changes of many aggregates at once,
// some of them twice (a redelivery), while a consumer walks the feed with small pages.
// The walk sees every change exactly once and each aggregate's in version order: no
// cursor passed a change that became visible after it.
func TestConcurrentAppendersAndAWalkSeeEveryChangeOnceInOrder(t *testing.T) {
	t.Parallel()
	db, table := dynamotest.Current(t).DynamoDB(), feedTable(t)
	appenders := []*changefeed.Appender{changefeed.NewAppender(db, table, changefeed.Options{}), changefeed.NewAppender(db, table, changefeed.Options{})}
	const aggregates, versions = 24, 8
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for g := range aggregates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			agg := fmt.Sprintf("agg%02d", g)
			for v := int64(1); v <= versions; v++ {
				n := 1 + rng.IntN(2) // some records are delivered twice
				for range n {
					if err := appenders[rng.IntN(2)].Append(ctx, change(agg, v)); err != nil {
						t.Error(err)
						failed.Store(true)
						return
					}
				}
			}
		}()
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()

	r := changefeed.NewReader(db, table, 0, nil)
	var got []seen
	var p changefeed.Position
	for done := false; !done; {
		select {
		case <-writersDone:
			done = true
		default:
		}
		page, p2 := walk(t, r, p, 3)
		got, p = append(got, page...), p2
	}
	if failed.Load() {
		return
	}
	last := map[string]int64{}
	ids := map[string]bool{}
	for _, s := range got {
		if ids[s.ID] {
			t.Errorf("%s seen twice", s.ID)
		}
		ids[s.ID] = true
		if s.Data.Version != last[s.Data.ID]+1 {
			t.Errorf("%s v%d follows v%d", s.Data.ID, s.Data.Version, last[s.Data.ID])
		}
		last[s.Data.ID] = s.Data.Version
	}
	if len(got) != aggregates*versions {
		t.Errorf("the walk saw %d changes, want %d", len(got), aggregates*versions)
	}
}

func TestARenameWaitsForItsPredecessor(t *testing.T) {
	t.Parallel()
	db, table := dynamotest.Current(t).DynamoDB(), feedTable(t)
	ctx := context.Background()
	a := changefeed.NewAppender(db, table, changefeed.Options{RequireWait: time.Minute})
	for v := int64(1); v <= 2; v++ {
		if err := a.Append(ctx, change("u1", v)); err != nil {
			t.Fatal(err)
		}
	}
	rename := change("u1", 5)
	rename.Requires, rename.RequiresAt = 3, time.Now()
	done := make(chan error, 1)
	go func() { done <- a.Append(ctx, rename) }()
	select {
	case err := <-done:
		t.Fatalf("the rename went in (%v) before its predecessor", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := a.Append(ctx, change("u1", 3)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, _ := walk(t, changefeed.NewReader(db, table, 0, nil), changefeed.Position{}, 10)
	var versions []int64
	for _, s := range got {
		versions = append(versions, s.Data.Version)
	}
	if fmt.Sprint(versions) != "[1 2 3 5]" {
		t.Errorf("feed versions %v, want [1 2 3 5]", versions)
	}

	t.Run("a predecessor that never comes is reported after the wait", func(t *testing.T) {
		short := changefeed.NewAppender(db, table, changefeed.Options{RequireWait: 200 * time.Millisecond})
		c := change("u1", 9)
		c.Requires, c.RequiresAt = 7, time.Now()
		if err := short.Append(ctx, c); !errors.Is(err, changefeed.ErrPredecessorPending) {
			t.Errorf("Append = %v, want ErrPredecessorPending", err)
		}
	})
	t.Run("a predecessor recorded before the feed began is not waited for", func(t *testing.T) {
		c := change("u2", 4)
		c.Requires, c.RequiresAt = 3, time.Now().Add(-time.Hour)
		if err := a.Append(ctx, c); err != nil {
			t.Errorf("Append = %v, want nil", err)
		}
	})
	t.Run("a predecessor gone from the command log is not waited for", func(t *testing.T) {
		c := change("u1", 12)
		c.Requires = 11
		if err := a.Append(ctx, c); err != nil {
			t.Errorf("Append = %v, want nil", err)
		}
	})
}

func TestAPositionPastTheRetentionIsExpired(t *testing.T) {
	t.Parallel()
	db, table := dynamotest.Current(t).DynamoDB(), feedTable(t)
	ctx := context.Background()
	now := time.Now()
	clock := func() time.Time { return now }
	a := changefeed.NewAppender(db, table, changefeed.Options{Retention: time.Hour, Now: clock})
	if err := a.Append(ctx, change("u1", 1)); err != nil {
		t.Fatal(err)
	}
	r := changefeed.NewReader(db, table, time.Hour, clock)
	got, p := walk(t, r, changefeed.Position{}, 10)
	if len(got) != 1 {
		t.Fatalf("walk saw %d changes, want 1", len(got))
	}
	now = now.Add(50 * time.Minute)
	if _, err := r.Read(ctx, "s1", "t1", p, 10); err != nil {
		t.Errorf("a cursor within the retention: %v", err)
	}
	now = now.Add(20 * time.Minute)
	if _, err := r.Read(ctx, "s1", "t1", p, 10); !errors.Is(err, changefeed.ErrExpired) {
		t.Errorf("a cursor past the retention: %v, want ErrExpired", err)
	}
	// A walk from the start passes over what has expired but is not deleted yet.
	got, _ = walk(t, r, changefeed.Position{}, 10)
	if len(got) != 0 {
		t.Errorf("a new walk saw %d expired changes", len(got))
	}
}

// TestARenameWaitsEvenAsATenantsFirstChange: a rename that reaches the feed before the
// person's earlier changes (the feed knows nothing of them yet, not even the tenant) waits
// for them when they were recorded after the feed's table was made; one recorded before
// may have been projected before the feed existed, and is not waited for.
func TestARenameWaitsEvenAsATenantsFirstChange(t *testing.T) {
	t.Parallel()
	db, table := dynamotest.Current(t).DynamoDB(), feedTable(t)
	ctx := context.Background()
	a := changefeed.NewAppender(db, table, changefeed.Options{RequireWait: 200 * time.Millisecond})
	rename := change("u1", 2)
	rename.Requires, rename.RequiresAt = 1, time.Now()
	if err := a.Append(ctx, rename); !errors.Is(err, changefeed.ErrPredecessorPending) {
		t.Fatalf("the rename as the tenant's first change: %v, want ErrPredecessorPending", err)
	}
	if err := a.Append(ctx, change("u1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, rename); err != nil {
		t.Fatal(err)
	}
	got, _ := walk(t, changefeed.NewReader(db, table, 0, nil), changefeed.Position{}, 10)
	if len(got) != 2 || got[0].Data.Version != 1 || got[1].Data.Version != 2 {
		t.Errorf("feed %+v, want u1 v1 then v2", got)
	}

	c := change("u9", 5)
	c.Tenant = "older"
	c.Requires, c.RequiresAt = 4, time.Now().Add(-24*time.Hour)
	if err := a.Append(ctx, c); err != nil {
		t.Errorf("a rename whose predecessor is older than the feed: %v, want nil", err)
	}
}
