package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

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

// configItem mirrors the command store's user `config` item (internal/dynamo userItem);
// checkShapes compares the two on every run.
type configItem struct {
	ID                   string              `dynamodbav:"id"`
	SK                   string              `dynamodbav:"sk"`
	Type                 string              `dynamodbav:"type"`
	UserID               string              `dynamodbav:"user_id,omitempty"`
	Username             string              `dynamodbav:"username"`
	Email                string              `dynamodbav:"email,omitempty"`
	FirstName            string              `dynamodbav:"first_name,omitempty"`
	LastName             string              `dynamodbav:"last_name,omitempty"`
	IsActive             bool                `dynamodbav:"is_active"`
	Attributes           map[string][]string `dynamodbav:"attributes,omitempty"`
	Password             string              `dynamodbav:"password,omitempty"`
	Version              int64               `dynamodbav:"version"`
	CreatedAt            string              `dynamodbav:"created_at"`
	UpdatedAt            string              `dynamodbav:"updated_at"`
	Deleted              bool                `dynamodbav:"deleted"`
	DeletedMembershipRev int64               `dynamodbav:"deleted_membership_rev"`
	CleanupPending       bool                `dynamodbav:"cleanup_pending,omitempty"`
	SSOType              string              `dynamodbav:"sso_type"`
}

func userConfig(u events.User) item {
	it, err := attributevalue.MarshalMap(configItem{
		ID: dynamo.UserID(u.Username), SK: dynamo.SKConfig, Type: "user", UserID: u.ID, Username: u.Username,
		Email: u.Email, FirstName: u.FirstName, LastName: u.LastName, IsActive: u.IsActive, Attributes: u.Attributes,
		Version: u.Version, CreatedAt: dynamo.FormatTime(u.CreatedAt), UpdatedAt: dynamo.FormatTime(u.UpdatedAt), SSOType: "keycloak",
	})
	if err != nil {
		panic(err) // a fixed struct of strings, numbers and maps always marshals
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

func emailGuard(u events.User) item {
	return item{"id": s("email#" + u.Email), "sk": s("guard"), "username": s(u.Username)}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue  { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }

// createTransaction is what the command store writes for a create (without an
// Idempotency-Key, as the bench sends none): the config conditioned on absence, the
// history record, and the email guard.
func createTransaction(table string, u events.User) *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(table), Item: userConfig(u), ConditionExpression: aws.String("attribute_not_exists(id)")}},
		{Put: &types.Put{TableName: aws.String(table), Item: history(userCreated(u)), ConditionExpression: aws.String("attribute_not_exists(sk)")}},
		{Put: &types.Put{TableName: aws.String(table), Item: emailGuard(u),
			ConditionExpression:       aws.String("attribute_not_exists(id) OR username = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": s(u.Username)}}},
	}}
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

// groupConfig mirrors the command store's group `config` item (internal/dynamo groupItem).
func groupConfig(g events.Group) item {
	return item{"id": s(dynamo.GroupID(g.Key)), "sk": s(dynamo.SKConfig), "type": s("group"), "group_id": s(g.ID),
		"key": s(g.Key), "name": s(g.Name), "description": s(g.Description), "version": n(g.Version),
		"created_at": s(dynamo.FormatTime(g.CreatedAt)), "updated_at": s(dynamo.FormatTime(g.UpdatedAt)),
		"deleted": &types.AttributeValueMemberBOOL{Value: false}, "last_deleted_version": n(0), "sso_type": s("keycloak")}
}

// memberItem mirrors the command store's membership item in a group's partition.
func memberItem(e *events.GroupMemberAdded, version int64) item {
	return item{"id": s(dynamo.GroupID(e.Group.Key)), "sk": s(dynamo.MemberSK(e.Username)), "member_id": s(e.Username),
		"user_id": s(e.UserID), "membership_rev": n(e.MembershipRev), "group_version": n(version),
		"added_at": s(dynamo.FormatTime(e.Group.UpdatedAt))}
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

// checkShapes compares the attribute names of a user's items as the command store wrote
// them with those the raw baseline writes, so that a change to the store's items cannot
// leave the baseline measuring something else.
func checkShapes(ctx context.Context, db *dynamodb.Client, serviceTable, rawTable string, serviceUser, rawUser events.User) error {
	for _, sk := range []string{dynamo.SKConfig, dynamo.HistorySK(1)} {
		var names [2][]string
		for i, k := range []struct{ table, user string }{{serviceTable, serviceUser.Username}, {rawTable, rawUser.Username}} {
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(k.table), ConsistentRead: aws.Bool(true),
				Key: item{"id": s(dynamo.UserID(k.user)), "sk": s(sk)}})
			if err != nil {
				return err
			}
			if out.Item == nil {
				return fmt.Errorf("shape check: %s/%s missing in %s", k.user, sk, k.table)
			}
			names[i] = slices.Sorted(maps.Keys(out.Item))
		}
		if !slices.Equal(names[0], names[1]) {
			return fmt.Errorf("the raw baseline's %s item differs from the command store's: store has [%s], baseline [%s]; update cmd/ssodir-bench/items.go",
				sk, strings.Join(names[0], " "), strings.Join(names[1], " "))
		}
	}
	return nil
}
