package projector

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/streams"
)

// partsWorld is a rebuild fixture with live tables and the live projector's handler, which
// reads a record's parts by the tenant's row.
type partsWorld struct {
	rebuildFixture
	live    projections.Tables
	handler *Handler
	applied map[string]bool
}

func newPartsWorld(t *testing.T) *partsWorld {
	t.Helper()
	return newPartsWorldOn(t, dynamotest.Current(t))
}

func newPartsWorldOn(t *testing.T, local *dynamotest.Local) *partsWorld {
	t.Helper()
	ctx := context.Background()
	f := newRebuildFixtureOn(t, local)
	names := f.replayer.names
	live := projections.Tables{Users: names.Users("s", "t", 0), Activities: names.Activities("s", "t", 0)}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(live.Users), dynamo.ActivitiesTable(live.Activities)} {
		if err := dynamo.EnsureTable(ctx, f.db, spec); err != nil {
			t.Fatal(err)
		}
	}
	row := f.row
	row.Status, row.UsersTable, row.ActivitiesTable = dynamo.TenantActive, live.Users, live.Activities
	if err := f.replayer.tenants.Put(ctx, row, 0); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(f.replayer.tenants, f.projector, f.reg, zap.NewNop())
	return &partsWorld{rebuildFixture: f, live: live, handler: h, applied: map[string]bool{}}
}

// scanAll is every item of table, page by page.
func scanAll(t *testing.T, db *dynamodb.Client, table string) [][]map[string]types.AttributeValue {
	t.Helper()
	var pages [][]map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, page.Items)
	}
	return pages
}

// project delivers the history records not delivered yet to the live handler as stream
// records (part items too, which it must pass over), each aggregate's in order and
// aggregates side by side.
func (w *partsWorld) project(t *testing.T) {
	t.Helper()
	byID := map[string][]map[string]types.AttributeValue{}
	for _, page := range scanAll(t, w.db, w.row.CommandsTable) {
		for _, it := range page {
			sk := dynamo.StringAttr(it, "sk")
			k := dynamo.StringAttr(it, "id") + "/" + sk
			// Only the groups' records: the users' views play no part in what is checked.
			if strings.HasPrefix(k, "group#") && (dynamo.IsHistorySK(sk) || dynamo.IsPartSK(sk)) && !w.applied[k] {
				w.applied[k] = true
				byID[dynamo.StringAttr(it, "id")] = append(byID[dynamo.StringAttr(it, "id")], it)
			}
		}
	}
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(8)
	for _, items := range byID {
		slices.SortFunc(items, func(a, b map[string]types.AttributeValue) int {
			return strings.Compare(dynamo.StringAttr(a, "sk"), dynamo.StringAttr(b, "sk"))
		})
		g.Go(func() error {
			for _, it := range items {
				rec := streams.Record{System: "s", Tenant: "t", EventName: streams.EventInsert,
					Keys: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}, NewImage: it, Aggregate: dynamo.StringAttr(it, "id")}
				if err := w.handler.Apply(ctx, rec); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// longNames are n usernames of 64 characters.
func longNames(prefix string, n, length int) []string {
	out := make([]string, n)
	for i := range out {
		head := prefix + "-" + strings.Repeat("x", length)
		out[i] = fmt.Sprintf("%s%05d", head[:length-5], i)
	}
	return out
}

// bigGroup writes the users into the write model as a create does (their config and
// user.created record: ten thousand creates one by one would take minutes on a loaded
// DynamoDB Local), then creates a group of them all by commands.
func (w *partsWorld) bigGroup(t *testing.T, group string, users []string) {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Millisecond)
	var reqs []types.WriteRequest
	for _, u := range users {
		state := events.User{ID: uuid.NewString(), Username: u, IsActive: true, Version: 1, CreatedAt: at, UpdatedAt: at}
		config, err := dynamo.UserConfigItem(state, "", false)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := dynamo.EncodeRecord(events.Envelope{EventID: uuid.NewString(), Type: events.UserCreatedType, SchemaVersion: events.SchemaVersion,
			Kind: events.KindUser, Key: u, Version: 1, Actor: "test", OccurredAt: at, Payload: &events.UserCreated{User: state}}, at, 0)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: config}}, types.WriteRequest{PutRequest: &types.PutRequest{Item: rec}})
	}
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(4)
	for chunk := range slices.Chunk(reqs, 500) {
		g.Go(func() error { return dynamo.BatchWrite(ctx, w.db, w.row.CommandsTable, chunk) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	w.run(t, commands.CreateGroup{Name: group})
	for chunk := range slices.Chunk(users, commands.MaxMembersChange) {
		w.run(t, commands.ChangeMembers{Group: group, Add: chunk})
	}
}

// members are the live memberships of a group in a users table.
func members(t *testing.T, db *dynamodb.Client, table, group string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	p := dynamodb.NewQueryPaginator(db, &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("id = :id AND begins_with(sk, :m)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": &types.AttributeValueMemberS{Value: dynamo.GroupID(group)},
			":m": &types.AttributeValueMemberS{Value: "member#"}}})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			if d, ok := it["is_deleted"].(*types.AttributeValueMemberBOOL); ok && d.Value {
				continue
			}
			out[strings.TrimPrefix(dynamo.StringAttr(it, "sk"), "member#")] = true
		}
	}
	return out
}

// feed are the items of an entity's feed in an activities table: type and change.
func feed(t *testing.T, db *dynamodb.Client, table, entity string) []map[string]types.AttributeValue {
	t.Helper()
	out, err := db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK(entity)}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

// record is the history item of a version of a group, with its part count.
func (w *partsWorld) groupRecord(t *testing.T, key string, version int64) map[string]types.AttributeValue {
	t.Helper()
	out, err := w.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(w.row.CommandsTable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: dynamo.GroupID(key)},
			"sk": &types.AttributeValueMemberS{Value: dynamo.HistorySK(version)}}})
	if err != nil || out.Item == nil {
		t.Fatalf("the record of %s v%d: %v", key, version, err)
	}
	return out.Item
}

// replay rebuilds the views of the log into the fixture's next tables, page by page (a
// record and its parts may be on different pages), and verifies them against the log.
func (w *partsWorld) replay(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	list := &checklist{}
	for _, page := range scanAll(t, w.db, w.row.CommandsTable) {
		if _, _, err := w.replayer.applyPage(ctx, w.row, w.next, page, list, &sync.Map{}); err != nil {
			t.Fatal(err)
		}
	}
	rep := &ReplayReport{}
	if err := w.replayer.verify(ctx, w.row, w.next, rep, ReplayOptions{Workers: 2, verifyPause: time.Millisecond}, list, 1, nil); err != nil {
		t.Fatalf("verification: %v %v", err, rep.Mismatches)
	}
}

// partsTestMembers and partsTestNameLength size the renamed group: long usernames, so
// that its record's member list spans several parts (each at most events.PartBytes),
// which is what a rename of 10,000 members needs too. The 10,000 themselves are split and
// joined in internal/events (TestSplitMembersRoundTrips); end to end here, with the live
// projector and a replay under -race, 10,000 took about ten minutes of the package's
// twenty on CI.
const (
	partsTestMembers    = 2_500
	partsTestNameLength = 200
)

// TestRenameOfALargeGroupOfLongNamedMembers: a group of 2,500 members whose usernames
// have 200 characters is renamed (its record lists them over several parts), the live
// projector moves every membership to the new name and writes the group's feed, and a
// replay of the log builds the same.
func TestRenameOfALargeGroupOfLongNamedMembers(t *testing.T) {
	w := newPartsWorldOn(t, dynamotest.Private(t))
	users := longNames("member", partsTestMembers, partsTestNameLength)
	start := time.Now()
	w.bigGroup(t, "Big", users)
	t.Logf("%d members in %v", len(users), time.Since(start))
	w.run(t, commands.RenameGroup{Name: "big", NewName: "Huge"})
	version := int64(2 + (len(users)+commands.MaxMembersChange-1)/commands.MaxMembersChange)
	rec := w.groupRecord(t, "huge", version)
	if dynamo.StringAttr(rec, "event_type") != string(events.GroupRenamedType) || dynamo.RecordParts(rec) < 2 {
		t.Fatalf("the rename's record: %s with %d parts, want group.renamed over several parts", dynamo.StringAttr(rec, "event_type"), dynamo.RecordParts(rec))
	}
	env, err := w.deps.Store.LoadRecord(context.Background(), w.tenant, events.KindGroup, "huge", version)
	if err != nil {
		t.Fatal(err)
	}
	if p := env.Payload.(*events.GroupRenamed); len(p.Members) != len(users) {
		t.Fatalf("the rename's record read with its parts lists %d members, want %d", len(p.Members), len(users))
	}

	start = time.Now()
	w.project(t)
	t.Logf("projected in %v", time.Since(start))
	check := func(tables projections.Tables, what string) {
		t.Helper()
		if got := members(t, w.db, tables.Users, "huge"); len(got) != len(users) || !got[users[0]] || !got[users[len(users)-1]] {
			t.Errorf("%s: %d live memberships of huge, want %d", what, len(got), len(users))
		}
		if got := members(t, w.db, tables.Users, "big"); len(got) != 0 {
			t.Errorf("%s: %d live memberships left under the old name", what, len(got))
		}
		var types []string
		for _, it := range feed(t, w.db, tables.Activities, "group:huge") {
			types = append(types, dynamo.StringAttr(it, "type"))
		}
		if !slices.Contains(types, string(events.GroupRenamedType)) {
			t.Errorf("%s: the feed of huge = %v, want the rename in it", what, types)
		}
	}
	check(w.live, "live projector")
	start = time.Now()
	w.replay(t)
	t.Logf("replayed in %v", time.Since(start))
	check(w.next, "replay")
}
