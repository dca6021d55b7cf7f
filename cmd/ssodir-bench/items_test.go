package main

import (
	"context"
	"crypto/rand"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/secrets"
)

// TestTheRawCreateWritesWhatACreateWrites: the create scenarios' raw baseline writes the
// items a create through the command store writes (the same keys, with the same
// attributes), so that their ratio compares like with like.
func TestTheRawCreateWritesWhatACreateWrites(t *testing.T) {
	ctx := context.Background()
	l, err := dynamotest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	db := l.DynamoDB()
	names := dynamo.Names{Prefix: "items"}
	tenant := commands.Tenant{System: "acme", ID: "raw"}
	service, raw := names.Commands(tenant.System, tenant.ID), "items_raw_commands"
	for _, table := range []string{service, raw} {
		if err := dynamo.CreateTable(ctx, db, dynamo.CommandsTable(table)); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secrets.NewLocal(key)
	if err != nil {
		t.Fatal(err)
	}
	store := dynamo.NewCommandStore(db, names, events.NewRegistry(), 0)
	create := commands.NewCreateUserHandler(commands.Deps{Store: store, Now: time.Now, NewID: uuid.NewString}, box)
	b := benchUser("svc", 1, time.Now().UTC().Truncate(time.Millisecond))
	u, err := create.Handle(ctx, tenant, commands.CreateUser{Username: b.Username, Email: b.Email, FirstName: b.FirstName,
		LastName: b.LastName, Attributes: b.Attributes}, commands.Meta{Actor: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.TransactWriteItems(ctx, createTransaction(raw, u)); err != nil {
		t.Fatal(err)
	}
	shapes := func(table string) map[string][]string {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][]string{}
		for _, it := range out.Items {
			m[dynamo.StringAttr(it, "id")+" "+dynamo.StringAttr(it, "sk")] = slices.Sorted(maps.Keys(it))
		}
		return m
	}
	got, want := shapes(raw), shapes(service)
	if len(want) != 5 {
		t.Errorf("a create wrote %d items, want 5: %v", len(want), slices.Sorted(maps.Keys(want)))
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("the raw baseline writes\n%v\na create writes\n%v", got, want)
	}
}
