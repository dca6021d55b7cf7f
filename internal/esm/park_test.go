package esm_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-lambda-go/events"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/mappings"
	"github.com/ssodir/ssodir/internal/streams"
)

// An invocation whose handler parks its tenant (a hung realm) for an hour returns the
// batch at once instead of waiting the park out inside the invocation, which would hold one
// of the function's concurrent executions — shared by every tenant — for the whole park.
// ESM sends the batch again without waiting; before its retries run out, the record
// becomes a dead letter of ours (re-driven once the realm answers), never a discard.
func TestAParkedRecordIsReturnedAtOnceAndKeptBeforeESMGivesUp(t *testing.T) {
	f := newFixture(t)
	const park = time.Hour
	var calls atomic.Int64
	handler := func(msg *message.Message) error {
		calls.Add(1)
		streams.Park(msg, time.Now().Add(park))
		return errors.New("keycloak realm does not answer")
	}
	b := esm.New(esm.Config{Labels: f.names.ParseCommands, DeadLetters: f.dlq, Handle: handler, MaxAttempts: 2})
	ev := f.batchOf(8000, "user#held")
	invoke := func() events.DynamoDBEventResponse {
		t.Helper()
		type answer struct {
			resp events.DynamoDBEventResponse
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			resp, err := b.Handle(t.Context(), ev)
			done <- answer{resp, err}
		}()
		// Far within the park: an invocation that waits for the park's end is still waiting.
		select {
		case a := <-done:
			if a.err != nil {
				t.Fatal(a.err)
			}
			return a.resp
		case <-time.After(park / 60):
			t.Fatalf("the invocation is still waiting out its tenant's %v park after %v (handler called %d times)", park, park/60, calls.Load())
			return events.DynamoDBEventResponse{}
		}
	}
	for i := 1; i < mappings.MaximumRetryAttempts-1; i++ {
		if resp := invoke(); len(resp.BatchItemFailures) != 1 {
			t.Fatalf("invocation %d: %+v, want the parked record returned", i, resp)
		}
		if dls, err := f.dlq.List(t.Context(), deadletters.Filter{}); err != nil || len(dls) != 0 {
			t.Fatalf("invocation %d: dead letters %+v (%v), want none yet", i, dls, err)
		}
	}
	if n := calls.Load(); n != int64(mappings.MaximumRetryAttempts-2) {
		t.Fatalf("handler called %d times in %d invocations: a parked record is tried once per invocation", n, mappings.MaximumRetryAttempts-2)
	}
	// The invocation before ESM's last retry keeps the record as a dead letter.
	if resp := invoke(); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("last invocation: %+v, want the record kept as a dead letter", resp)
	}
	dls, err := f.dlq.List(t.Context(), deadletters.Filter{})
	if err != nil || len(dls) != 1 || dls[0].Aggregate != "user#held" {
		t.Fatalf("dead letters %+v (%v), want the parked record", dls, err)
	}
	agg := deadletters.Aggregate{System: "acme", Tenant: "t1", Table: f.table, Aggregate: "user#held"}
	if st, err := f.dlq.Lookup(t.Context(), f.stream, []deadletters.Aggregate{agg}); err != nil || st.Attempts[agg] != (deadletters.Attempt{}) {
		t.Fatalf("attempts %+v (%v), want the count forgotten", st.Attempts, err)
	}
}
