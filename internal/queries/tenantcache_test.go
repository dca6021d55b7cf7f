package queries

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// countingDB passes every call on to DynamoDB Local and counts the GetItem calls per table.
type countingDB struct {
	DB
	mu   sync.Mutex
	gets map[string]int
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.mu.Lock()
	c.gets[aws.ToString(in.TableName)]++
	c.mu.Unlock()
	return c.DB.GetItem(ctx, in, opts...)
}

func (c *countingDB) count(table string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets[table]
}

func TestTenantReadsDoNotGrowWithTenants(t *testing.T) {
	ctx := t.Context()
	db := &countingDB{gets: map[string]int{}}
	svc, f := fixture(t, db, Options{TenantTTL: time.Second})
	db.DB = f.DB
	c := &clock{now: time.Now()}
	svc.tenants.now = c.Now
	config := f.Names.Config()
	rows := dynamo.NewTenants(f.DB, f.Names)
	const n = 60
	ids := []string{"eu"}
	for i := range n - 1 {
		id := fmt.Sprintf("t%02d", i)
		ids = append(ids, id)
		if err := rows.Put(ctx, dynamo.Tenant{SystemID: "acme", TenantID: id, Status: dynamo.TenantActive,
			UsersTable: "u-" + id, ActivitiesTable: "a-" + id}, 0); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func() {
		t.Helper()
		for range 3 {
			for _, id := range ids {
				if _, err := svc.Tenant(ctx, "acme", id); err != nil {
					t.Fatalf("tenant %s: %v", id, err)
				}
			}
		}
	}
	readAll()
	if got := db.count(config); got != n+1 {
		t.Fatalf("first round: %d reads of %s, want %d (each row once, and the marker)", got, config, n+1)
	}
	for round := range 5 {
		c.Add(time.Second)
		before := db.count(config)
		readAll()
		if got := db.count(config) - before; got != 1 {
			t.Fatalf("round %d: %d reads for %d tenants read 3 times each, want 1 (the marker)", round+2, got, n)
		}
	}

	t.Run("a status change is seen within a round", func(t *testing.T) {
		if err := f.SetStatus(ctx, dynamo.TenantProvisioning); err != nil {
			t.Fatal(err)
		}
		c.Add(time.Second)
		got, err := svc.Tenant(ctx, "acme", "eu")
		if err != nil || got.Status != dynamo.TenantProvisioning {
			t.Fatalf("after a round: %+v %v, want provisioning", got, err)
		}
		if err := f.SetStatus(ctx, dynamo.TenantActive); err != nil {
			t.Fatal(err)
		}
	})

	// A replay's start and switch, written as the projector writes them: on the row alone.
	update := func(id, expr string, values map[string]types.AttributeValue) {
		t.Helper()
		if _, err := f.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(config),
			Key:                       map[string]types.AttributeValue{"system_id": str("acme"), "tenant_id": str(id)},
			UpdateExpression:          aws.String(expr),
			ExpressionAttributeValues: values,
		}); err != nil {
			t.Fatal(err)
		}
	}
	usersTable := func(id string) string {
		t.Helper()
		tb, err := svc.tables(ctx, "acme", id)
		if err != nil {
			t.Fatal(err)
		}
		return tb.users
	}
	t.Run("a switch the marker does not announce is seen within MaxTenantAge", func(t *testing.T) {
		c.Add(time.Second) // a round that has seen every earlier change
		usersTable("t00")
		update("t00", "SET users_table = :u", map[string]types.AttributeValue{":u": str("u-t00-r1")})
		c.Add(time.Second)
		if got := usersTable("t00"); got != "u-t00" {
			t.Fatalf("a round later: %s, want the cached u-t00 (the test would prove nothing)", got)
		}
		c.Add(MaxTenantAge)
		if got := usersTable("t00"); got != "u-t00-r1" {
			t.Fatalf("after MaxTenantAge: %s, want u-t00-r1", got)
		}
	})
	t.Run("a switch after a seen replay start is seen within a round", func(t *testing.T) {
		update("t01", "SET next_users_table = :n", map[string]types.AttributeValue{":n": str("u-t01-r1")})
		c.Add(MaxTenantAge)
		usersTable("t01") // the row now names a replay under way
		update("t01", "SET users_table = :u REMOVE next_users_table", map[string]types.AttributeValue{":u": str("u-t01-r1")})
		c.Add(time.Second)
		if got := usersTable("t01"); got != "u-t01-r1" {
			t.Fatalf("a round after the switch: %s, want u-t01-r1", got)
		}
	})
	t.Run("a replay's switch announces itself and is seen within a round", func(t *testing.T) {
		c.Add(time.Second)
		usersTable("t02") // cached, no replay under way
		if err := rows.StartReplay(ctx, "acme", "t02", "u-t02-r1", "a-t02-r1", 1); err != nil {
			t.Fatal(err)
		}
		if err := rows.SwitchTables(ctx, "acme", "t02", "u-t02-r1", "a-t02-r1", 1); err != nil {
			t.Fatal(err)
		}
		c.Add(time.Second)
		if got := usersTable("t02"); got != "u-t02-r1" {
			t.Fatalf("a round after the switch: %s, want u-t02-r1", got)
		}
	})
	t.Run("an unknown tenant is read once per miss time", func(t *testing.T) {
		before := db.count(config)
		for range 10 {
			if _, err := svc.Tenant(ctx, "acme", "nope"); apperr.KindOf(err) != apperr.KindNotFound {
				t.Fatalf("%v, want not found", err)
			}
		}
		if got := db.count(config) - before; got > 2 {
			t.Fatalf("%d reads for 10 requests for an unknown tenant, want at most 2 (the row, and a round's marker)", got)
		}
	})
}
