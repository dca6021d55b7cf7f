package erasure_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/events"
)

// TestItemsWrittenInThePartitionAfterTheFirstPassGoWithTheName: the first pass deletes
// the items of the user's write-model partition it read at its start (it does not read
// the partition again); an item of the person written there after it (a late members
// change's group pointer) goes with the second pass's release of the name, which leaves
// nothing of the partition.
func TestItemsWrittenInThePartitionAfterTheFirstPassGoWithTheName(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	row := st.tenant(t, "s", "late")
	ev := st.erasee(t, row, erasuretest.Spec{Username: "erasee", History: 60, Groups: 3, Others: 100, At: at}, "00000000-0000-0000-0000-000000000007")
	x := erasure.NewEraser(st.db, st.names, st.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond})

	partition := func() []string {
		t.Helper()
		out, err := st.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(row.CommandsTable), ConsistentRead: aws.Bool(true),
			KeyConditionExpression:    aws.String("id = :id"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": s(dynamo.UserID("erasee"))}})
		if err != nil {
			t.Fatal(err)
		}
		var sks []string
		for _, it := range out.Items {
			sks = append(sks, it["sk"].(*types.AttributeValueMemberS).Value)
		}
		return sks
	}
	groups, err := x.FirstPass(ctx, row, erasure.NewSubject("erasee", ev.PreviousID), ev.ErasureID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sks := partition(); len(sks) != 1 || sks[0] != dynamo.SKConfig {
		t.Fatalf("after the first pass the partition holds %v, want the tombstone alone", sks)
	}
	if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(row.CommandsTable), Item: map[string]types.AttributeValue{
		"id": s(dynamo.UserID("erasee")), "sk": s("group#late"), "user_id": s(ev.PreviousID)}}); err != nil {
		t.Fatal(err)
	}
	if err := x.SecondPass(ctx, row, erasure.NewSubject("erasee"), ev.ErasureID, groups); err != nil {
		t.Fatal(err)
	}
	if sks := partition(); len(sks) != 0 {
		t.Fatalf("after the second pass the partition holds %v, want nothing", sks)
	}
}
