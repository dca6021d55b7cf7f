package erasure_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/events"
)

// scanCounter counts the Scans of one table.
type scanCounter struct {
	erasure.DB
	table string
	scans atomic.Int64
}

func (c *scanCounter) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if aws.ToString(in.TableName) == c.table {
		c.scans.Add(1)
	}
	return c.DB.Scan(ctx, in, o...)
}

// TestAnIndexedErasureFindsTheGroupRecordsWithoutAScan: in a tenant whose write table
// carries the member index's mark, an erasure finds the group records naming its person
// by the index (and by a pending mark a members change's writer left when it died before
// writing its items) and never Scans the write table; it leaves the tables as the Scan of
// a tenant from before the index does, the person's index items gone, the other member's
// kept.
func TestAnIndexedErasureFindsTheGroupRecordsWithoutAScan(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := erasuretest.Spec{Username: "erasee", History: 30, Groups: 3, Others: 300, At: at}
	indexed, scanned := st.tenant(t, "s", "indexed"), st.tenant(t, "s", "scanned")
	st.unindexed(t, scanned)
	reg := events.NewRegistry()
	calls := map[string]int64{}
	for _, row := range []dynamo.Tenant{indexed, scanned} {
		ev := st.erasee(t, row, spec, "00000000-0000-0000-0000-0000000000c"+row.TenantID[:1])
		// A members change naming the person and carl whose writer died after its commit:
		// its pending mark, no index items.
		g := events.Group{ID: "gid-bulk", Key: "bulk", Name: "bulk", Version: 3, CreatedAt: at, UpdatedAt: at}
		env := events.Envelope{EventID: "bulk-3", Type: events.GroupMembersChangedType, SchemaVersion: events.SchemaVersion,
			Kind: events.KindGroup, Key: "bulk", Version: 3, Actor: "seed", OccurredAt: at,
			Changes: map[string]events.Change{"members_added": {New: 2}},
			Payload: &events.GroupMembersChanged{Group: g, Added: []events.Member{
				{Username: "carl", UserID: "id-carl", MembershipRev: 1}, {Username: "erasee", UserID: ev.PreviousID, MembershipRev: 1}}}}
		rec, err := dynamo.EncodeRecord(env, at, 0)
		if err != nil {
			t.Fatal(err)
		}
		carl := dynamo.MemberIndexItem("id-carl", "bulk", 2)
		for _, it := range []map[string]types.AttributeValue{rec, dynamo.MemberIndexPendingItem("bulk", 3), carl} {
			if _, err := st.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(row.CommandsTable), Item: it}); err != nil {
				t.Fatal(err)
			}
		}
		db := &scanCounter{DB: st.db, table: row.CommandsTable}
		run(t, st, erasure.NewEraser(db, st.names, st.tenants, reg, erasure.Options{Settle: time.Millisecond}), row, ev)
		calls[row.TenantID] = db.scans.Load()
	}
	if calls["indexed"] != 0 {
		t.Errorf("the erasure in the indexed tenant Scanned its write table %d times, want none", calls["indexed"])
	}
	if calls["scanned"] == 0 {
		t.Error("the erasure in the tenant from before the index did not Scan its write table")
	}
	notMark := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if !strings.Contains(l, `"id":"memberidx"`) {
				out = append(out, l)
			}
		}
		return out
	}
	for _, tables := range [][2]string{{indexed.CommandsTable, scanned.CommandsTable}, {indexed.UsersTable, scanned.UsersTable}, {indexed.ActivitiesTable, scanned.ActivitiesTable}} {
		a, b := notMark(st.contents(t, tables[0])), notMark(st.contents(t, tables[1]))
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("%s (by the index) differs from %s (by a Scan):\n%s\n---\n%s", tables[0], tables[1], strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
		var carl bool
		for _, it := range a {
			if contains(it, `"erasee"`) || contains(it, "user#erasee") || contains(it, `"id-erasee"`) || contains(it, "memberidx#id-erasee") || contains(it, "erasee@") {
				t.Errorf("%s still names the person: %s", tables[0], it)
			}
			carl = carl || contains(it, "memberidx#id-carl")
		}
		if tables[0] == indexed.CommandsTable && !carl {
			t.Error("the other member's index item is gone")
		}
	}
}
