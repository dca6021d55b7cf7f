package main

import (
	"context"
	"fmt"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/streams"
)

// deadLetterCount is how many dead letters the deadletters scenario stores (full: the
// issue's 100,000).
func deadLetterCount(sc scale) int {
	switch sc.Name {
	case "full":
		return 100000
	case "small":
		return 10000
	}
	return 200
}

// benchDeadLetters measures what a Lambda-mode batch (internal/esm) reads of the
// dead-letter store before it applies anything, with the store holding 100,000 dead
// letters of the tenant's table (other aggregates, 2 KB records) against holding none.
// The figures are counts, not times: they do not depend on the machine.
func benchDeadLetters(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	e, err := b.newEnv(ctx, sc.FreshDB)
	if err != nil {
		return nil, err
	}
	defer e.close()
	spec := dynamo.StreamTables(e.names.StreamLeases(), e.names.DeadLetters())[1]
	if err := dynamo.EnsureTable(ctx, e.db, spec); err != nil {
		return nil, err
	}
	n := deadLetterCount(sc)
	r := &result{
		Name: fmt.Sprintf("dead-letter reads of a batch of 100 records (50 aggregates), %s dead letters stored", quantity(n)),
		Unit: "reads", BaselineUnit: "reads",
		What:         fmt.Sprintf("esm.Batch.Handle with %s dead letters of %s other aggregates of the same table stored; reads_per_batch counts its GetItem, BatchGetItem and Query calls (DynamoDB Local reports no consumed capacity for BatchGetItem: the calls are the figure)", quantity(n), quantity(n/2)),
		BaselineWhat: "the same batch with no dead letter stored",
		Notes:        []string{"ratio 1 is the goal: a marker per blocked aggregate, read by key, answers \"is it blocked?\""},
		Target:       &target{Of: "ratios", Key: "reads_per_batch", Max: ptr(1.0)},
	}
	system, tenant := benchSystem, benchTenant
	table := e.names.Commands(system, tenant)
	arn := "arn:aws:dynamodb:local:000000000000:table/" + table + "/stream/bench"
	counter := &dynamo.ReadMeter{Client: e.db}
	dl := deadletters.New(counter, e.names.DeadLetters(), "projector")
	batch := esm.New(esm.Config{Labels: e.names.ParseCommands, DeadLetters: dl, Handle: func(*message.Message) error { return nil }})
	measure := func(seq0 int) (map[string]float64, error) {
		var ev events.DynamoDBEvent
		for i := range 100 {
			agg := fmt.Sprintf("user#live%02d", i%50)
			ev.Records = append(ev.Records, events.DynamoDBEventRecord{EventID: fmt.Sprint(seq0 + i), EventName: "MODIFY", EventSourceArn: arn,
				Change: events.DynamoDBStreamRecord{SequenceNumber: fmt.Sprintf("%021d", seq0+i),
					Keys: map[string]events.DynamoDBAttributeValue{"id": events.NewStringAttribute(agg), "sk": events.NewStringAttribute("config")}}})
		}
		counter.Take()
		resp, err := batch.Handle(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			return nil, fmt.Errorf("batch: %+v, %v", resp, err)
		}
		calls, _ := counter.Take()
		return map[string]float64{"reads_per_batch": float64(calls)}, nil
	}
	var empty []map[string]float64
	for rep := range sc.Reps {
		m, err := measure(1_000_000 + rep*1000)
		if err != nil {
			return nil, err
		}
		empty = append(empty, m)
	}
	b.logf("   storing %s dead letters", quantity(n))
	store := deadletters.New(e.db, e.names.DeadLetters(), "projector")
	pad := make([]byte, 2<<10)
	for i := range pad {
		pad[i] = 'x'
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := range n {
		g.Go(func() error {
			rec := streams.Record{System: system, Tenant: tenant, Table: table, StreamARN: arn, Aggregate: fmt.Sprintf("user#dead%06d", i/2),
				SequenceNumber: fmt.Sprint(10_000 + i), EventName: streams.EventModify,
				NewImage: map[string]types.AttributeValue{"pad": &types.AttributeValueMemberS{Value: string(pad)}}}
			return store.Add(gctx, rec, 3, "bench", "")
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for rep := range sc.Reps {
		m, err := measure(2_000_000 + rep*1000)
		if err != nil {
			return nil, err
		}
		r.add(m, empty[rep])
	}
	return []*result{r}, nil
}

func ptr[T any](v T) *T { return &v }
