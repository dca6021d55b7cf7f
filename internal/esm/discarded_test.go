package esm_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-lambda-go/events"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/lambdafn"
	"github.com/ssodir/ssodir/internal/streams"
)

// Records the mapping gives up on (a function that keeps failing past the mapping's
// retries) reach the failure destination; its consumer repairs the tenant through the
// consumer's gap repair and counts the alert; an unreadable message is dropped, counted.
func TestRecordsTheMappingGivesUpOnRepairTheirTenant(t *testing.T) {
	f := newFixture(t)
	f.put("user#a", 1)
	f.put("user#a", 2)
	b := esm.New(esm.Config{Labels: f.names.ParseCommands, DeadLetters: f.dlq, Handle: func(*message.Message) error { return nil }})
	// The function itself fails (before any record): ESM's retries run out.
	p := f.player(b)
	p.MaxRetries = 1
	p.Invoke = func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, errors.New("throttled")
	}
	if err := p.Settle(t.Context(), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	failures := p.Failures()
	if len(failures) == 0 {
		t.Fatal("the player gave nothing up")
	}

	var mu sync.Mutex
	var gaps []streams.Gap
	reg := prometheus.NewRegistry()
	rec, err := esm.NewRecovery(esm.Recovery{Consumer: "projector", Labels: f.names.ParseCommands,
		OnGap: func(_ context.Context, g streams.Gap) error {
			mu.Lock()
			defer mu.Unlock()
			gaps = append(gaps, g)
			return nil
		}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	for _, fl := range failures {
		ev.Records = append(ev.Records, fl.Message())
	}
	ev.Records = append(ev.Records, events.SQSMessage{MessageId: "junk", EventSource: "aws:sqs", Body: "not json"})
	payload, _ := json.Marshal(ev)
	out, err := (&lambdafn.Function{Discards: rec}).Invoke(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("answer %s (%v), want every message done", out, err)
	}
	if len(gaps) != len(failures) {
		t.Fatalf("%d repairs for %d batches given up", len(gaps), len(failures))
	}
	for _, g := range gaps {
		if g.Stream.System != "acme" || g.Stream.Tenant != "t1" || g.Stream.StreamARN != f.stream || g.Reason == "" {
			t.Errorf("repair of %+v, want tenant acme/t1 of the stream, with a reason", g)
		}
	}
	if n := testutil.ToFloat64(rec.Metric().WithLabelValues("projector", "acme", "t1")); int(n) != len(failures) {
		t.Errorf("ssodir_stream_records_discarded_total = %v, want %d", n, len(failures))
	}
	if n := testutil.ToFloat64(rec.Metric().WithLabelValues("projector", "", "")); n != 1 {
		t.Errorf("unreadable messages counted %v, want 1", n)
	}

	// A repair that fails sends its message back to the queue.
	failing, err := esm.NewRecovery(esm.Recovery{Consumer: "keycloak-sync", Labels: f.names.ParseCommands,
		OnGap: func(context.Context, streams.Gap) error { return errors.New("realm down") }}, reg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = failing.Handle(t.Context(), events.SQSEvent{Records: []events.SQSMessage{failures[0].Message()}})
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("a failed repair answered %+v, %v; want its message back", resp, err)
	}
}
