package projector_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
)

// TestAResumedErasureOfAllIncarnationsTakesThemAll: in Lambda mode a user.erased record
// gets one bounded call and the resume task does the rest, without the record (from the
// erasure's pointer and ledger entry). An erasure asked with all_incarnations, whose calls
// each stop at their first safe point, still takes every earlier incarnation under the
// name: the resumed calls erase what the request asked for, not only the last one.
func TestAResumedErasureOfAllIncarnationsTakesThemAll(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := erasure.NewEraser(w.db, w.names, w.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond, Budget: time.Nanosecond})
	w.handler.Erase(x, erasure.NewFilter(erasure.NewLedger(w.db, w.names), time.Millisecond))
	w.handler.DetachErasures()
	var ids []string
	for _, first := range []string{"Firstpersonbob", "Secondpersonbob"} {
		u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "bob", FirstName: first}, w.meta())
		must(t, err)
		ids = append(ids, u.ID)
		if first == "Firstpersonbob" {
			must(t, second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: "bob"}, w.meta())))
		}
	}
	w.project(t)

	id := uuid.NewString()
	must(t, second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "bob", Reason: "a request", ErasureID: id, AllIncarnations: true}, w.meta())))
	w.project(t) // the record's one call
	for calls := 0; ; calls++ {
		e, err := x.Ledger().Get(ctx, "s", "t", id)
		must(t, err)
		if e.Places[commands.PlaceWriteModel] == dynamo.ErasureStatusDone {
			break
		}
		if calls > 1000 {
			t.Fatalf("the erasure is not done after %d runs of the resume task: %+v", calls, e)
		}
		// What the resume task (and `ssodirctl erasures resume`) calls for one erasure.
		again, err := x.Resume(ctx, "s", "t", id)
		must(t, err)
		time.Sleep(time.Until(again))
	}

	for _, table := range []string{w.row.CommandsTable, w.row.UsersTable, w.row.ActivitiesTable} {
		out, err := w.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		must(t, err)
		for _, it := range out.Items {
			for k, v := range it {
				s, ok := v.(*types.AttributeValueMemberS)
				if !ok {
					continue
				}
				for _, gone := range []string{"Firstpersonbob", "Secondpersonbob", ids[0], ids[1], "user#bob", "user:bob"} {
					if strings.Contains(s.Value, gone) {
						t.Errorf("%s: %s = %q is left after the erasure of all incarnations", table, k, s.Value)
					}
				}
			}
		}
	}
}
