package erasure_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/projections"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// stage is a stage's shared tables on DynamoDB Local, with tenants made on demand.
type stage struct {
	db      *dynamodb.Client
	names   dynamo.Names
	tenants *dynamo.Tenants
}

func newStage(t *testing.T) *stage {
	t.Helper()
	db := dynamotest.Current(t).DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("er")}
	if err := dynamo.EnsureSharedTables(context.Background(), db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	return &stage{db: db, names: names, tenants: dynamo.NewTenants(db, names)}
}

func (st *stage) tenant(t *testing.T, system, tenant string) dynamo.Tenant {
	t.Helper()
	ctx := context.Background()
	row := dynamo.Tenant{SystemID: system, TenantID: tenant, Status: dynamo.TenantActive, CommandsTable: st.names.Commands(system, tenant),
		UsersTable: st.names.Users(system, tenant, 0), ActivitiesTable: st.names.Activities(system, tenant, 0)}
	if err := st.tenants.Put(ctx, row, 0); err != nil {
		t.Fatal(err)
	}
	if err := dynamo.NewTenantStore(st.db, st.names).EnsureTables(ctx, system, tenant); err != nil {
		t.Fatal(err)
	}
	return row
}

// erasee seeds a user erased by the command (tombstone, user.erased record, ledger entry),
// their read side, Idempotency-Key records naming them, and other people; it returns the
// user.erased record's content.
func (st *stage) erasee(t *testing.T, row dynamo.Tenant, spec erasuretest.Spec, erasureID string) *events.UserErased {
	t.Helper()
	ctx := context.Background()
	seeded, err := erasuretest.Seed(ctx, st.db, row.CommandsTable, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := projections.New(st.db, projections.Options{}).ApplyBatch(ctx,
		projections.Tables{Users: row.UsersTable, Activities: row.ActivitiesTable}, seeded.Envelopes); err != nil {
		t.Fatal(err)
	}
	u := seeded.User
	ev := &events.UserErased{User: events.User{Username: u.Username, Version: u.Version + 1}, PreviousID: u.ID, Groups: nil, ErasureID: erasureID}
	rec, err := dynamo.EncodeRecord(events.Envelope{EventID: "erase-" + u.Username, Type: events.UserErasedType, SchemaVersion: events.SchemaVersion,
		Kind: events.KindUser, Key: u.Username, Version: u.Version + 1, Actor: "dpo", OccurredAt: spec.At, Payload: ev}, spec.At, 0)
	if err != nil {
		t.Fatal(err)
	}
	put := func(table string, it map[string]types.AttributeValue) {
		t.Helper()
		if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	put(row.CommandsTable, rec)
	put(row.CommandsTable, map[string]types.AttributeValue{"id": s(dynamo.UserID(u.Username)), "sk": s(dynamo.SKConfig),
		"erasure_id": s(erasureID), "version": &types.AttributeValueMemberN{Value: fmt.Sprint(u.Version + 1)}})
	for i := range 3 {
		put(st.names.Idempotency(), map[string]types.AttributeValue{"key": s(fmt.Sprintf("%s/%s/k%d", row.SystemID, row.TenantID, i)),
			"agg_key": s(u.Username), "kind": s(string(events.KindUser))})
		put(st.names.Idempotency(), map[string]types.AttributeValue{"key": s(fmt.Sprintf("%s/%s/o%d", row.SystemID, row.TenantID, i)),
			"agg_key": s("someone-else"), "kind": s(string(events.KindUser))})
	}
	lp, err := dynamo.ErasureLedgerPut(st.names.Erasures(), row.SystemID, row.TenantID, commands.Erasure{ID: erasureID, RequestedAt: spec.At,
		Actor: "dpo", Reason: "request", UserIDHashes: []string{identity.ErasedIDHash(u.ID)}, Places: commands.ErasurePlaces})
	if err != nil {
		t.Fatal(err)
	}
	put(st.names.Erasures(), lp.Item)
	return ev
}

// unindexed makes row a tenant from before the member index: its write table has no mark.
func (st *stage) unindexed(t *testing.T, row dynamo.Tenant) {
	t.Helper()
	_, err := st.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(row.CommandsTable), Key: dynamo.MemberIndexMarkKey()})
	if err != nil {
		t.Fatal(err)
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// contents is every item of a table, as sorted JSON lines.
func (st *stage) contents(t *testing.T, table string) []string {
	t.Helper()
	var out []string
	p := dynamodb.NewScanPaginator(st.db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			var m map[string]any
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				t.Fatal(err)
			}
			// When the view was written (the seed's projection, per tenant): not the erasure's.
			delete(m, "updated_at")
			b, _ := json.Marshal(m)
			out = append(out, string(b))
		}
	}
	sort.Strings(out)
	return out
}

// run calls Step until nothing is left for the projector, waiting when it asks; it
// answers the calls and the largest number of segments a Scan was cut into.
func run(t *testing.T, st *stage, x *erasure.Eraser, row dynamo.Tenant, ev *events.UserErased) (calls, segs int) {
	t.Helper()
	ctx := context.Background()
	for calls = 1; calls < 10000; calls++ {
		again, err := x.Step(ctx, row.SystemID, row.TenantID, ev)
		if err != nil {
			t.Fatalf("call %d: %v", calls, err)
		}
		if e, err := x.Ledger().Get(ctx, row.SystemID, row.TenantID, ev.ErasureID); err == nil {
			segs = max(segs, e.Progress.Segs)
		}
		if again.IsZero() {
			return calls, segs
		}
		time.Sleep(time.Until(again))
	}
	t.Fatal("the erasure never finished")
	return 0, 0
}

// TestAnErasureWithATinyBudgetFinishesOverManyCallsWithTheSameResult: with a budget that
// ends every call at its first safe point, an erasure goes on call after call from the
// position it keeps in the ledger (a Scan segment by segment, in tenants from before the
// member index), finishes, and leaves the tables as an erasure done in one go leaves them.
func TestAnErasureWithATinyBudgetFinishesOverManyCallsWithTheSameResult(t *testing.T) {
	st := newStage(t)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := erasuretest.Spec{Username: "erasee", History: 200, Groups: 5, Others: 2500, At: at}
	tiny, whole := st.tenant(t, "s", "tiny"), st.tenant(t, "s", "whole")
	// Tenants from before the member index: the erasure Scans their write tables.
	st.unindexed(t, tiny)
	st.unindexed(t, whole)
	evTiny := st.erasee(t, tiny, spec, "00000000-0000-0000-0000-000000000001")
	evWhole := st.erasee(t, whole, spec, "00000000-0000-0000-0000-000000000002")
	reg := events.NewRegistry()

	x := erasure.NewEraser(st.db, st.names, st.tenants, reg, erasure.Options{Settle: time.Millisecond, Budget: time.Nanosecond})
	calls, segs := run(t, st, x, tiny, evTiny)
	if segs < 2 {
		t.Errorf("the write table's Scan was cut into %d segments, want several", segs)
	}
	if calls < segs+5 {
		t.Errorf("the erasure took %d calls with a budget of 1ns, want one at least per segment and phase (%d segments)", calls, segs)
	}
	y := erasure.NewEraser(st.db, st.names, st.tenants, reg, erasure.Options{Settle: time.Millisecond})
	wholeCalls, _ := run(t, st, y, whole, evWhole)
	t.Logf("tiny budget: %d calls (%d segments); default budget: %d calls", calls, segs, wholeCalls)

	for _, tables := range [][2]string{{tiny.CommandsTable, whole.CommandsTable}, {tiny.UsersTable, whole.UsersTable}, {tiny.ActivitiesTable, whole.ActivitiesTable}} {
		a, b := st.contents(t, tables[0]), st.contents(t, tables[1])
		if len(a) != len(b) {
			t.Errorf("%s holds %d items, %s %d", tables[0], len(a), tables[1], len(b))
			continue
		}
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s differs from %s:\n%s\n%s", tables[0], tables[1], a[i], b[i])
				break
			}
		}
		for _, it := range a {
			if contains(it, `"erasee"`) || contains(it, "user#erasee") || contains(it, "erasee@") {
				t.Errorf("%s still names the person: %s", tables[0], it)
			}
		}
	}
	for _, it := range st.contents(t, st.names.Idempotency()) {
		if contains(it, `"agg_key":"erasee"`) {
			t.Errorf("an Idempotency-Key record of the person is left: %s", it)
		}
	}
	ctx := context.Background()
	for _, c := range []struct {
		row dynamo.Tenant
		id  string
	}{{tiny, evTiny.ErasureID}, {whole, evWhole.ErasureID}} {
		e, err := x.Ledger().Get(ctx, c.row.SystemID, c.row.TenantID, c.id)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range commands.ErasurePlaces {
			if want := map[bool]string{true: "pending", false: "done"}[p == commands.PlaceKeycloak]; e.Places[p] != want {
				t.Errorf("%s: place %s is %s, want %s", c.row.TenantID, p, e.Places[p], want)
			}
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
