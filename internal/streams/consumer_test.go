package streams_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/streams/streamstest"
)

// These tests drive the Subscriber with the Streams fake, for the faults DynamoDB Local
// cannot show; leases, checkpoints and dead letters are real tables on DynamoDB Local.

func fakeStream(f *streamstest.Fake, tenant string, shards ...string) (string, streams.Stream) {
	table := dynamotest.UniqueName(tenant)
	arn := f.AddStream(table)
	for _, id := range shards {
		f.AddShard(arn, id, "")
	}
	return arn, streams.Stream{System: "sys", Tenant: tenant, Table: table, StreamARN: arn}
}

func TestShardSplitDeliversEveryRecordOnceParentBeforeChildren(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "split", "parent")
	f.Put(arn, "parent", item("a", 1), item("b", 1), item("a", 2), item("b", 2))
	f.Split(arn, "parent", "child-1", "child-2")
	f.Put(arn, "child-1", item("a", 3), item("b", 3))
	f.Put(arn, "child-2", item("c", 1), item("c", 2))

	s := h.newSubscriber(streams.NewStaticSource(st), f, nil)
	rec := &recorder{}
	consume(t, s, rec, nil)
	rec.waitFor(t, 8, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	got := rec.all()
	if len(got) != 8 {
		t.Fatalf("applied %d records, want 8", len(got))
	}
	assertOnce(t, got)
	assertOrderPerAggregate(t, got)
	lastParent, firstChild := -1, len(got)
	for i, d := range got {
		if d.rec.ShardID == "parent" {
			lastParent = i
		} else {
			firstChild = min(firstChild, i)
		}
	}
	if lastParent > firstChild {
		t.Errorf("a child's record was applied at %d, before the parent's last at %d", firstChild, lastParent)
	}
	eventually(t, 5*time.Second, "the parent is checkpointed as finished", func() bool {
		return attrS(h.leaseItem(arn, "parent"), "checkpoint") == "SHARD_END"
	})
}

func TestParentListedOpenWhileItsChildExistsIsFinishedFirst(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "lineage", "parent")
	f.Put(arn, "parent", item("a", 1), item("a", 2))
	f.AddShard(arn, "child", "parent")
	f.Put(arn, "child", item("a", 4), item("b", 1))
	f.ListOpen(arn, "parent")

	s := h.newSubscriber(streams.NewStaticSource(st), f, nil)
	rec := &recorder{}
	consume(t, s, rec, nil)
	rec.waitFor(t, 2, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	if n := rec.len(); n != 2 {
		t.Fatalf("applied %d records while the parent was still open, want its 2", n)
	}

	f.Put(arn, "parent", item("a", 3))
	f.CloseShard(arn, "parent") // still listed open by DescribeStream
	rec.waitFor(t, 5, 10*time.Second)
	got := rec.all()
	assertOnce(t, got)
	assertOrderPerAggregate(t, got)
	for i, d := range got[:3] {
		if d.rec.ShardID != "parent" {
			t.Errorf("record %d came from %s, want the parent's three first", i, d.rec.ShardID)
		}
	}
}

func TestEmptyPagesAreNotTheEndOfAShard(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "sparse", "s1")
	f.Put(arn, "s1", item("a", 1), item("b", 1), item("a", 2))
	f.CloseShard(arn, "s1")
	f.EmptyPages(arn, "s1", 5)

	s := h.newSubscriber(streams.NewStaticSource(st), f, nil)
	rec := &recorder{}
	consume(t, s, rec, nil)
	got := rec.waitFor(t, 3, 10*time.Second)
	assertOnce(t, got)
	assertOrderPerAggregate(t, got)
	if n := f.Calls("GetRecords"); n < 6 {
		t.Errorf("GetRecords called %d times, want the 5 empty pages and the records", n)
	}
	eventually(t, 5*time.Second, "the closed shard is checkpointed as finished", func() bool {
		return attrS(h.leaseItem(arn, "s1"), "checkpoint") == "SHARD_END"
	})
}

func TestExpiredIteratorResumesAfterTheLastRecordWithoutLossOrDuplicate(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "expiry", "s1")
	f.Put(arn, "s1", item("a", 1), item("b", 1), item("a", 2), item("b", 2), item("a", 3))

	s := h.newSubscriber(streams.NewStaticSource(st), f, nil)
	rec := &recorder{}
	consume(t, s, rec, nil)
	rec.waitFor(t, 5, 10*time.Second)
	f.ExpireIterators()
	f.Put(arn, "s1", item("a", 4), item("b", 3), item("a", 5), item("b", 4), item("c", 1))
	rec.waitFor(t, 10, 10*time.Second)
	time.Sleep(200 * time.Millisecond)

	got := rec.all()
	if len(got) != 10 {
		t.Errorf("applied %d records, want 10", len(got))
	}
	assertOnce(t, got)
	assertOrderPerAggregate(t, got)
	if n := f.IteratorTypes(stypes.ShardIteratorTypeAfterSequenceNumber); n < 1 {
		t.Error("no AFTER_SEQUENCE_NUMBER iterator was taken after the expiry")
	}
	if n := f.IteratorTypes(stypes.ShardIteratorTypeLatest); n != 0 {
		t.Errorf("LATEST iterators taken: %d, want none", n)
	}
	if n := s.metric(t, "ssodir_stream_read_retries_total", map[string]string{"kind": "expired"}); n < 1 {
		t.Errorf("expired iterators counted: %v, want at least 1", n)
	}
}

func TestTrimmedShardWithoutCheckpointStartsAgainAtTheTrimHorizon(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "fresh", "s1")
	f.StaleEmptyIterators(arn, "s1")

	s := h.newSubscriber(streams.NewStaticSource(st), f, nil)
	rec := &recorder{}
	consume(t, s, rec, nil)
	eventually(t, 10*time.Second, "the empty shard is being read", func() bool { return f.Calls("GetRecords") >= 2 })
	f.Put(arn, "s1", item("a", 1), item("a", 2), item("b", 1))

	got := rec.waitFor(t, 3, 10*time.Second)
	assertOnce(t, got)
	assertOrderPerAggregate(t, got)
	if gaps := h.recordedGaps(); len(gaps) != 0 {
		t.Errorf("gap reported for a shard with no checkpoint: %+v", gaps)
	}
	if n := s.metric(t, "ssodir_stream_gaps_total", nil); n != 0 {
		t.Errorf("ssodir_stream_gaps_total = %v, want 0", n)
	}
	if n := f.IteratorTypes(stypes.ShardIteratorTypeTrimHorizon); n < 2 {
		t.Errorf("TRIM_HORIZON iterators taken: %d, want a second one after the trimmed read", n)
	}
}

func TestCheckpointBehindTheRetentionIsReportedAsAGap(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "trimmed", "s1")
	seqs := f.Put(arn, "s1", item("a", 1), item("a", 2), item("a", 3))
	src := streams.NewStaticSource(st)

	first := h.newSubscriber(src, f, nil)
	consume(t, first, &recorder{}, nil)
	eventually(t, 10*time.Second, "the first subscriber checkpoints its 3 records", func() bool {
		return attrS(h.leaseItem(arn, "s1"), "checkpoint") == seqs[2]
	})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// While no process runs, more is written and the stream's retention drops the
	// oldest five records: a4 and a5 were never applied.
	f.Put(arn, "s1", item("a", 4), item("a", 5), item("a", 6), item("a", 7), item("a", 8))
	f.Trim(arn, "s1", 5)

	second := h.newSubscriber(src, f, nil)
	rec := &recorder{}
	consume(t, second, rec, nil)
	rec.waitFor(t, 3, 10*time.Second)
	time.Sleep(200 * time.Millisecond)

	var versions []int
	for _, d := range rec.all() {
		versions = append(versions, version(d.rec))
	}
	if !slices.Equal(versions, []int{6, 7, 8}) {
		t.Errorf("applied versions %v, want [6 7 8] (4 and 5 are lost)", versions)
	}
	gaps := h.recordedGaps()
	if len(gaps) != 1 || gaps[0].After != seqs[2] || gaps[0].ShardID != "s1" || gaps[0].Stream.Tenant != "trimmed" {
		t.Fatalf("gaps = %+v, want one on s1 of tenant trimmed after %s", gaps, seqs[2])
	}
	if n := second.metric(t, "ssodir_stream_gaps_total", map[string]string{"tenant": "trimmed"}); n != 1 {
		t.Errorf("ssodir_stream_gaps_total = %v, want 1", n)
	}
	if got := attrS(h.leaseItem(arn, "s1"), "gap_after"); got != seqs[2] {
		t.Errorf("lease row gap_after = %q, want %s", got, seqs[2])
	}
}

func TestShardTrimmedAwayBeforeItsEndIsAGapAndItsChildrenGoOn(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "vanished", "parent")
	seqs := f.Put(arn, "parent", item("a", 1), item("a", 2))
	src := streams.NewStaticSource(st)

	first := h.newSubscriber(src, f, nil)
	consume(t, first, &recorder{}, nil)
	eventually(t, 10*time.Second, "the parent is checkpointed mid-way", func() bool {
		return attrS(h.leaseItem(arn, "parent"), "checkpoint") == seqs[1]
	})
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	f.Put(arn, "parent", item("a", 3))
	f.Split(arn, "parent", "child-1", "child-2")
	f.Put(arn, "child-1", item("a", 4))
	f.RemoveShard(arn, "parent") // trimmed entirely, a3 with it

	second := h.newSubscriber(src, f, nil)
	rec := &recorder{}
	consume(t, second, rec, nil)
	got := rec.waitFor(t, 1, 10*time.Second)
	if version(got[0].rec) != 4 {
		t.Errorf("applied v%d, want v4 of the child", version(got[0].rec))
	}
	gaps := h.recordedGaps()
	if len(gaps) != 1 || gaps[0].After != seqs[1] || gaps[0].ShardID != "parent" {
		t.Fatalf("gaps = %+v, want one on the parent after %s", gaps, seqs[1])
	}
}

func TestThrottledReadsAreRetried(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "throttled", "s1")
	f.Put(arn, "s1", item("a", 1))

	s := h.newSubscriber(streams.NewStaticSource(st), f, nil)
	rec := &recorder{}
	consume(t, s, rec, nil)
	rec.waitFor(t, 1, 10*time.Second)
	f.Throttle(6)
	f.Put(arn, "s1", item("a", 2), item("b", 1), item("a", 3))
	got := rec.waitFor(t, 4, 10*time.Second)
	assertOnce(t, got)
	assertOrderPerAggregate(t, got)
	if n := s.metric(t, "ssodir_stream_read_retries_total", map[string]string{"kind": "throttled"}); n < 1 {
		t.Errorf("throttled reads retried: %v, want at least 1", n)
	}
}

func TestZombieLeaseHolderCannotMoveTheCheckpointBack(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "zombie", "s1")
	seqs := f.Put(arn, "s1", item("a", 1), item("b", 1), item("a", 2))

	// b1's handler hangs, like a process stopped by the OS in the middle of a record.
	paused := make(chan struct{})
	s := h.newSubscriber(streams.NewStaticSource(st), f, nil)
	rec := &recorder{}
	consume(t, s, rec, func(r streams.Record) error {
		if r.Aggregate == "b" {
			<-paused
		}
		return nil
	})
	rec.waitFor(t, 2, 10*time.Second)
	eventually(t, 5*time.Second, "the checkpoint waits before b1", func() bool {
		return attrS(h.leaseItem(arn, "s1"), "checkpoint") == seqs[0]
	})

	// Meanwhile a live usurper took the lease over and applied everything.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go heartbeat(ctx, h, "usurper")
	_, err := h.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(h.leaseTable),
		Key: map[string]dtypes.AttributeValue{
			"consumer":  &dtypes.AttributeValueMemberS{Value: h.consumer},
			"lease_key": &dtypes.AttributeValueMemberS{Value: "shard#" + arn + "#s1"},
		},
		UpdateExpression: aws.String("SET lease_owner = :o, lease_token = :t, checkpoint = :cp"),
		ExpressionAttributeValues: map[string]dtypes.AttributeValue{
			":o":  &dtypes.AttributeValueMemberS{Value: "usurper"},
			":t":  &dtypes.AttributeValueMemberS{Value: "usurper-token"},
			":cp": &dtypes.AttributeValueMemberS{Value: seqs[2]},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	close(paused) // the zombie wakes up and acks b1

	eventually(t, 5*time.Second, "the zombie lets the shard go", func() bool {
		return s.metric(t, "ssodir_stream_leases_held", nil) == 0
	})
	f.Put(arn, "s1", item("c", 1))
	time.Sleep(500 * time.Millisecond) // ten checkpoint intervals, two lease rounds
	item := h.leaseItem(arn, "s1")
	if cp := attrS(item, "checkpoint"); cp != seqs[2] {
		t.Errorf("checkpoint = %s, want the usurper's %s", cp, seqs[2])
	}
	if o := attrS(item, "lease_owner"); o != "usurper" {
		t.Errorf("lease owner = %q, want usurper", o)
	}
	for _, d := range rec.all() {
		if d.rec.Aggregate == "c" {
			t.Error("the zombie went on reading the shard after it let it go")
		}
	}
}

// heartbeat keeps an owner row alive the way a running Subscriber does.
func heartbeat(ctx context.Context, h *harness, owner string) {
	for ctx.Err() == nil {
		_, _ = h.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(h.leaseTable),
			Key: map[string]dtypes.AttributeValue{
				"consumer":  &dtypes.AttributeValueMemberS{Value: h.consumer},
				"lease_key": &dtypes.AttributeValueMemberS{Value: "owner#" + owner},
			},
			UpdateExpression: aws.String("SET owner_id = :o ADD heartbeat :one"),
			ExpressionAttributeValues: map[string]dtypes.AttributeValue{
				":o":   &dtypes.AttributeValueMemberS{Value: owner},
				":one": &dtypes.AttributeValueMemberN{Value: "1"},
			},
		})
		time.Sleep(100 * time.Millisecond)
	}
}

func TestTwoSubscribersShareTheShards(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	shards := []string{"s1", "s2", "s3", "s4"}
	arn, st := fakeStream(f, "shared", shards...)
	put := func(v int) {
		for _, id := range shards {
			f.Put(arn, id, item(id+"-a", v), item(id+"-b", v))
		}
	}
	put(1)
	src := streams.NewStaticSource(st)
	a := h.newSubscriber(src, f, nil)
	rec := &recorder{}
	consume(t, a, rec, nil)
	rec.waitFor(t, 8, 10*time.Second)
	eventually(t, 5*time.Second, "the first subscriber holds all shards", func() bool {
		for _, o := range h.owners(arn, shards...) {
			if o != a.owner {
				return false
			}
		}
		return true
	})

	// A second process joins: the first hands shards over after checkpointing them.
	b := h.newSubscriber(src, f, nil)
	consume(t, b, rec, nil)
	eventually(t, 15*time.Second, "both subscribers hold two shards", func() bool {
		count := map[string]int{}
		for _, o := range h.owners(arn, shards...) {
			count[o]++
		}
		return count[a.owner] == 2 && count[b.owner] == 2
	})

	put(2)
	rec.waitFor(t, 16, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	got := rec.all()
	if len(got) != 16 {
		t.Errorf("applied %d records, want 16", len(got))
	}
	assertOnce(t, got)
	assertOrderPerAggregate(t, got)
	by := map[string]int{}
	for _, d := range got[8:] {
		by[d.owner]++
	}
	if by[a.owner] == 0 || by[b.owner] == 0 {
		t.Errorf("second batch applied by %v, want both subscribers", by)
	}
}

func TestKilledSubscribersShardsAreTakenOverWithinTheLease(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	shards := []string{"s1", "s2"}
	arn, st := fakeStream(f, "killed", shards...)
	src := streams.NewStaticSource(st)
	kill := &killSwitch{}
	a := h.newSubscriber(src, killableStreams{f, kill}, killableDB{h.db, kill})
	b := h.newSubscriber(src, f, nil)
	rec := &recorder{}
	consume(t, a, rec, nil)
	consume(t, b, rec, nil)
	eventually(t, 15*time.Second, "each subscriber holds a shard", func() bool {
		o := h.owners(arn, shards...)
		return o["s1"] != "" && o["s2"] != "" && o["s1"] != o["s2"]
	})

	kill.dead.Store(true)
	killedAt := time.Now()
	eventually(t, 10*time.Second, "the survivor holds both shards", func() bool {
		o := h.owners(arn, shards...)
		return o["s1"] == b.owner && o["s2"] == b.owner
	})
	// The lease is 1s and heartbeats are judged every 200ms; 30s is the requirement at
	// the default 10s lease, so three leases is the same bound scaled down.
	if took := time.Since(killedAt); took > 3*time.Second {
		t.Errorf("takeover took %s, want within 3 lease durations (3s)", took)
	}

	f.Put(arn, "s1", item("a", 1))
	f.Put(arn, "s2", item("b", 1))
	got := rec.waitFor(t, 2, 10*time.Second)
	for _, d := range got {
		if d.owner != b.owner {
			t.Errorf("record of %s applied by %s, want the survivor", d.rec.Aggregate, d.owner)
		}
	}
}

func TestClosedSubscriberReleasesItsShardsForAnImmediateTakeover(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	shards := []string{"s1", "s2"}
	arn, st := fakeStream(f, "graceful", shards...)
	for _, id := range shards {
		f.Put(arn, id, item(id, 1), item(id, 2))
	}
	src := streams.NewStaticSource(st)
	const lease = 4 * time.Second
	long := func(c *streams.Config) { c.LeaseDuration = lease }
	a := h.newSubscriber(src, f, nil, long)
	b := h.newSubscriber(src, f, nil, long)
	rec := &recorder{}
	consume(t, a, rec, nil)
	consume(t, b, rec, nil)
	rec.waitFor(t, 4, 15*time.Second)
	eventually(t, 20*time.Second, "each subscriber holds a shard", func() bool {
		o := h.owners(arn, shards...)
		return o["s1"] != "" && o["s2"] != "" && o["s1"] != o["s2"]
	})

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	closedAt := time.Now()
	eventually(t, 2*lease, "the other subscriber holds both shards", func() bool {
		o := h.owners(arn, shards...)
		return o["s1"] == b.owner && o["s2"] == b.owner
	})
	if took := time.Since(closedAt); took > lease/2 {
		t.Errorf("takeover took %s after a graceful close; it should not wait for the %s lease", took, lease)
	}

	for _, id := range shards {
		f.Put(arn, id, item(id, 3))
	}
	rec.waitFor(t, 6, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	got := rec.all()
	assertOnce(t, got)
	assertOrderPerAggregate(t, got)
	if len(got) != 6 {
		t.Errorf("applied %d records, want 6", len(got))
	}
}

func TestFailingRecordIsDeadLetteredAndItsAggregateParkedUntilRedriven(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "poison", "s1")
	src := streams.NewStaticSource(st)
	var failing atomic.Bool
	failing.Store(true)
	var attempts atomic.Int32
	handler := func(r streams.Record) error {
		if r.Aggregate == "x" && failing.Load() {
			attempts.Add(1)
			return errors.New("boom: projection rejected x")
		}
		return nil
	}
	seqs := f.Put(arn, "s1", item("x", 1), item("y", 1), item("x", 2), item("y", 2), item("x", 3))

	// Slow retries, so that x1 is still being retried while y flows past it.
	first := h.newSubscriber(src, f, nil, func(c *streams.Config) {
		c.RetryBackoff, c.MaxRetryBackoff = 400*time.Millisecond, time.Second
	})
	rec := &recorder{}
	consume(t, first, rec, handler)
	rec.waitFor(t, 2, 10*time.Second)
	dlq := h.dlq
	if dls, err := dlq.List(context.Background(), deadletters.Filter{}); err != nil || len(dls) != 0 {
		t.Errorf("dead letters before x1's retries ran out: %d, %v; y should not wait for them", len(dls), err)
	}
	var dls []deadletters.Letter
	eventually(t, 10*time.Second, "x1 failed and x2, x3 are parked", func() bool {
		var err error
		dls, err = dlq.List(context.Background(), deadletters.Filter{System: "sys", Tenant: "poison"})
		return err == nil && len(dls) == 3
	})
	if dls[0].SequenceNumber != seqs[0] || dls[0].Attempts != 3 || !strings.Contains(dls[0].Reason, "boom") || dls[0].BlockedBehind != "" {
		t.Errorf("first dead letter = %+v, want x1 after 3 attempts with the handler's reason", dls[0])
	}
	if n := attempts.Load(); n != 3 {
		t.Errorf("x1 was tried %d times, want MaxAttempts = 3", n)
	}
	for i, want := range []string{seqs[2], seqs[4]} {
		if dls[i+1].SequenceNumber != want || dls[i+1].BlockedBehind != seqs[0] || dls[i+1].Attempts != 0 {
			t.Errorf("dead letter %d = %+v, want %s parked behind %s untried", i+1, dls[i+1], want, seqs[0])
		}
	}
	if version(dls[1].Record) != 2 || dls[1].Record.Aggregate != "x" {
		t.Errorf("dead letter keeps record %s v%d, want x v2", dls[1].Record.Aggregate, version(dls[1].Record))
	}
	for _, d := range rec.all() {
		if d.rec.Aggregate != "y" {
			t.Errorf("applied %s v%d, want only y's records", d.rec.Aggregate, version(d.rec))
		}
	}
	eventually(t, 5*time.Second, "the checkpoint passes the dead letters", func() bool {
		return attrS(h.leaseItem(arn, "s1"), "checkpoint") == seqs[4]
	})
	if n := first.metric(t, "ssodir_stream_dead_letters_total", map[string]string{"kind": "failed"}); n != 1 {
		t.Errorf("failed dead letters counted: %v, want 1", n)
	}
	if n := first.metric(t, "ssodir_stream_dead_letters_total", map[string]string{"kind": "parked"}); n != 2 {
		t.Errorf("parked dead letters counted: %v, want 2", n)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	// The handler is fixed, but x stays blocked across a restart until the re-drive.
	failing.Store(false)
	second := h.newSubscriber(src, f, nil)
	rec2 := &recorder{}
	consume(t, second, rec2, handler)
	more := f.Put(arn, "s1", item("x", 4), item("y", 3))
	rec2.waitFor(t, 1, 10*time.Second)
	eventually(t, 10*time.Second, "x4 is parked too", func() bool {
		dls, err := dlq.List(context.Background(), deadletters.Filter{System: "sys"})
		return err == nil && len(dls) == 4 && dls[3].SequenceNumber == more[0]
	})

	// A first re-drive stops x at x3, which fails again.
	var applied []string
	res, err := dlq.Redrive(context.Background(), deadletters.Filter{System: "sys", Tenant: "poison"},
		func(_ context.Context, r streams.Record) error {
			if r.SequenceNumber == seqs[4] {
				return errors.New("still broken")
			}
			applied = append(applied, r.SequenceNumber)
			return nil
		}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != 2 || len(res.Failed) != 1 || res.Failed[0].SequenceNumber != seqs[4] || res.Failed[0].Reason != "still broken" {
		t.Errorf("first re-drive = %+v, want x1 and x2 applied and x3 failed", res)
	}
	left, err := dlq.List(context.Background(), deadletters.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].SequenceNumber != seqs[4] || left[0].RedriveFailures != 1 || left[1].SequenceNumber != more[0] {
		t.Errorf("left after the first re-drive: %+v, want x3 (failed once) and x4", left)
	}

	res, err = dlq.Redrive(context.Background(), deadletters.Filter{System: "sys", Tenant: "poison", Table: st.Table},
		func(_ context.Context, r streams.Record) error {
			applied = append(applied, r.SequenceNumber)
			return nil
		}, 0)
	if err != nil || res.Applied != 2 || len(res.Failed) != 0 {
		t.Fatalf("second re-drive = %+v, %v; want x3 and x4 applied", res, err)
	}
	if want := []string{seqs[0], seqs[2], seqs[4], more[0]}; !slices.Equal(applied, want) {
		t.Errorf("re-driven in order %v, want %v", applied, want)
	}

	// With its dead letters gone the aggregate flows again.
	f.Put(arn, "s1", item("x", 5))
	eventually(t, 10*time.Second, "x5 is applied", func() bool {
		for _, d := range rec2.all() {
			if d.rec.Aggregate == "x" && version(d.rec) == 5 {
				return true
			}
		}
		return false
	})
	if left, _ := dlq.List(context.Background(), deadletters.Filter{}); len(left) != 0 {
		t.Errorf("dead letters left: %+v", left)
	}
}

func TestTTLDeletionsAreFlagged(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	arn, st := fakeStream(f, "ttl", "s1")
	old := map[string]stypes.AttributeValue{"id": &stypes.AttributeValueMemberS{Value: "history#1"}}
	f.Put(arn, "s1",
		stypes.Record{
			EventName:    stypes.OperationTypeRemove,
			UserIdentity: &stypes.Identity{Type: aws.String("Service"), PrincipalId: aws.String("dynamodb.amazonaws.com")},
			Dynamodb:     &stypes.StreamRecord{Keys: old, OldImage: old},
		},
		stypes.Record{
			EventName: stypes.OperationTypeRemove,
			Dynamodb: &stypes.StreamRecord{
				Keys:     map[string]stypes.AttributeValue{"id": &stypes.AttributeValueMemberS{Value: "user#dave"}},
				OldImage: map[string]stypes.AttributeValue{"id": &stypes.AttributeValueMemberS{Value: "user#dave"}},
			},
		})

	s := h.newSubscriber(streams.NewStaticSource(st), f, nil)
	rec := &recorder{}
	consume(t, s, rec, nil)
	got := rec.waitFor(t, 2, 10*time.Second)
	for _, d := range got {
		ttl := d.rec.Aggregate == "history#1"
		if d.rec.TTLDeletion != ttl || (d.msg.Metadata.Get(streams.MetaTTLDeletion) == "true") != ttl {
			t.Errorf("%s: TTLDeletion = %v, metadata %q; want %v", d.rec.Aggregate, d.rec.TTLDeletion,
				d.msg.Metadata.Get(streams.MetaTTLDeletion), ttl)
		}
		if d.rec.EventName != streams.EventRemove {
			t.Errorf("%s: event %s, want REMOVE", d.rec.Aggregate, d.rec.EventName)
		}
	}
	if n := s.metric(t, "ssodir_stream_records_total", map[string]string{"event": "TTL_REMOVE"}); n != 1 {
		t.Errorf("TTL deletions counted: %v, want 1", n)
	}
	if n := s.metric(t, "ssodir_stream_records_total", map[string]string{"event": "REMOVE"}); n != 1 {
		t.Errorf("business deletions counted: %v, want 1", n)
	}
}
