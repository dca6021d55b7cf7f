package esm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/esm/esmtest"
	"github.com/ssodir/ssodir/internal/streams"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// fixture is a tenant's command table with a stream on DynamoDB Local, the dead-letter
// table, and a handler that records what it applied and fails as told.
type fixture struct {
	t       *testing.T
	db      *dynamodb.Client
	names   dynamo.Names
	table   string
	stream  string
	dlq     *deadletters.Store
	mu      sync.Mutex
	applied map[string][]int
	// failing: aggregate → how many more deliveries fail (-1: always).
	failing map[string]int
}

func newFixture(t *testing.T) *fixture {
	l := dynamotest.Current(t)
	f := &fixture{t: t, db: l.DynamoDB(), names: dynamo.Names{Prefix: dynamotest.UniqueName("esm")}, applied: map[string][]int{}, failing: map[string]int{}}
	f.table = f.names.Commands("acme", "t1")
	ctx := t.Context()
	specs := append([]dynamo.TableSpec{dynamo.CommandsTable(f.table)}, dynamo.StreamTables(f.names.StreamLeases(), f.names.DeadLetters())...)
	if err := dynamo.EnsureSystemTables(ctx, f.db, dynamo.TableSettings{Stage: "test"}, specs...); err != nil {
		t.Fatal(err)
	}
	out, err := f.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(f.table)})
	if err != nil {
		t.Fatal(err)
	}
	f.stream = aws.ToString(out.Table.LatestStreamArn)
	f.dlq = deadletters.New(f.db, f.names.DeadLetters(), "projector")
	return f
}

func (f *fixture) put(agg string, version int) {
	_, err := f.db.PutItem(f.t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.table), Item: map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: agg}, "sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("config#%06d", version)},
		"version": &types.AttributeValueMemberN{Value: fmt.Sprint(version)},
	}})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) apply(ctx context.Context, r streams.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.failing[r.Aggregate]; n != 0 {
		if n > 0 {
			f.failing[r.Aggregate] = n - 1
		}
		return errors.New("the view is not writable")
	}
	var v int
	fmt.Sscan(r.NewImage["version"].(*types.AttributeValueMemberN).Value, &v)
	f.applied[r.Aggregate] = append(f.applied[r.Aggregate], v)
	return nil
}

func (f *fixture) handler(msg *message.Message) error {
	r, err := streams.DecodeRecord(msg)
	if err != nil {
		return err
	}
	return f.apply(msg.Context(), r)
}

func (f *fixture) player(b *esm.Batch) *esmtest.Player {
	return &esmtest.Player{Streams: dynamotest.Current(f.t).Streams(), StreamARN: f.stream, BatchSize: 10, Invoke: b.Handle}
}

// inOrder reports whether no version of an aggregate was applied before every earlier
// one had been. A redelivery (ESM restarts the shard at the lowest failed record, so the
// records after it come again) may repeat older versions, which the real handlers'
// "only if newer" makes harmless; a version applied ahead of a failed one is the defect.
func inOrder(vs []int) bool {
	highest := 0
	for _, v := range vs {
		if v > highest+1 {
			return false
		}
		highest = max(highest, v)
	}
	return true
}

func TestAFailingAggregateStopsAtItsRecordWhileTheOthersGoOn(t *testing.T) {
	f := newFixture(t)
	f.failing["user#bad"] = -1
	for v := 1; v <= 4; v++ {
		f.put("user#a", v)
		f.put("user#bad", v)
		f.put("user#b", v)
	}
	b := esm.New(esm.Config{Labels: f.names.ParseCommands, DeadLetters: f.dlq, Handle: f.handler, MaxAttempts: 3, Backoff: time.Millisecond})
	p := f.player(b)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := p.Settle(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, agg := range []string{"user#a", "user#b"} {
		if got := f.applied[agg]; !inOrder(got) || len(got) == 0 || got[len(got)-1] != 4 {
			t.Errorf("%s applied %v, want every version up to 4, in order", agg, got)
		}
	}
	if got := f.applied["user#bad"]; len(got) != 0 {
		t.Errorf("user#bad applied %v while its first record kept failing", got)
	}
	if fs := p.Failures(); len(fs) != 0 {
		t.Errorf("ESM gave up on %v: the function should have dead-lettered the record before", fs)
	}
	dls, err := f.dlq.List(ctx, deadletters.Filter{System: "acme", Tenant: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 4 || dls[0].BlockedBehind != "" || dls[0].Attempts != 3 || dls[0].Reason == "" {
		t.Fatalf("dead letters %+v, want user#bad's first record (3 attempts, with the reason) and its 3 later ones parked behind it", dls)
	}
	for _, dl := range dls[1:] {
		if dl.BlockedBehind != dls[0].SequenceNumber {
			t.Errorf("dead letter %s blocked behind %q, want %s", dl.SequenceNumber, dl.BlockedBehind, dls[0].SequenceNumber)
		}
	}

	// The view is repaired; the same re-drive as the long-running consumer's applies the
	// aggregate in order, and a record of it written afterwards is applied at once.
	f.mu.Lock()
	f.failing["user#bad"] = 0
	f.mu.Unlock()
	res, err := f.dlq.Redrive(ctx, deadletters.Filter{}, f.apply, 0)
	if err != nil || res.Applied != 4 {
		t.Fatalf("redrive %+v, %v", res, err)
	}
	f.put("user#bad", 5)
	if err := p.Settle(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := f.applied["user#bad"]; !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Errorf("user#bad applied %v, want 1..5", got)
	}
}

func TestARecordThatFailsOnceIsRetriedByTheMappingAndAppliedInOrder(t *testing.T) {
	f := newFixture(t)
	// Fails every try of the first invocation (3 tries), then works.
	f.failing["user#slow"] = 3
	for v := 1; v <= 5; v++ {
		f.put("user#slow", v)
		f.put("user#other", v)
	}
	b := esm.New(esm.Config{Labels: f.names.ParseCommands, DeadLetters: f.dlq, Handle: f.handler, MaxAttempts: 3, Backoff: time.Millisecond})
	p := f.player(b)
	if err := p.Settle(t.Context(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for _, agg := range []string{"user#slow", "user#other"} {
		if got := f.applied[agg]; !inOrder(got) || len(got) == 0 || got[len(got)-1] != 5 {
			t.Errorf("%s applied %v, want every version up to 5, in order", agg, got)
		}
	}
	if p.Invocations() < 2 {
		t.Errorf("%d invocations: the failed record was not reported for a retry", p.Invocations())
	}
	dls, err := f.dlq.List(t.Context(), deadletters.Filter{})
	if err != nil || len(dls) != 0 {
		t.Errorf("dead letters %v, %v; want none", dls, err)
	}
}

// A record its handler gives up (streams.GiveUp: keycloak-sync's tenant parked longer than
// it allows) becomes a dead letter at once, as in the long-running consumer, and the later
// records of its aggregate wait behind it there; other aggregates go on.
func TestARecordGivenUpIsADeadLetterAtOnce(t *testing.T) {
	f := newFixture(t)
	f.put("user#parked", 1)
	f.put("user#parked", 2)
	f.put("user#a", 1)
	var tries atomic.Int32
	handler := func(msg *message.Message) error {
		r, err := streams.DecodeRecord(msg)
		if err != nil {
			return err
		}
		if r.Aggregate == "user#parked" {
			tries.Add(1)
			streams.GiveUp(msg)
			return errors.New("tenant parked too long")
		}
		return f.apply(msg.Context(), r)
	}
	b := esm.New(esm.Config{Labels: f.names.ParseCommands, DeadLetters: f.dlq, Handle: handler, MaxAttempts: 5, Tries: 3, Backoff: time.Millisecond})
	if err := f.player(b).Settle(t.Context(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := tries.Load(); n != 1 {
		t.Errorf("the given-up record was tried %d times, want once", n)
	}
	dls, err := f.dlq.List(t.Context(), deadletters.Filter{})
	if err != nil || len(dls) != 2 || dls[0].BlockedBehind != "" || dls[1].BlockedBehind != dls[0].SequenceNumber {
		t.Fatalf("dead letters %+v (%v), want user#parked's first record and its second behind it", dls, err)
	}
	if got := f.applied["user#a"]; !slices.Equal(got, []int{1}) {
		t.Errorf("user#a applied %v, want [1]", got)
	}
}
