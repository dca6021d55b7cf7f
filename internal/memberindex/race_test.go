package memberindex_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/memberindex"
)

// backfill runs the backfill of w's tenant to completion over db.
func backfill(t *testing.T, w *world, db memberindex.DB, opts memberindex.Options) {
	t.Helper()
	ix := memberindex.New(db, w.reg, opts)
	for calls := 0; ; calls++ {
		p, err := ix.Step(context.Background(), w.row.CommandsTable)
		if err != nil {
			t.Fatal(err)
		}
		if p.Complete {
			return
		}
		if calls > 100 {
			t.Fatalf("the backfill never completes: %s", p)
		}
	}
}

// TestAWriteRacingTheBackfillIsIndexed: group records committed after the backfill's
// Scan has read every segment, before it writes the mark (an add, a members change, a
// rename: what no segment of it can see), are indexed by their own writes, so the index
// is complete when the mark says so.
func TestAWriteRacingTheBackfillIsIndexed(t *testing.T) {
	w := newWorld(t, "racing")
	users := names("u", 0, 12)
	for _, u := range users {
		w.user(u)
	}
	w.group("a")
	w.group("b")
	for _, u := range users[:6] {
		w.add("a", u)
	}
	w.strip()
	db := newFaultDB(w)
	var once sync.Once
	db.beforeMark = func() {
		once.Do(func() {
			w.add("b", users[7])
			w.change("b", users[8:], nil)
			w.rename("a", "a-new")
		})
	}
	backfill(t, w, db, memberindex.Options{SegmentItems: 10, PageSize: 5})
	items, pending, marked := w.index()
	if !marked || len(pending) > 0 {
		t.Fatalf("after the backfill: mark %v, %d pending marks", marked, len(pending))
	}
	want := w.fromRecords()
	if strings.Join(items, "\n") != strings.Join(want, "\n") {
		t.Errorf("the index after a racing write differs from its records':\n%s\n---\n%s", strings.Join(items, "\n"), strings.Join(want, "\n"))
	}
	for _, racing := range []string{"#b ", "#a-new "} {
		if !strings.Contains(strings.Join(items, "\n"), racing) {
			t.Errorf("no index item of the racing write to %q", racing)
		}
	}
}

// TestABackfillRacingAnErasureLeavesNoItemOfThePerson: an erasure (by the Scan: the mark
// is not there yet) rewrites the person's group records and deletes their index items
// after the backfill read the records and before it writes their items. The backfill
// reads the records again and deletes what it wrote for the person; the other members'
// items stay.
func TestABackfillRacingAnErasureLeavesNoItemOfThePerson(t *testing.T) {
	w := newWorld(t, "erasing")
	users := names("u", 0, 6)
	for _, u := range users {
		w.user(u)
	}
	victim := w.user("victim")
	w.group("a")
	for _, u := range append(users, "victim") {
		w.add("a", u)
	}
	w.change("a", nil, []string{"victim", users[0]})
	w.strip()
	db := newFaultDB(w)
	var once sync.Once
	db.beforePuts = func(reqs []types.WriteRequest) {
		for _, r := range reqs {
			if r.PutRequest == nil || dynamo.StringAttr(r.PutRequest.Item, "id") != dynamo.MemberIndexID(victim) {
				continue
			}
			once.Do(func() { w.eraseRecords("victim", victim) })
		}
	}
	backfill(t, w, db, memberindex.Options{SegmentItems: 10, PageSize: 5})
	items, _, marked := w.index()
	if !marked {
		t.Fatal("no mark after the backfill")
	}
	for _, it := range items {
		if strings.Contains(it, victim) {
			t.Errorf("the backfill left an index item of the erased person: %s", it)
		}
	}
	if want := w.fromRecords(); strings.Join(items, "\n") != strings.Join(want, "\n") || len(want) == 0 {
		t.Errorf("the index differs from its records':\n%s\n---\n%s", strings.Join(items, "\n"), strings.Join(want, "\n"))
	}
}

// eraseRecords does what an erasure's first pass does to the group records of a person
// and to their index items: the records rewritten, the items deleted.
func (w *world) eraseRecords(username, id string) {
	w.t.Helper()
	ctx := context.Background()
	subj := erasure.NewSubject(username, id)
	p := dynamodb.NewScanPaginator(w.db, &dynamodb.ScanInput{TableName: aws.String(w.row.CommandsTable), ConsistentRead: aws.Bool(true),
		FilterExpression:          aws.String("begins_with(id, :g) AND begins_with(sk, :h)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": s("group#"), ":h": s("config#")}})
	rewritten := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		w.must("scan", err)
		for _, it := range page.Items {
			out, changed, err := erasure.RewriteHistoryItem(w.reg, it, subj)
			w.must("rewrite", err)
			if changed {
				_, err := w.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(w.row.CommandsTable), Item: out})
				w.must("put", err)
				rewritten++
			}
		}
	}
	if rewritten == 0 {
		w.t.Fatal("no group record named the person")
	}
	q, err := w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(w.row.CommandsTable), KeyConditionExpression: aws.String("id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": s(dynamo.MemberIndexID(id))}, ConsistentRead: aws.Bool(true)})
	w.must("query", err)
	for _, it := range q.Items {
		_, err := w.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(w.row.CommandsTable),
			Key: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}})
		w.must("delete", err)
	}
}
