package esm_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/streams"
)

// batchOf is an ESM batch of one record per aggregate of the fixture's table.
func (f *fixture) batchOf(seq0 int, aggs ...string) events.DynamoDBEvent {
	var ev events.DynamoDBEvent
	for i, agg := range aggs {
		ev.Records = append(ev.Records, events.DynamoDBEventRecord{
			EventID: fmt.Sprint(seq0 + i), EventName: "INSERT", EventSourceArn: f.stream,
			Change: events.DynamoDBStreamRecord{
				SequenceNumber: fmt.Sprintf("%021d", seq0+i),
				Keys: map[string]events.DynamoDBAttributeValue{
					"id": events.NewStringAttribute(agg), "sk": events.NewStringAttribute("config#000001"),
				},
				NewImage: map[string]events.DynamoDBAttributeValue{
					"id": events.NewStringAttribute(agg), "sk": events.NewStringAttribute("config#000001"),
					"version": events.NewNumberAttribute("1"),
				},
			},
		})
	}
	return ev
}

// A batch reads the same from the dead-letter store whether it holds no dead letters or
// many (of other aggregates of the same table, each a large item): keyed reads of the
// batch's aggregates' markers and attempt counts, never a query of the table's dead letters.
func TestABatchReadsTheSameWithNoneOrManyDeadLetters(t *testing.T) {
	f := newFixture(t)
	counter := &dynamo.ReadMeter{Client: f.db}
	dl := deadletters.New(counter, f.names.DeadLetters(), "projector")
	b := esm.New(esm.Config{Labels: f.names.ParseCommands, DeadLetters: dl, Handle: f.handler, MaxAttempts: 3, Backoff: time.Millisecond})
	aggs := make([]string, 60)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("user#u%02d", i)
	}

	run := func(seq0 int) (int, float64) {
		t.Helper()
		counter.Take()
		resp, err := b.Handle(t.Context(), f.batchOf(seq0, aggs...))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch: %+v, %v", resp, err)
		}
		return counter.Take()
	}
	callsEmpty, unitsEmpty := run(1000)

	// Many dead letters of other aggregates, each with a large record.
	big := strings.Repeat("x", 30<<10)
	store := deadletters.New(f.db, f.names.DeadLetters(), "projector")
	const many = 400
	var wg sync.WaitGroup
	errs := make(chan error, many)
	for i := range many {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agg := fmt.Sprintf("user#dead%03d", i/2)
			rec := streams.Record{System: "acme", Tenant: "t1", Table: f.table, StreamARN: f.stream, Aggregate: agg,
				SequenceNumber: fmt.Sprint(100 + i), NewImage: map[string]types.AttributeValue{"pad": &types.AttributeValueMemberS{Value: big}}}
			errs <- store.Add(context.Background(), rec, 3, "broken", "")
		}()
		if i%16 == 15 {
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n, err := store.List(t.Context(), deadletters.Filter{}); err != nil || len(n) != many {
		t.Fatalf("stored %d dead letters (%v), want %d", len(n), err, many)
	}

	callsMany, unitsMany := run(2000)
	if callsMany != callsEmpty || unitsMany != unitsEmpty {
		t.Errorf("a batch read %d times (%.1f units) with %d dead letters stored, %d times (%.1f units) with none",
			callsMany, unitsMany, many, callsEmpty, unitsEmpty)
	}
	// 60 aggregates: a marker and an attempt count each, 100 keys per BatchGetItem.
	if callsEmpty != 2 {
		t.Errorf("a batch of 60 aggregates made %d reads, want 2 BatchGetItem calls", callsEmpty)
	}
}

// A record that failed in an earlier invocation and is then applied loses its count, so a
// later failure of a redelivery of it starts from one again; a failure that says "later"
// (the handler parked its tenant) is not counted at all.
func TestAttemptCountsGoWhenTheRecordIsApplied(t *testing.T) {
	f := newFixture(t)
	b := esm.New(esm.Config{Labels: f.names.ParseCommands, DeadLetters: f.dlq, Handle: f.handler, MaxAttempts: 3, Tries: 1, Backoff: time.Millisecond})
	ev := f.batchOf(5000, "user#flaky")
	agg := deadletters.Aggregate{System: "acme", Tenant: "t1", Table: f.table, Aggregate: "user#flaky"}
	count := func() int {
		st, err := f.dlq.Lookup(t.Context(), f.stream, []deadletters.Aggregate{agg})
		if err != nil {
			t.Fatal(err)
		}
		return st.Attempts[agg].N
	}
	f.failing["user#flaky"] = 2
	for range 2 {
		if resp, err := b.Handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 1 {
			t.Fatalf("failing invocation: %+v, %v", resp, err)
		}
	}
	if n := count(); n != 2 {
		t.Fatalf("count after two failed invocations = %d, want 2", n)
	}
	if resp, err := b.Handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("working invocation: %+v, %v", resp, err)
	}
	if n := count(); n != 0 {
		t.Fatalf("count after the record was applied = %d, want none", n)
	}
	// Redelivered later (a record before it failed), it fails twice more: not a dead letter.
	f.failing["user#flaky"] = 2
	for range 2 {
		if resp, err := b.Handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 1 {
			t.Fatalf("failing invocation: %+v, %v", resp, err)
		}
	}
	if dls, err := f.dlq.List(t.Context(), deadletters.Filter{}); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters %+v (%v): an old count made the record a dead letter early", dls, err)
	}
}

func TestAFailureThatAsksForLaterIsNotAnAttempt(t *testing.T) {
	f := newFixture(t)
	handler := func(msg *message.Message) error {
		streams.Park(msg, time.Now().Add(time.Millisecond))
		return errors.New("realm unavailable")
	}
	b := esm.New(esm.Config{Labels: f.names.ParseCommands, DeadLetters: f.dlq, Handle: handler, MaxAttempts: 2, Tries: 1, Backoff: time.Millisecond})
	ev := f.batchOf(7000, "user#waiting")
	for range 5 {
		if resp, err := b.Handle(t.Context(), ev); err != nil || len(resp.BatchItemFailures) != 1 {
			t.Fatalf("invocation: %+v, %v", resp, err)
		}
	}
	if dls, err := f.dlq.List(t.Context(), deadletters.Filter{}); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters %+v (%v): parked deliveries were counted as attempts", dls, err)
	}
	agg := deadletters.Aggregate{System: "acme", Tenant: "t1", Table: f.table, Aggregate: "user#waiting"}
	st, err := f.dlq.Lookup(t.Context(), f.stream, []deadletters.Aggregate{agg})
	if err != nil || st.Attempts[agg].N != 0 {
		t.Fatalf("attempts %+v (%v), want none counted", st.Attempts, err)
	}
}
