package memberindex_test

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/memberindex"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// world is a stage's shared tables and one tenant on DynamoDB Local, written through the
// command handlers and the real store: the live path, which writes the member index.
type world struct {
	t       *testing.T
	db      *dynamodb.Client
	names   dynamo.Names
	tenants *dynamo.Tenants
	row     dynamo.Tenant
	tenant  commands.Tenant
	deps    commands.Deps
	reg     *events.Registry
}

func newWorld(t *testing.T, tenant string) *world {
	t.Helper()
	ctx := context.Background()
	db := dynamotest.Current(t).DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("mi")}
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	tenants := dynamo.NewTenants(db, names)
	row := dynamo.Tenant{SystemID: "s", TenantID: tenant, Status: dynamo.TenantActive, CommandsTable: names.Commands("s", tenant),
		UsersTable: names.Users("s", tenant, 0), ActivitiesTable: names.Activities("s", tenant, 0)}
	if err := tenants.Put(ctx, row, 0); err != nil {
		t.Fatal(err)
	}
	if err := dynamo.NewTenantStore(db, names).EnsureTables(ctx, "s", tenant); err != nil {
		t.Fatal(err)
	}
	reg := events.NewRegistry()
	store := dynamo.NewCommandStore(db, names, reg, 0)
	return &world{t: t, db: db, names: names, tenants: tenants, row: row, tenant: commands.Tenant{System: "s", ID: tenant},
		deps: commands.Deps{Store: store, Now: time.Now, NewID: uuid.NewString}, reg: reg}
}

func (w *world) meta() commands.Meta {
	return commands.Meta{Actor: "admin", CommandID: uuid.NewString()}
}

func (w *world) must(what string, err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

func (w *world) user(name string) (id string) {
	w.t.Helper()
	u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(context.Background(), w.tenant,
		commands.CreateUser{Username: name, Email: name + "@example.org", FirstName: "First" + name, LastName: "Last" + name}, w.meta())
	w.must("create user "+name, err)
	return u.ID
}

func (w *world) group(name string) {
	w.t.Helper()
	_, err := commands.NewCreateGroupHandler(w.deps).Handle(context.Background(), w.tenant, commands.CreateGroup{Name: name}, w.meta())
	w.must("create group "+name, err)
}

func (w *world) add(group, user string) {
	w.t.Helper()
	_, err := commands.NewAddMemberHandler(w.deps).Handle(context.Background(), w.tenant, commands.AddMember{Group: group, Username: user}, w.meta())
	w.must("add "+user+" to "+group, err)
}

func (w *world) change(group string, add, remove []string) {
	w.t.Helper()
	_, err := commands.NewChangeMembersHandler(w.deps).Handle(context.Background(), w.tenant,
		commands.ChangeMembers{Group: group, Add: add, Remove: remove}, w.meta())
	w.must("change the members of "+group, err)
}

func (w *world) remove(group, user string) {
	w.t.Helper()
	_, err := commands.NewRemoveMemberHandler(w.deps).Handle(context.Background(), w.tenant, commands.RemoveMember{Group: group, Username: user}, w.meta())
	w.must("remove "+user+" from "+group, err)
}

func (w *world) rename(group, to string) {
	w.t.Helper()
	_, err := commands.NewRenameGroupHandler(w.deps).Handle(context.Background(), w.tenant, commands.RenameGroup{Name: group, NewName: to}, w.meta())
	w.must("rename "+group, err)
}

// items are the write table's items whose partition begins with prefix, as lines.
func (w *world) items(prefix string) []string {
	w.t.Helper()
	var out []string
	in := &dynamodb.ScanInput{TableName: aws.String(w.row.CommandsTable), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(id, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(prefix)}}
	p := dynamodb.NewScanPaginator(w.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		w.must("scan", err)
		for _, it := range page.Items {
			out = append(out, line(it))
		}
	}
	slices.Sort(out)
	return out
}

func line(it map[string]types.AttributeValue) string {
	var parts []string
	for _, k := range []string{"id", "sk", "group_key", "version"} {
		switch v := it[k].(type) {
		case *types.AttributeValueMemberS:
			parts = append(parts, v.Value)
		case *types.AttributeValueMemberN:
			parts = append(parts, v.Value)
		default:
			parts = append(parts, "")
		}
	}
	return strings.Join(parts, " ")
}

// index is the member index: the items of every member's id, the pending marks, and
// whether the table carries the mark.
func (w *world) index() (items, pending []string, marked bool) {
	w.t.Helper()
	items = w.items("memberidx#")
	pending = w.items(dynamo.MemberIndexPending)
	out, err := w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.row.CommandsTable),
		Key: dynamo.MemberIndexMarkKey(), ConsistentRead: aws.Bool(true)})
	w.must("read the mark", err)
	return items, pending, out.Item != nil
}

// fromRecords is the index the live path writes for the group records the table holds
// now: dynamo.MemberIndexItems of each.
func (w *world) fromRecords() []string {
	w.t.Helper()
	var out []string
	in := &dynamodb.ScanInput{TableName: aws.String(w.row.CommandsTable), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(id, :g) AND begins_with(sk, :h)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": s("group#"), ":h": s("config#")}}
	p := dynamodb.NewScanPaginator(w.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		w.must("scan", err)
		for _, it := range page.Items {
			env, err := dynamo.DecodeRecord(w.reg, it)
			w.must("decode", err)
			for _, item := range dynamo.MemberIndexItems(env) {
				out = append(out, line(item))
			}
		}
	}
	slices.Sort(out)
	return out
}

// strip makes the tenant one from before the member index: its items, pending marks
// and mark deleted, its group records kept.
func (w *world) strip() {
	w.t.Helper()
	in := &dynamodb.ScanInput{TableName: aws.String(w.row.CommandsTable), ConsistentRead: aws.Bool(true),
		FilterExpression: aws.String("begins_with(id, :p)"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("memberidx")}}
	p := dynamodb.NewScanPaginator(w.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		w.must("scan", err)
		for _, it := range page.Items {
			_, err := w.db.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(w.row.CommandsTable),
				Key: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}})
			w.must("delete", err)
		}
	}
	if items, pending, marked := w.index(); len(items)+len(pending) > 0 || marked {
		w.t.Fatalf("the index is still there: %d items, %d pending marks, mark %v", len(items), len(pending), marked)
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

// faultDB is DynamoDB Local with a crash at the Scan that would start a segment, a hook
// before the mark is written, and counts of the Scans of the tenant's write table.
type faultDB struct {
	memberindex.DB
	table string
	// crashAtSegment, when >= 0, fails the first Scan of that segment, once.
	crashAtSegment atomic.Int64
	scans          atomic.Int64
	// segStarts counts the successful first Scans of a segment, by segment.
	segStarts  [1000]atomic.Int64
	beforeMark func()
	beforePuts func([]types.WriteRequest)
}

var errCrash = errors.New("the process died")

func (f *faultDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if aws.ToString(in.TableName) != f.table {
		return f.DB.Scan(ctx, in, o...)
	}
	f.scans.Add(1)
	seg := int64(aws.ToInt32(in.Segment))
	first := len(in.ExclusiveStartKey) == 0
	if first && f.crashAtSegment.CompareAndSwap(seg, -1) {
		return nil, errCrash
	}
	out, err := f.DB.Scan(ctx, in, o...)
	if err == nil && first {
		f.segStarts[seg].Add(1)
	}
	return out, err
}

func (f *faultDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if f.beforeMark != nil && line(in.Item) == line(dynamo.MemberIndexMarkKey()) {
		f.beforeMark()
	}
	return f.DB.PutItem(ctx, in, o...)
}

func (f *faultDB) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	if f.beforePuts != nil {
		f.beforePuts(in.RequestItems[f.table])
	}
	return f.DB.BatchWriteItem(ctx, in, o...)
}

func newFaultDB(w *world) *faultDB {
	f := &faultDB{DB: w.db, table: w.row.CommandsTable}
	f.crashAtSegment.Store(-1)
	return f
}

// setLease sets the backfill's lease as another process holds it.
func (w *world) setLease(until time.Time) {
	w.t.Helper()
	_, err := w.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(w.row.CommandsTable),
		Key:                       map[string]types.AttributeValue{"id": s("memberidx"), "sk": s("backfill")},
		UpdateExpression:          aws.String("SET lease_owner = :o, lease_until = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": s("another-process"), ":u": &types.AttributeValueMemberN{Value: fmt.Sprint(until.UnixMilli())}}})
	w.must("set the lease", err)
}
