package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// item is one DynamoDB item.
type item = map[string]types.AttributeValue

var (
	firstNames = []string{"Ann", "Ben", "Carla", "David", "Eva", "Felix", "Greta", "Hugo", "Ida", "Jonas",
		"Karin", "Lars", "Maja", "Nils", "Olga", "Paul", "Rita", "Sven", "Tina", "Uwe"}
	lastNames = []string{"Smith", "Smythe", "Schmidt", "Schneider", "Jones", "Johnson", "Jansen", "Miller",
		"Meyer", "Martin", "Brown", "Braun", "Becker", "Bauer", "Wilson", "Wagner", "Weber", "Walker",
		"Taylor", "Thomas", "Hoffmann", "Hall", "Klein", "King", "Wolf"}
	departments = []string{"eng", "sales", "support", "finance", "legal"}
)

// benchUser is the i-th user under a username prefix, with the fields a typical admin tool
// sends (about 0.5 KB as a config item).
func benchUser(prefix string, i int, at time.Time) events.User {
	name := fmt.Sprintf("%s%07d", prefix, i)
	return events.User{
		ID: uuid.NewString(), Username: name, Email: name + "@bench.example.com",
		FirstName: firstNames[i%len(firstNames)], LastName: lastNames[(i/len(firstNames))%len(lastNames)],
		IsActive: true, Attributes: map[string][]string{"dept": {departments[i%len(departments)]}, "cost_center": {fmt.Sprintf("cc-%04d", i%1000)}},
		Version: 1, CreatedAt: at, UpdatedAt: at,
	}
}

// createBody is the command API body that creates u.
func createBody(u events.User) []byte {
	b, _ := json.Marshal(map[string]any{"username": u.Username, "email": u.Email, "first_name": u.FirstName,
		"last_name": u.LastName, "attributes": u.Attributes})
	return b
}

// userConfig is the command store's user `config` item (dynamo's codec, the one the store
// writes), for the raw baseline and for seeding.
func userConfig(u events.User) item { return must(dynamo.UserConfigItem(u, "", false)) }

// must is an item of dynamo's codec, which fails only on values the bench never builds.
func must(it item, err error) item {
	if err != nil {
		panic(err)
	}
	return it
}

// envelope is an event of u as the command API records it for the bootstrap token.
func envelope(u events.User, changes map[string]events.Change, p events.Payload) events.Envelope {
	return events.Envelope{
		EventID: uuid.NewString(), Type: p.EventType(), SchemaVersion: events.SchemaVersion, Kind: events.KindUser,
		Key: u.Username, Version: u.Version, Actor: "bootstrap", CommandID: uuid.NewString(), CorrelationID: uuid.NewString(),
		OccurredAt: u.UpdatedAt, Changes: changes, Payload: p,
	}
}

func userCreated(u events.User) events.Envelope {
	return envelope(u, map[string]events.Change{
		"email": {New: u.Email}, "first_name": {New: u.FirstName}, "last_name": {New: u.LastName},
		"is_active": {New: u.IsActive}, "attributes": {New: u.Attributes},
	}, &events.UserCreated{User: u})
}

// renamed is u with the next version and another first name, and its event.
func renamed(u events.User, at time.Time) (events.User, events.Envelope) {
	next := u
	next.Version, next.UpdatedAt = u.Version+1, at
	next.FirstName = firstNames[(indexOf(firstNames, u.FirstName)+1)%len(firstNames)]
	return next, envelope(next, map[string]events.Change{"first_name": {Old: u.FirstName, New: next.FirstName}}, &events.UserUpdated{User: next})
}

func indexOf(list []string, s string) int { return max(0, slices.Index(list, s)) }

func history(e events.Envelope) item {
	it, err := dynamo.EncodeRecord(e, time.Now(), 0)
	if err != nil {
		panic(err) // payloads of internal/events always encode
	}
	return it
}

func emailGuard(u events.User) item { return dynamo.EmailGuardItem(u.Email, u.Username) }

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue  { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }

// createTransaction is what the command store writes for a create (without an
// Idempotency-Key, as the bench sends none): the config conditioned on absence, the
// history record, the email guard, the lookups and the count of live users.
func createTransaction(table string, u events.User) *dynamodb.TransactWriteItemsInput {
	items := []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: userConfig(u), ConditionExpression: aws.String("attribute_not_exists(id)")}},
		{Put: &types.Put{TableName: aws.String(table), Item: history(userCreated(u)), ConditionExpression: aws.String("attribute_not_exists(sk)")}},
		{Put: &types.Put{TableName: aws.String(table), Item: emailGuard(u),
			ConditionExpression:       aws.String("attribute_not_exists(id) OR username = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": s(u.Username)}}},
	}
	// The lookups by id (and external id) that the SCIM port reads, written by every create.
	for _, l := range commands.UserLookups(u) {
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: dynamo.LookupItem(l)}})
	}
	// And the count of live users, which SCIM's totalResults reads.
	items = append(items, dynamo.LiveCountItems(table, commands.UserLookups(u), nil)...)
	return &dynamodb.TransactWriteItemsInput{TransactItems: items}
}

// updateTransaction is what the command store writes for a profile update that keeps the
// email: the config conditioned on the version read, and the history record.
func updateTransaction(table string, next events.User, e events.Envelope) *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: userConfig(next), ConditionExpression: aws.String("version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": n(next.Version - 1)}}},
		{Put: &types.Put{TableName: aws.String(table), Item: history(e), ConditionExpression: aws.String("attribute_not_exists(sk)")}},
	}}
}

// batchWrite writes items with conc parallel BatchWriteItem calls of 25.
func batchWrite(ctx context.Context, db *dynamodb.Client, table string, conc int, items []item) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(conc)
	for chunk := range slices.Chunk(items, 25) {
		reqs := make([]types.WriteRequest, len(chunk))
		for i, it := range chunk {
			reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
		}
		g.Go(func() error { return dynamo.BatchWrite(ctx, db, table, reqs) })
	}
	return g.Wait()
}

// seedUsers writes users straight into a command table, as the command store would have
// after creating them: config, history record and email guard of each.
func seedUsers(ctx context.Context, db *dynamodb.Client, table string, users []events.User) error {
	items := make([]item, 0, 3*len(users))
	for _, u := range users {
		items = append(items, userConfig(u), history(userCreated(u)), emailGuard(u))
	}
	return batchWrite(ctx, db, table, 8, items)
}

// groupConfig is the command store's group `config` item.
func groupConfig(g events.Group) item { return must(dynamo.GroupConfigItem(g, false, nil)) }

// memberItem is the command store's membership item in a group's partition.
func memberItem(e *events.GroupMemberAdded, version int64) item {
	return dynamo.MemberItem(e.Group.Key, e.Username, e.UserID, e.MembershipRev, version, dynamo.FormatTime(e.Group.UpdatedAt))
}

// seedWriteModel writes the write model the events of seedDirectory leave behind: the
// users' and groups' config items and the memberships, which a reconcile re-checks its
// actions against.
func seedWriteModel(ctx context.Context, db *dynamodb.Client, table string, es []events.Envelope) error {
	groups := map[string]events.Group{}
	var items []item
	for _, e := range es {
		switch p := e.Payload.(type) {
		case *events.UserCreated:
			items = append(items, userConfig(p.User))
		case *events.GroupCreated:
			groups[p.Group.Key] = p.Group
		case *events.GroupMemberAdded:
			groups[p.Group.Key] = p.Group
			items = append(items, memberItem(p, e.Version))
		}
	}
	for _, g := range groups {
		items = append(items, groupConfig(g))
	}
	return batchWrite(ctx, db, table, 8, items)
}
