package projector_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/streams"
)

// faultyDB is DynamoDB Local with one fault: fail, when set, an update of the ledger that
// marks a place done.
type faultyDB struct {
	*dynamodb.Client
	ledger    string
	failPlace atomic.Value // string: the place whose marking fails once
}

var errInjected = errors.New("injected: the ledger's update did not land")

func (d *faultyDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if p, _ := d.failPlace.Load().(string); p != "" && aws.ToString(in.TableName) == d.ledger {
		for _, n := range in.ExpressionAttributeNames {
			if n == p {
				d.failPlace.Store("")
				return nil, errInjected
			}
		}
	}
	return d.Client.UpdateItem(ctx, in, opts...)
}

// commandWorld runs commands against a tenant's command log and projects its records.
type commandWorld struct {
	*fixture
	db      *dynamodb.Client
	deps    commands.Deps
	tenant  commands.Tenant
	applied map[string]bool
}

func newCommandWorld(t *testing.T) *commandWorld {
	f := newFixture(t)
	db := dynamotest.Current(t).DynamoDB()
	reg := events.NewRegistry()
	return &commandWorld{fixture: f, db: db, tenant: commands.Tenant{System: "s", ID: "t"}, applied: map[string]bool{},
		deps: commands.Deps{Store: dynamo.NewCommandStore(db, f.names, reg, 0), Now: time.Now, NewID: uuid.NewString}}
}

func (w *commandWorld) meta() commands.Meta {
	return commands.Meta{Actor: "test", CommandID: uuid.NewString(), CorrelationID: "c"}
}

// erasing makes the world's handler carry out erasures and filter erased users' records,
// settling in a millisecond, and answers its eraser.
func (w *commandWorld) erasing() *erasure.Eraser {
	x := erasure.NewEraser(w.db, w.names, w.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond})
	w.handler.Erase(x, erasure.NewFilter(erasure.NewLedger(w.db, w.names), time.Millisecond))
	return x
}

// newRecords are the history records of the log not delivered yet, in order per aggregate.
func (w *commandWorld) newRecords(t *testing.T) []streams.Record {
	t.Helper()
	out, err := w.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(w.row.CommandsTable), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var items []map[string]types.AttributeValue
	for _, it := range out.Items {
		k := dynamo.StringAttr(it, "event_id") // a key may come again, with another incarnation
		if dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) && !w.applied[k] {
			w.applied[k] = true
			items = append(items, it)
		}
	}
	slices.SortFunc(items, func(a, b map[string]types.AttributeValue) int {
		return strings.Compare(dynamo.StringAttr(a, "id")+"/"+dynamo.StringAttr(a, "sk"), dynamo.StringAttr(b, "id")+"/"+dynamo.StringAttr(b, "sk"))
	})
	recs := make([]streams.Record, 0, len(items))
	for _, it := range items {
		recs = append(recs, record(streams.EventInsert, it, false))
	}
	return recs
}

// project delivers the new records to the projector.
func (w *commandWorld) project(t *testing.T) {
	t.Helper()
	for _, r := range w.newRecords(t) {
		if err := w.handler.Apply(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *commandWorld) get(t *testing.T, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func idsk(id, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}}
}

// TestARerunErasureLeavesTheNextUserOfTheNameWhole: the second pass frees the name, and
// the ledger's update after it does not land; a new user takes the name, and user.erased
// is delivered again: the new user keeps their write model, view, membership and feed,
// and the erasure ends done. (The Keycloak sync's part of the same case:
// keycloaksync.TestErasureDeletesTheKeycloakUserButNeverALaterOneOfTheName.)
func TestARerunErasureLeavesTheNextUserOfTheNameWhole(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	db := &faultyDB{Client: w.db, ledger: w.names.Erasures()}
	x := erasure.NewEraser(db, w.names, w.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond})
	w.handler.Erase(x, erasure.NewFilter(erasure.NewLedger(w.db, w.names), time.Millisecond))

	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "ann", Email: "ann.old@example.org", FirstName: "Old"}, w.meta())))
	must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "ann"}, w.meta())))
	w.project(t)

	erasureID := uuid.NewString()
	must(t, second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "ann", Reason: "a request", ErasureID: erasureID}, w.meta())))
	recs := w.newRecords(t)
	var erased streams.Record
	for _, r := range recs {
		if dynamo.StringAttr(r.NewImage, "event_type") == string(events.UserErasedType) {
			erased = r
		}
	}
	if erased.NewImage == nil {
		t.Fatal("no user.erased record")
	}
	// The second pass deletes the tombstone; marking the write model done then fails.
	db.failPlace.Store(commands.PlaceWriteModel)
	var failed bool
	for _, r := range recs {
		if err := w.handler.Apply(ctx, r); err != nil {
			if r.NewImage == nil || !errors.Is(err, errInjected) {
				t.Fatal(err)
			}
			failed = true
		}
	}
	if !failed {
		t.Fatal("the injected fault never struck: the test proves nothing")
	}

	// The name is free: a new ann is created, joins the group, and is projected.
	newID := ""
	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "ann", Email: "ann.new@example.org", FirstName: "New"}, w.meta())))
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "ann"}, w.meta())))
	w.project(t)
	agg, err := w.deps.Store.LoadUser(ctx, w.tenant, "ann")
	if err != nil || !agg.Live() {
		t.Fatalf("the new ann: %+v, %v", agg, err)
	}
	newID = agg.State.ID
	if v := w.get(t, w.row.UsersTable, idsk("user#ann", dynamo.SKConfig)); dynamo.StringAttr(v, "user_id") != newID {
		t.Fatalf("the new ann's view before the re-run is %v", v)
	}

	// user.erased delivered again (the stream's retry, a lease handover, a re-drive).
	if err := w.handler.Apply(ctx, erased); err != nil {
		t.Fatal(err)
	}
	e, err := x.Ledger().Get(ctx, "s", "t", erasureID)
	if err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
		t.Fatalf("erasure %+v, %v: want the write model done", e, err)
	}

	agg, err = w.deps.Store.LoadUser(ctx, w.tenant, "ann")
	if err != nil || !agg.Live() || agg.State.ID != newID || agg.State.Email != "ann.new@example.org" {
		t.Errorf("the new ann's write model after the re-run: %+v, %v", agg.State, err)
	}
	if v := w.get(t, w.row.CommandsTable, idsk("user#ann", dynamo.HistorySK(agg.State.Version))); v == nil {
		t.Errorf("the new ann's latest history record is gone")
	}
	if v := w.get(t, w.row.UsersTable, idsk("user#ann", dynamo.SKConfig)); dynamo.StringAttr(v, "user_id") != newID {
		t.Errorf("the new ann's view is %v", v)
	}
	if m := w.get(t, w.row.UsersTable, idsk("group#g", dynamo.MemberSK("ann"))); m == nil || m["member_id"] == nil {
		t.Errorf("the new ann's membership of g is %v", m)
	}
	if p := w.get(t, w.row.UsersTable, idsk("user#ann", dynamo.GroupPointerSK("g"))); p == nil {
		t.Errorf("the new ann's group pointer is gone")
	}
	out, err := w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(w.row.ActivitiesTable), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK("user:ann")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) == 0 {
		t.Errorf("the new ann's feed is gone")
	}
	for _, it := range out.Items {
		if strings.Contains(dynamo.StringAttr(it, "changes"), "Old") {
			t.Errorf("the erased ann's feed item is left: %v", it)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// must fails the test at once on err.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
