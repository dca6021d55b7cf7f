package projector_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/streams"
)

// TestRecordsOfAnErasedUserWriteNothing: a record of an erased user applied after the
// erasure (read from the stream late, redelivered, or re-driven from the dead letters)
// writes nothing about them; a group record naming them projects the group's version with
// an erased member and no membership.
func TestRecordsOfAnErasedUserWriteNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	db := dynamotest.Current(t).DynamoDB()
	put, err := dynamo.ErasureLedgerPut(f.names.Erasures(), "s", "t", commands.Erasure{ID: "00000000-0000-0000-0000-000000000001",
		RequestedAt: time.Now(), Actor: "dpo", Reason: "request", UserIDHashes: []string{identity.ErasedIDHash("id-ghost")}, Places: commands.ErasurePlaces})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item}); err != nil {
		t.Fatal(err)
	}
	// The first pass writes an item per erased id, which the filter reads.
	if err := erasure.NewLedger(db, f.names).IndexIDHashes(ctx, "s", "t", "00000000-0000-0000-0000-000000000001",
		[]string{identity.ErasedIDHash("id-ghost")}); err != nil {
		t.Fatal(err)
	}
	filter := erasure.NewFilter(erasure.NewLedger(db, f.names), time.Millisecond)
	f.handler.Erase(erasure.NewEraser(db, f.names, f.tenants, events.NewRegistry(), erasure.Options{Filter: filter}), filter)

	get := func(table, id, sk string) map[string]types.AttributeValue {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	for _, u := range []string{"ghost", "alive"} {
		if err := f.handler.Apply(ctx, record(streams.EventInsert, userCreated(t, u), false)); err != nil {
			t.Fatal(err)
		}
	}
	if get(f.row.UsersTable, "user#ghost", "config") != nil {
		t.Error("a late record of the erased user was projected")
	}
	if get(f.row.UsersTable, "user#alive", "config") == nil {
		t.Error("another user's record was not projected")
	}

	at := time.Now().UTC().Truncate(time.Millisecond)
	g := events.Group{ID: "gid", Key: "g", Name: "G", Version: 2, CreatedAt: at, UpdatedAt: at}
	item, err := dynamo.EncodeRecord(events.Envelope{EventID: "e-g2", Type: events.GroupMembersChangedType, SchemaVersion: events.SchemaVersion,
		Kind: events.KindGroup, Key: "g", Version: 2, Actor: "test", OccurredAt: at,
		Payload: &events.GroupMembersChanged{Group: g, Added: []events.Member{
			{Username: "ghost", UserID: "id-ghost", MembershipRev: 1}, {Username: "alive", UserID: "id-alive", MembershipRev: 1}}}}, at, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.handler.Apply(ctx, record(streams.EventInsert, item, false)); err != nil {
		t.Fatal(err)
	}
	if view := get(f.row.UsersTable, "group#g", "config"); view == nil || dynamo.StringAttr(view, "name") != "G" {
		t.Errorf("the group's view is %v", view)
	}
	for id, sk := range map[string]string{"group#g": "member#ghost", "user#ghost": "group#g"} {
		if it := get(f.row.UsersTable, id, sk); it != nil {
			t.Errorf("%s/%s written for the erased member: %v", id, sk, it)
		}
	}
	if get(f.row.UsersTable, "group#g", "member#alive") == nil {
		t.Error("the other member's membership is missing")
	}
	out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(f.row.ActivitiesTable), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "entity#group:g"}}})
	if err != nil {
		t.Fatal(err)
	}
	var feed []string
	for _, it := range out.Items {
		feed = append(feed, dynamo.StringAttr(it, "changes"))
	}
	joined := strings.Join(feed, " ")
	if len(feed) != 2 || strings.Contains(joined, "ghost") || !strings.Contains(joined, `{"erased":true}`) || !strings.Contains(joined, "alive") {
		t.Errorf("group feed %v: want one item per member, the erased one without a name", feed)
	}
}
