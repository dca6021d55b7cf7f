package projector_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/projector"
	"github.com/ssodir/ssodir/internal/streams"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

type fixture struct {
	names   dynamo.Names
	tenants *dynamo.Tenants
	handler *projector.Handler
	row     dynamo.Tenant
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	db := dynamotest.Current(t).DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("pj")}
	store := dynamo.NewTenantStore(db, names)
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	tenants := dynamo.NewTenants(db, names)
	row := dynamo.Tenant{SystemID: "s", TenantID: "t", Status: dynamo.TenantActive, CommandsTable: names.Commands("s", "t"),
		UsersTable: names.Users("s", "t", 0), ActivitiesTable: names.Activities("s", "t", 0)}
	if err := tenants.Put(ctx, row, 0); err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureTables(ctx, "s", "t"); err != nil {
		t.Fatal(err)
	}
	h := projector.NewHandler(tenants, projections.New(db, projections.Options{}), events.NewRegistry(), zap.NewNop())
	return &fixture{names: names, tenants: tenants, handler: h, row: row}
}

func userCreated(t *testing.T, username string) map[string]types.AttributeValue {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Millisecond)
	u := events.User{ID: "id-" + username, Username: username, IsActive: true, Version: 1, CreatedAt: at, UpdatedAt: at}
	item, err := dynamo.EncodeRecord(events.Envelope{EventID: "e-" + username, Type: events.UserCreatedType,
		SchemaVersion: events.SchemaVersion, Kind: events.KindUser, Key: username, Version: 1, Actor: "test",
		OccurredAt: at, Payload: &events.UserCreated{User: u}}, at, 0)
	if err != nil {
		t.Fatal(err)
	}
	return item
}

func record(event string, item map[string]types.AttributeValue, ttl bool) streams.Record {
	return streams.Record{System: "s", Tenant: "t", EventName: event, TTLDeletion: ttl,
		Keys: map[string]types.AttributeValue{"id": item["id"], "sk": item["sk"]}, NewImage: item, Aggregate: dynamo.StringAttr(item, "id")}
}

func TestHandlerProjectsOnlyNewHistoryRecords(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	db := dynamotest.Current(t).DynamoDB()
	get := func(username string) bool {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &f.row.UsersTable,
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "user#" + username}, "sk": &types.AttributeValueMemberS{Value: "config"}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item != nil
	}
	cases := []struct {
		name    string
		rec     streams.Record
		applied bool
	}{
		{"a new history record is projected", record(streams.EventInsert, userCreated(t, "new"), false), true},
		{"a TTL expiry of history is not a delete and projects nothing", record(streams.EventRemove, userCreated(t, "ttl"), true), false},
		{"a change of a state item projects nothing", record(streams.EventModify, map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: "user#state"}, "sk": &types.AttributeValueMemberS{Value: "config"}}, false), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := f.handler.Apply(ctx, c.rec); err != nil {
				t.Fatal(err)
			}
			user := dynamo.StringAttr(c.rec.Keys, "id")[len("user#"):]
			if got := get(user); got != c.applied {
				t.Errorf("projected: %v, want %v", got, c.applied)
			}
		})
	}
}

func TestHandlerAlsoWritesTheGenerationAReplayBuilds(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	targets, err := f.handler.Targets(ctx, "s", "t")
	if err != nil || len(targets) != 1 {
		t.Fatalf("before a replay: %v %v", targets, err)
	}
	row, _ := f.tenants.Get(ctx, "s", "t")
	row.NextUsersTable, row.NextActivitiesTable = "next_users", "next_activities"
	if err := f.tenants.Put(ctx, row, row.RowVersion); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // past the handler's table cache
	targets, err = f.handler.Targets(ctx, "s", "t")
	if err != nil || len(targets) != 2 || targets[1].Users != "next_users" {
		t.Fatalf("during a replay: %v %v", targets, err)
	}
}

func TestAGapMarksTheTenantForReplay(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.handler.OnGap(ctx, streams.Gap{Stream: streams.Stream{System: "s", Tenant: "t"}, ShardID: "shard-1", After: "42", Reason: "trimmed"}); err != nil {
		t.Fatal(err)
	}
	row, err := f.tenants.Get(ctx, "s", "t")
	if err != nil {
		t.Fatal(err)
	}
	if !row.ReplayNeeded || row.ReplayReason == "" {
		t.Fatalf("tenant not marked: %+v", row)
	}
}
