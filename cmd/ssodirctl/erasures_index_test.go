package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// TestErasuresIndexMembers: `erasures index-members` backfills the member index of a
// tenant from before it (a group record without its index item, no mark) to the end,
// with its progress; `--status` says where it stands; an unknown tenant is not found.
func TestErasuresIndexMembers(t *testing.T) {
	local := servicetest.Local(t)
	ctx := context.Background()
	db := local.DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("ctlmi")}
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	row := dynamo.Tenant{SystemID: "acme", TenantID: "eu", Status: dynamo.TenantActive, CommandsTable: names.Commands("acme", "eu"),
		UsersTable: names.Users("acme", "eu", 0), ActivitiesTable: names.Activities("acme", "eu", 0)}
	if err := dynamo.NewTenants(db, names).Put(ctx, row, 0); err != nil {
		t.Fatal(err)
	}
	if err := dynamo.NewTenantStore(db, names).EnsureTables(ctx, "acme", "eu"); err != nil {
		t.Fatal(err)
	}
	table := aws.String(row.CommandsTable)
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: dynamo.MemberIndexMarkKey()}); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	env := events.Envelope{EventID: "e1", Type: events.GroupMemberAddedType, SchemaVersion: events.SchemaVersion, Kind: events.KindGroup,
		Key: "staff", Version: 2, Actor: "admin", OccurredAt: at,
		Payload: &events.GroupMemberAdded{Group: events.Group{ID: "gid", Key: "staff", Name: "staff", Version: 2, CreatedAt: at, UpdatedAt: at},
			Username: "ann", UserID: "id-ann", MembershipRev: 1}}
	rec, err := dynamo.EncodeRecord(env, at, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: rec}); err != nil {
		t.Fatal(err)
	}
	c := &ctl{t: t, env: map[string]string{"SSODIR_SYSTEM": "acme", "SSODIR_TENANT": "eu", "SSO_TABLE_PREFIX": names.Prefix}}
	for _, kv := range local.Env() {
		k, v, _ := strings.Cut(kv, "=")
		c.env[k] = v
		t.Setenv(k, v) // the SDK reads its credentials from the process's environment
	}
	if out := c.ok("erasures", "index-members", "--status"); out != "acme/eu: member index not started\n" {
		t.Errorf("index-members --status before: %q", out)
	}
	r := c.run("", "erasures", "index-members")
	if r.code != 0 || r.out != "acme/eu: member index complete\n" {
		t.Fatalf("index-members: exit %d, %q, %q", r.code, r.out, r.errOut)
	}
	if !strings.Contains(r.errOut, "acme/eu: segment 1 of 1 done, 1 group records indexed (1 index items)") {
		t.Errorf("index-members showed no progress: %q", r.errOut)
	}
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": dynamo.MemberIndexItem("id-ann", "staff", 2)["id"], "sk": dynamo.MemberIndexItem("id-ann", "staff", 2)["sk"]}})
	if err != nil || got.Item == nil {
		t.Fatalf("the record's index item: %v, %v", got, err)
	}
	if out := c.ok("erasures", "index-members", "--status"); out != "acme/eu: member index complete\n" {
		t.Errorf("index-members --status after: %q", out)
	}
	c.env["SSODIR_TENANT"] = "nowhere"
	c.fails(exitNotFound, "erasures", "index-members")
}
