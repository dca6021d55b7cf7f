package deadletters

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/streams"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func newStore(t *testing.T) *Store {
	t.Helper()
	db := dynamotest.Current(t).DynamoDB()
	name := dynamotest.UniqueName("deadletters")
	if err := dynamo.EnsureTable(t.Context(), db, dynamo.StreamTables("unused", name)[1]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return New(db, name, "projector")
}

func record(tenant, agg string, seq int) streams.Record {
	return streams.Record{System: "sys", Tenant: tenant, Table: "tbl_" + tenant, StreamARN: "arn:" + tenant, Aggregate: agg,
		SequenceNumber: fmt.Sprint(seq), EventName: streams.EventInsert}
}

// steppingClock advances a second each time it is read: a re-drive's budget runs out
// after a known number of steps, with no sleeping.
type steppingClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *steppingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func TestFilterMustNameSystemBeforeTenant(t *testing.T) {
	s := New(nil, "t", "projector")
	if _, err := s.List(context.Background(), Filter{Tenant: "acme"}); err == nil {
		t.Error("a tenant without its system was accepted")
	}
}

// A dead letter marks its aggregate; a re-drive that empties the aggregate unmarks it,
// and one that stops at a failure leaves the marker on the failed record.
func TestMarkersFollowTheDeadLetters(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for i, r := range []streams.Record{record("t1", "user#a", 10), record("t1", "user#a", 11), record("t1", "user#b", 12), record("t2", "user#c", 13)} {
		behind := ""
		if i == 1 {
			behind = "10"
		}
		if err := s.Add(ctx, r, 3, "broken", behind); err != nil {
			t.Fatal(err)
		}
	}
	a, b := Aggregate{"sys", "t1", "tbl_t1", "user#a"}, Aggregate{"sys", "t1", "tbl_t1", "user#b"}
	free := Aggregate{"sys", "t1", "tbl_t1", "user#free"}
	blocked, err := s.Blocked(ctx, []Aggregate{a, b, free})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 2 || blocked[a] != "10" || blocked[b] != "12" {
		t.Fatalf("blocked = %v, want user#a behind 10 and user#b behind 12", blocked)
	}
	in, n, err := s.BlockedIn(ctx, "sys", "t1", "tbl_t1")
	if err != nil || len(in) != 2 || n != 3 {
		t.Fatalf("BlockedIn = %v, %d, %v; want 2 aggregates holding 3 dead letters", in, n, err)
	}
	var tenants []Tenant
	if err := s.Tenants(ctx, Filter{}, func(t Tenant) error { tenants = append(tenants, t); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []Tenant{{"sys", "t1"}, {"sys", "t2"}}; !slices.Equal(tenants, want) {
		t.Fatalf("tenants %v, want %v", tenants, want)
	}

	// user#a: 10 applies, 11 fails; user#b applies.
	res, err := s.Redrive(ctx, Filter{System: "sys", Tenant: "t1"}, func(_ context.Context, r streams.Record) error {
		if r.SequenceNumber == "11" {
			return errors.New("still broken")
		}
		return nil
	}, 0)
	if err != nil || res.Applied != 2 || res.FailedCount != 1 || res.Failed[0].SequenceNumber != "11" || res.More {
		t.Fatalf("re-drive = %+v, %v", res, err)
	}
	blocked, err = s.Blocked(ctx, []Aggregate{a, b})
	if err != nil || len(blocked) != 1 || blocked[a] != "11" {
		t.Fatalf("blocked after the re-drive = %v (%v), want user#a behind 11 only", blocked, err)
	}
	if first, found, err := s.FirstOf(ctx, "sys", "t1", "tbl_t1", "user#a"); err != nil || !found || first != "11" {
		t.Fatalf("FirstOf = %q, %v, %v", first, found, err)
	}
	if _, err := s.Redrive(ctx, Filter{}, func(context.Context, streams.Record) error { return nil }, 0); err != nil {
		t.Fatal(err)
	}
	if blocked, err := s.Blocked(ctx, []Aggregate{a, b, {"sys", "t2", "tbl_t2", "user#c"}}); err != nil || len(blocked) != 0 {
		t.Fatalf("blocked after everything was re-driven = %v (%v)", blocked, err)
	}
	if err := s.Tenants(ctx, Filter{}, func(t Tenant) error { return fmt.Errorf("tenant %v still listed", t) }); err != nil {
		t.Fatal(err)
	}
}

// A re-drive with a budget stops starting aggregates when it has passed, says More, and
// the next one goes on where it stopped: every aggregate gets its turn, also when the
// first ones keep failing, and the sweep after starts from the first again.
func TestARedriveWithinItsBudgetGoesOnWhereItStopped(t *testing.T) {
	s := newStore(t)
	clock := &steppingClock{t: time.Now()}
	s.now = clock.now
	ctx := t.Context()
	const aggs = 12
	for i := range aggs {
		if err := s.Add(ctx, record("t1", fmt.Sprintf("user#%02d", i), 100+i), 3, "broken", ""); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	tried := map[string]int{}
	apply := func(_ context.Context, r streams.Record) error {
		mu.Lock()
		defer mu.Unlock()
		tried[r.Aggregate]++
		if r.Aggregate < "user#03" {
			return errors.New("keeps failing")
		}
		return nil
	}
	rounds := 0
	for {
		rounds++
		if rounds > aggs {
			t.Fatalf("after %d re-drives, tried %v", rounds-1, tried)
		}
		res, err := s.Redrive(ctx, Filter{}, apply, 4*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if res.Applied+res.FailedCount > 3 {
			t.Fatalf("a re-drive with a budget of about 3 aggregates tried %d", res.Applied+res.FailedCount)
		}
		if !res.More {
			break
		}
	}
	if rounds < 2 {
		t.Fatalf("one re-drive did it all: the budget was not kept")
	}
	for i := range aggs {
		if agg := fmt.Sprintf("user#%02d", i); tried[agg] != 1 {
			t.Errorf("%s tried %d times in one sweep; tried %v", agg, tried[agg], tried)
		}
	}
	if _, err := s.Redrive(ctx, Filter{}, apply, 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if tried["user#00"] != 2 {
		t.Errorf("the next sweep did not start from the first aggregate: tried %v", tried)
	}
	left, err := s.List(ctx, Filter{})
	if err != nil || len(left) != 3 {
		t.Fatalf("left %d dead letters (%v), want the 3 that keep failing", len(left), err)
	}
}

// A consumer that parks a record behind a marker the re-drive is about to delete does
// not lose it: the re-drive looks again after deleting the marker.
func TestARecordParkedWhileTheRedriveEmptiesItsAggregateIsRedriven(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if err := s.Add(ctx, record("t1", "user#a", 10), 3, "broken", ""); err != nil {
		t.Fatal(err)
	}
	var applied []string
	parked := false
	res, err := s.Redrive(ctx, Filter{}, func(ctx context.Context, r streams.Record) error {
		applied = append(applied, r.SequenceNumber)
		if !parked {
			parked = true
			// A consumer saw the marker and parks the aggregate's next record behind it.
			return s.Add(ctx, record("t1", "user#a", 11), 0, "blocked behind 10", "10")
		}
		return nil
	}, 0)
	if err != nil || res.Applied != 2 || !slices.Equal(applied, []string{"10", "11"}) {
		t.Fatalf("re-drive %+v (%v) applied %v, want 10 then 11", res, err, applied)
	}
	if blocked, err := s.Blocked(ctx, []Aggregate{{"sys", "t1", "tbl_t1", "user#a"}}); err != nil || len(blocked) != 0 {
		t.Fatalf("still blocked: %v (%v)", blocked, err)
	}
}

// Dead letters stored before markers existed get theirs from Backfill; an erasure's
// Rewrite keeps the markers true.
func TestBackfillAndRewriteKeepTheMarkersTrue(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	for _, r := range []streams.Record{record("t1", "user#a", 10), record("t1", "user#a", 11), record("t1", "user#b", 12)} {
		if err := s.putEntry(ctx, Letter{System: r.System, Tenant: r.Tenant, Table: r.Table, Aggregate: r.Aggregate,
			SequenceNumber: r.SequenceNumber, Record: r, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := Aggregate{"sys", "t1", "tbl_t1", "user#a"}, Aggregate{"sys", "t1", "tbl_t1", "user#b"}
	if blocked, _ := s.Blocked(ctx, []Aggregate{a, b}); len(blocked) != 0 {
		t.Fatalf("markers before the backfill: %v", blocked)
	}
	if n, err := s.Backfill(ctx); err != nil || n != 2 {
		t.Fatalf("backfill marked %d (%v), want 2 aggregates", n, err)
	}
	if blocked, _ := s.Blocked(ctx, []Aggregate{a, b}); blocked[a] != "10" || blocked[b] != "12" {
		t.Fatalf("markers after the backfill: %v", blocked)
	}
	dropped, _, err := s.Rewrite(ctx, "sys", "t1", func(l *Letter) (bool, bool, error) {
		return l.Aggregate == "user#b" || l.SequenceNumber == "10", false, nil
	})
	if err != nil || dropped != 2 {
		t.Fatalf("rewrite dropped %d (%v)", dropped, err)
	}
	if blocked, _ := s.Blocked(ctx, []Aggregate{a, b}); len(blocked) != 1 || blocked[a] != "11" {
		t.Fatalf("markers after the rewrite: %v, want user#a behind 11", blocked)
	}
}

// An attempt count belongs to one record: another record of the aggregate starts again
// from one, and forgetting a record's count leaves another's alone.
func TestAttemptCountsBelongToOneRecord(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	r1, r2 := record("t1", "user#a", 10), record("t1", "user#a", 11)
	for want := 1; want <= 2; want++ {
		if n, err := s.NoteFailedAttempt(ctx, r1); err != nil || n != want {
			t.Fatalf("count = %d (%v), want %d", n, err, want)
		}
	}
	if n, err := s.NoteFailedAttempt(ctx, r2); err != nil || n != 1 {
		t.Fatalf("another record's count = %d (%v), want 1", n, err)
	}
	if err := s.ForgetAttempts(ctx, r1); err != nil {
		t.Fatal(err)
	}
	a := Aggregate{"sys", "t1", "tbl_t1", "user#a"}
	st, err := s.Lookup(ctx, r2.StreamARN, []Aggregate{a})
	if err != nil || st.Attempts[a] != (Attempt{SequenceNumber: "11", N: 1}) {
		t.Fatalf("attempts %+v (%v), want r2's 1 kept", st.Attempts, err)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: s.key(s.attempts(), attemptKey(r2))})
	if err != nil || getN(out.Item, TTLAttr) == "" {
		t.Fatalf("the count has no expiry: %v (%v)", out.Item, err)
	}
}
