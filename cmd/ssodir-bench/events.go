package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// The events scenario's feed: eventsChanges changes of eventsAggregates users, each about
// as large as a user.updated CloudEvent.
const (
	eventsChanges    = 10_000
	eventsAggregates = 500
	// eventsPage is GET /events' largest limit.
	eventsPage = 500
)

// benchEvents measures reading the change feed (docs/events.md): a walk of a tenant's whole
// feed through changefeed.Reader.Read, the code behind GET /events (the head read first, the
// cursor never past it), against a raw DynamoDB Query of the same items (the same key range,
// page size and consistency), walked the same way. The two walks alternate within every
// repetition, so that both see the same state of the machine. Target: the feed's
// throughput at least 0.8 of the raw Query's.
//
// Then the end-to-end latency of a webhook at 100 changes/s (benchWebhookLatency). The
// latency to GET /events and to the EventBridge double is not measured yet.
func benchEvents(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	walk, err := benchEventsWalk(ctx, b, sc)
	if err != nil {
		return nil, err
	}
	hook, err := benchWebhookLatency(ctx, b, sc)
	if err != nil {
		return nil, fmt.Errorf("webhook latency: %w", err)
	}
	return []*result{walk, hook}, nil
}

func benchEventsWalk(ctx context.Context, b *bench, sc scale) (*result, error) {
	e, err := b.newEnv(ctx, false)
	if err != nil {
		return nil, err
	}
	defer e.close()
	changes, aggregates := eventsChanges, eventsAggregates
	switch sc.Name {
	case "small":
		changes, aggregates = eventsChanges/10, eventsAggregates/10
	case "tiny":
		changes, aggregates = 300, 20
	}
	table := changefeed.TableName(e.names)
	if err := dynamo.EnsureTable(ctx, e.db, changefeed.Table(table)); err != nil {
		return nil, err
	}
	t := time.Now()
	if err := seedFeed(ctx, e.db, table, changes, aggregates); err != nil {
		return nil, err
	}
	b.logf("   seeded a feed of %d changes of %d users in %.0fs", changes, aggregates, time.Since(t).Seconds())

	reader := changefeed.NewReader(e.db, table, changefeed.DefaultRetention, nil)
	walkFeed := func(ctx context.Context) (int, error) {
		n, from := 0, changefeed.Position{}
		for {
			page, err := reader.Read(ctx, benchSystem, benchTenant, from, eventsPage)
			if err != nil {
				return 0, err
			}
			n += len(page.Events)
			if len(page.Events) == 0 {
				return n, nil
			}
			from = page.Next
		}
	}
	walkRaw := func(ctx context.Context) (int, error) {
		in := &dynamodb.QueryInput{
			TableName: aws.String(table), ConsistentRead: aws.Bool(true), Limit: aws.Int32(eventsPage),
			KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk":   &types.AttributeValueMemberS{Value: "feed#" + benchSystem + "/" + benchTenant},
				":from": &types.AttributeValueMemberS{Value: fmt.Sprintf("p#%020d", 1)},
				":to":   &types.AttributeValueMemberS{Value: fmt.Sprintf("p#%020d", changes)},
			},
		}
		n := 0
		for {
			out, err := e.db.Query(ctx, in)
			if err != nil {
				return 0, err
			}
			for _, it := range out.Items {
				// What the feed answers: the event's JSON, as it is stored.
				if _, ok := it["event"].(*types.AttributeValueMemberS); ok {
					n++
				}
			}
			if out.LastEvaluatedKey == nil {
				return n, nil
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	r := &result{
		Name: fmt.Sprintf("events feed walk, %s changes", quantity(changes)), Unit: "changes/s", BaselineUnit: "changes/s",
		What:         fmt.Sprintf("changefeed.Reader.Read in-process (GET /events' code: head, then Query), pages of %d, the whole feed", eventsPage),
		BaselineWhat: "raw DynamoDB Query of the same items (same key range, page size, strong consistency), the whole feed",
		Target:       &target{Of: "ratios", Key: "per_s", Min: ptr(0.8)},
		Notes:        []string{"per_s is changes read a second, the median of the repetition's alternating walks (each goes first in every other pair)"},
	}
	walks := max(sc.Reps, 1) * 3
	for range sc.Reps {
		var feed, raw []float64
		for i := range walks {
			pair := []struct {
				walk func(context.Context) (int, error)
				into *[]float64
			}{{walkFeed, &feed}, {walkRaw, &raw}}
			if i%2 == 1 {
				// Either goes first as often: the second of a pair reads what the first
				// just brought into DynamoDB Local's caches.
				pair[0], pair[1] = pair[1], pair[0]
			}
			for _, w := range pair {
				start := time.Now()
				n, err := w.walk(ctx)
				if err != nil {
					return nil, err
				}
				if n != changes {
					return nil, fmt.Errorf("a walk read %d changes of %d", n, changes)
				}
				*w.into = append(*w.into, float64(n)/time.Since(start).Seconds())
			}
		}
		r.add(map[string]float64{"per_s": middle(feed)}, map[string]float64{"per_s": middle(raw)})
	}
	return r, nil
}

// seedFeed appends changes to the bench tenant's feed through the appender, as the
// projector does, from several writers at once (its group commit).
func seedFeed(ctx context.Context, db *dynamodb.Client, table string, changes, aggregates int) error {
	a := changefeed.NewAppender(db, table, changefeed.Options{Retention: changefeed.DefaultRetention})
	pad := strings.Repeat("x", 600)
	var wg sync.WaitGroup
	errs := make(chan error, aggregates)
	for g := range aggregates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agg := fmt.Sprintf("user-%05d", g)
			for v := int64(1); int(v-1)*aggregates+g < changes; v++ {
				ev, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": fmt.Sprintf("%s-%d", agg, v),
					"source": changefeed.Source(benchSystem, benchTenant), "type": "io.ssodir.user.updated", "subject": "user:" + agg,
					"time": time.Now().UTC(), "datacontenttype": "application/json",
					"data": map[string]any{"id": agg, "version": v, "actor": "bench", "changes": map[string]any{"first_name": map[string]any{"old": "A", "new": "B"}},
						"state": map[string]any{"id": agg, "username": agg, "version": v, "attributes": map[string]any{"note": []string{pad}}}}})
				if err := a.Append(ctx, changefeed.Change{System: benchSystem, Tenant: benchTenant, Aggregate: agg, Version: v, Event: ev}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// middle is the median of xs.
func middle(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
