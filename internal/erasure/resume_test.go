package erasure_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/events"
)

// TestAPendingErasureIsResumedWithoutItsRecord: an erasure whose record got one bounded
// call (as in Lambda mode, where the record is then acknowledged) is carried on by the
// resume run alone, which skips it while it is not stalled; an erasure whose record never
// reached a projector is resumed by its id from its tombstone. Both end with the
// projector's places done, their pointers gone, and in the operator's pending list until
// the Keycloak sync's place is done too.
func TestAPendingErasureIsResumedWithoutItsRecord(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	row := st.tenant(t, "s", "r")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	first := st.erasee(t, row, erasuretest.Spec{Username: "first", History: 50, Groups: 2, Others: 200, At: at}, "00000000-0000-0000-0000-0000000000a1")
	lost := st.erasee(t, row, erasuretest.Spec{Username: "lost", History: 20, Groups: 1, At: at}, "00000000-0000-0000-0000-0000000000a2")
	reg := events.NewRegistry()

	tiny := erasure.NewEraser(st.db, st.names, st.tenants, reg, erasure.Options{Settle: time.Millisecond, Budget: time.Nanosecond})
	if again, err := tiny.Step(ctx, row.SystemID, row.TenantID, first); err != nil || again.IsZero() {
		t.Fatalf("first call: again %v, err %v; want more to do", again, err)
	}
	x := erasure.NewEraser(st.db, st.names, st.tenants, reg, erasure.Options{Settle: time.Millisecond})
	res, err := x.ResumePending(ctx, time.Hour)
	if err != nil || res.Resumed != 0 {
		t.Fatalf("a resume run for erasures stalled an hour took up one just worked on: %+v, %v", res, err)
	}
	res, err = x.ResumePending(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pending != 1 || res.Resumed != 1 || res.Finished != 1 {
		t.Errorf("resume run: %+v, want the one pending erasure resumed and finished", res)
	}
	// The lost one: no call yet, so no pointer and not in the stage's pending list.
	for again, calls := time.Now(), 0; !again.IsZero(); calls++ {
		if calls > 50 {
			t.Fatal("resume by id never finished")
		}
		time.Sleep(time.Until(again))
		if again, err = x.Resume(ctx, row.SystemID, row.TenantID, lost.ErasureID); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range []*events.UserErased{first, lost} {
		e, err := x.Ledger().Get(ctx, row.SystemID, row.TenantID, ev.ErasureID)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{commands.PlaceWriteModel, commands.PlaceReadModel, commands.PlaceIdempotency, commands.PlaceDeadLetters} {
			if e.Places[p] != "done" {
				t.Errorf("%s: place %s is %s", ev.User.Username, p, e.Places[p])
			}
		}
		out, err := st.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(row.CommandsTable), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": s("erasure#" + ev.ErasureID), "sk": s("erasure")}})
		if err != nil || out.Item != nil {
			t.Errorf("%s: the pointer is left: %v %v", ev.User.Username, out.Item, err)
		}
	}
	pending, err := x.Ledger().ListPending(ctx, row.SystemID, row.TenantID)
	if err != nil || len(pending) != 2 {
		t.Errorf("pending list: %d entries (%v), want both (Keycloak's place is left)", len(pending), err)
	}
	// The Keycloak sync's places done: the erasures are done, and the next run drops them.
	// (Resume by id listed the lost one as it started it.)
	for _, ev := range []*events.UserErased{first, lost} {
		if err := x.Ledger().MarkDone(ctx, row.SystemID, row.TenantID, ev.ErasureID, commands.PlaceKeycloak); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := x.ResumePending(ctx, 0); err != nil || res.Pending != 2 || res.Resumed != 0 {
		t.Fatalf("resume run: %+v, %v", res, err)
	}
	if res, err := x.ResumePending(ctx, 0); err != nil || res.Pending != 0 {
		t.Errorf("resume run after the erasure was done: %+v, %v; want it dropped from the list", res, err)
	}
}
