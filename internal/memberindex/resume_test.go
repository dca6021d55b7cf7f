package memberindex_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/memberindex"
)

// scanCounter counts the Scans of one table by an Eraser.
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

func names(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("%s%02d", prefix, i))
	}
	return out
}

// build writes a tenant of about 300 memberships through the live path: single adds
// and a removal over five groups, a members change of 50 members (and one removing 10),
// and a rename of a group of 30; erasee is in several of them.
func (w *world) build() {
	users := names("u", 0, 60)
	for _, u := range append(users, "erasee") {
		w.user(u)
	}
	for g := range 5 {
		group := fmt.Sprintf("g%d", g)
		w.group(group)
		for j := range 30 {
			w.add(group, users[(g*11+j)%len(users)])
		}
	}
	w.add("g0", "erasee")
	w.add("g1", "erasee")
	w.remove("g2", users[22])
	w.group("bulk")
	w.change("bulk", append(names("u", 5, 54), "erasee"), nil)
	w.change("bulk", nil, names("u", 10, 20))
	w.rename("g1", "g1-new")
}

// TestABackfillResumedAfterACrashAndDeadlinesIndexesWhatTheLivePathWrote: a tenant from
// before the member index (its index and mark deleted after the live path wrote them) is
// backfilled in tiny segments and pages by calls that crash and stop at their deadline
// half-way, and by a process that finds the lease of one that died; each goes on from the
// position kept, reading no segment twice but the one cut short. The mark is written only
// at the end, the index equals the live path's, and an erasure after it finds the
// person's group records without a Scan of the write table and leaves nothing of them.
func TestABackfillResumedAfterACrashAndDeadlinesIndexesWhatTheLivePathWrote(t *testing.T) {
	w := newWorld(t, "old")
	ctx := context.Background()
	w.build()
	live, pending, marked := w.index()
	if len(pending) > 0 || !marked {
		t.Fatalf("the live path left %d pending marks, mark %v", len(pending), marked)
	}
	if want := w.fromRecords(); strings.Join(live, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the live path's index (%d items) is not its records' (%d)", len(live), len(want))
	}
	for _, want := range []string{"#bulk ", "#g1-new ", "memberidx#"} {
		if !strings.Contains(strings.Join(live, "\n"), want) {
			t.Fatalf("the live index has no %q item: the test builds too little", want)
		}
	}
	t.Logf("%d index items written by the live path", len(live))
	w.strip()

	db := newFaultDB(w)
	opts := memberindex.Options{SegmentItems: 40, PageSize: 7}
	// A process that dies while it reads segment 2.
	db.crashAtSegment.Store(2)
	if _, err := memberindex.New(db, w.reg, opts).Step(ctx, w.row.CommandsTable); err == nil {
		t.Fatal("the call whose Scan failed reported no error")
	}
	st := status(t, memberindex.New(w.db, w.reg, opts), w)
	if st.Seg != 2 || st.Segs < 6 {
		t.Fatalf("after the crash: %s, want segment 2 of 6 or more done", st)
	}
	// It died holding its lease: another process waits for it to run out.
	w.setLease(time.Now().Add(time.Hour))
	scans := db.scans.Load()
	p, err := memberindex.New(db, w.reg, opts).Step(ctx, w.row.CommandsTable)
	if err != nil || p.HeldUntil.IsZero() || db.scans.Load() != scans {
		t.Fatalf("a call while another process holds the lease: %+v, %v, %d Scans", p, err, db.scans.Load()-scans)
	}
	w.setLease(time.Now().Add(-time.Second))
	// Calls at their deadline: one segment each.
	short := opts
	short.Budget = time.Nanosecond
	for want := 3; want <= 4; want++ {
		p, err := memberindex.New(db, w.reg, short).Step(ctx, w.row.CommandsTable)
		if err != nil {
			t.Fatal(err)
		}
		if p.Seg != want || p.Complete {
			t.Fatalf("a call with no time: %s, want segment %d done", p, want)
		}
		if _, _, marked := w.index(); marked {
			t.Fatal("the mark is there before the backfill is complete: an erasure would trust an incomplete index")
		}
	}
	// A new process carries it to the end.
	ix := memberindex.New(db, w.reg, opts)
	for calls := 0; ; calls++ {
		p, err := ix.Step(ctx, w.row.CommandsTable)
		if err != nil {
			t.Fatal(err)
		}
		if p.Complete {
			break
		}
		if calls > 100 {
			t.Fatalf("the backfill never completes: %s", p)
		}
	}
	for seg := range st.Segs {
		if n := db.segStarts[seg].Load(); n != 1 {
			t.Errorf("segment %d of %d was read %d times, want once (a resumption goes on from its position)", seg, st.Segs, n)
		}
	}
	items, pending, marked := w.index()
	if !marked || len(pending) > 0 {
		t.Fatalf("after the backfill: mark %v, %d pending marks", marked, len(pending))
	}
	if strings.Join(items, "\n") != strings.Join(live, "\n") {
		t.Errorf("the backfilled index differs from the live path's:\n%s\n---\n%s", strings.Join(items, "\n"), strings.Join(live, "\n"))
	}
	if left := w.items("memberidx"); len(left) != len(items)+1 {
		t.Errorf("the backfill's state is left: %v", left)
	}
	if got, _ := ix.Status(ctx, w.row.CommandsTable); !got.Complete {
		t.Errorf("status after the backfill: %s", got)
	}

	// An erasure now uses the index.
	erasureID := uuid.NewString()
	_, err = commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "erasee", Reason: "a data subject's request",
		ErasureID: erasureID}, w.meta())
	w.must("erase", err)
	ev := w.erased("erasee")
	counter := &scanCounter{DB: w.db, table: w.row.CommandsTable}
	x := erasure.NewEraser(counter, w.names, w.tenants, w.reg, erasure.Options{Settle: time.Millisecond})
	for calls := 0; ; calls++ {
		again, err := x.Step(ctx, "s", "old", ev)
		if err != nil {
			t.Fatal(err)
		}
		if again.IsZero() {
			break
		}
		if calls > 1000 {
			t.Fatal("the erasure never finishes")
		}
		time.Sleep(time.Until(again))
	}
	if n := counter.scans.Load(); n != 0 {
		t.Errorf("the erasure after the backfill Scanned the write table %d times, want none", n)
	}
	for _, table := range []string{w.row.CommandsTable, w.row.UsersTable, w.row.ActivitiesTable} {
		for _, it := range w.all(table) {
			for _, canary := range []string{`"erasee"`, "#erasee", "erasee@", "Lasterasee", ev.PreviousID} {
				if strings.Contains(it, canary) {
					t.Errorf("%s still holds %q: %s", table, canary, it)
				}
			}
		}
	}
	if items, _, _ := w.index(); len(items) == 0 {
		t.Error("the erasure deleted the other members' index items")
	}
}

func status(t *testing.T, ix *memberindex.Indexer, w *world) memberindex.Progress {
	t.Helper()
	p, err := ix.Status(context.Background(), w.row.CommandsTable)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// erased is the user.erased record of username's erasure.
func (w *world) erased(username string) *events.UserErased {
	w.t.Helper()
	out, err := w.db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(w.row.CommandsTable),
		KeyConditionExpression:    aws.String("id = :id AND begins_with(sk, :h)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": s(dynamo.UserID(username)), ":h": s("config#")},
		ScanIndexForward:          aws.Bool(false), Limit: aws.Int32(1), ConsistentRead: aws.Bool(true)})
	w.must("read the user's last record", err)
	if len(out.Items) == 0 {
		w.t.Fatal("no user.erased record")
	}
	env, err := dynamo.DecodeRecord(w.reg, out.Items[0])
	w.must("decode", err)
	ev, ok := env.Payload.(*events.UserErased)
	if !ok {
		w.t.Fatalf("the user's last record is %s", env.Type)
	}
	return ev
}

// all is every item of a table, each as its attributes' text.
func (w *world) all(table string) []string {
	w.t.Helper()
	var out []string
	p := dynamodb.NewScanPaginator(w.db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		w.must("scan", err)
		for _, it := range page.Items {
			b, err := json.Marshal(text(it))
			w.must("encode", err)
			out = append(out, string(b))
		}
	}
	return out
}

func text(it map[string]types.AttributeValue) map[string]any {
	m := map[string]any{}
	for k, v := range it {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			m[k] = v.Value
		case *types.AttributeValueMemberN:
			m[k] = v.Value
		case *types.AttributeValueMemberSS:
			m[k] = v.Value
		case *types.AttributeValueMemberM:
			m[k] = text(v.Value)
		case *types.AttributeValueMemberL:
			var l []any
			for _, e := range v.Value {
				l = append(l, text(map[string]types.AttributeValue{"": e})[""])
			}
			m[k] = l
		default:
			m[k] = fmt.Sprint(v)
		}
	}
	return m
}
