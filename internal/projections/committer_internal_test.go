package projections

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

// gatedDB is DynamoDB Local whose conditional writes of the read table wait for a gate,
// and which counts them: PutItems, and the upserts of each TransactWriteItems.
type gatedDB struct {
	*dynamodb.Client
	gate chan struct{}
	// held counts the upserts of the calls waiting at the gate.
	held atomic.Int32

	mu     sync.Mutex
	puts   int
	groups []int
}

func (d *gatedDB) wait(upserts int) {
	d.held.Add(int32(upserts))
	<-d.gate
}

func (d *gatedDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	d.wait(1)
	d.mu.Lock()
	d.puts++
	d.mu.Unlock()
	return d.Client.PutItem(ctx, in, optFns...)
}

func (d *gatedDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	d.wait(len(in.TransactItems))
	d.mu.Lock()
	d.groups = append(d.groups, len(in.TransactItems))
	d.mu.Unlock()
	return d.Client.TransactWriteItems(ctx, in, optFns...)
}

func committerTables(t *testing.T, db *dynamodb.Client) Tables {
	t.Helper()
	base := dynamotest.UniqueName("commit")
	tables := Tables{Users: base + "_users", Activities: base + "_activities"}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(tables.Users), dynamo.ActivitiesTable(tables.Activities)} {
		if err := dynamo.EnsureTable(t.Context(), db, spec); err != nil {
			t.Fatal(err)
		}
		name := aws.ToString(spec.Input.TableName)
		t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), db, name) })
	}
	return tables
}

// created is the create of user name at version; attrs become the view's attributes.
func created(name string, version int64, attrs map[string][]string) events.Envelope {
	at := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC).Add(time.Duration(version) * time.Minute)
	u := events.User{ID: name + "-id", Username: name, Email: name + "@example.com", FirstName: fmt.Sprint("v", version),
		IsActive: true, Attributes: attrs, Version: version, CreatedAt: at, UpdatedAt: at}
	p := &events.UserCreated{User: u}
	if version > 1 {
		return events.Envelope{EventID: fmt.Sprintf("ev-%s-%d", name, version), Type: events.UserUpdatedType, SchemaVersion: events.SchemaVersion,
			Kind: events.KindUser, Key: name, Version: version, Actor: "test", CommandID: "cmd", CorrelationID: "corr", OccurredAt: at,
			Payload: &events.UserUpdated{User: u}}
	}
	return events.Envelope{EventID: fmt.Sprintf("ev-%s-%d", name, version), Type: p.EventType(), SchemaVersion: events.SchemaVersion,
		Kind: events.KindUser, Key: name, Version: version, Actor: "test", CommandID: "cmd", CorrelationID: "corr", OccurredAt: at, Payload: p}
}

func firstName(t *testing.T, db *dynamodb.Client, tables Tables, name string) (string, bool) {
	t.Helper()
	got, ok, err := firstNameOf(t.Context(), db, tables, name)
	if err != nil {
		t.Fatal(err)
	}
	return got, ok
}

// TestCommitterGroupsConcurrentEvents: given events of many users handed to a Committer at
// once, some of them older than what the table holds and one that DynamoDB cannot store
// (an item over its 400 KB limit), when the first commits are held until the rest have
// queued, then the queued events are written together (transactions of several upserts,
// not a PutItem each), every caller learns its own outcome (only the oversized event
// fails), nothing older is put over newer, and every other event is in the table.
func TestCommitterGroupsConcurrentEvents(t *testing.T) {
	client := dynamotest.Current(t).DynamoDB()
	tables := committerTables(t, client)
	// What the table already holds: newer versions of u00..u04.
	direct := New(client, Options{})
	for i := range 5 {
		if err := direct.Apply(t.Context(), tables, created(fmt.Sprintf("u%02d", i), 3, nil)); err != nil {
			t.Fatal(err)
		}
	}
	db := &gatedDB{Client: client, gate: make(chan struct{})}
	c := New(db, Options{}).Committer(tables)
	const n = 40
	const oversized = "u17"
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("u%02d", i)
		var attrs map[string][]string
		if name == oversized {
			attrs = map[string][]string{"blob": {strings.Repeat("x", 420<<10)}}
		}
		wg.Go(func() { errs[i] = c.Apply(t.Context(), created(name, 2, attrs), nil) })
	}
	// Hold the first commits until every other event has queued behind them (or, when
	// the first commit started late, joined its group: no commit slot then waits).
	for {
		c.mu.Lock()
		queued, running := len(c.queue), c.running
		c.mu.Unlock()
		if (running == maxCommits || queued == 0) && queued+int(db.held.Load()) == n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(db.gate)
	wg.Wait()

	for i, err := range errs {
		name := fmt.Sprintf("u%02d", i)
		if (err != nil) != (name == oversized) {
			t.Errorf("%s: outcome %v", name, err)
		}
	}
	grouped := 0
	for _, g := range db.groups {
		if g > maxUpsertsPerTransaction {
			t.Errorf("a transaction of %d upserts", g)
		}
		grouped += g
	}
	if grouped < n/2 {
		t.Errorf("%d upserts went out in transactions %v, %d as PutItems; want most of the %d events grouped", grouped, db.groups, db.puts, n)
	}
	for i := range n {
		name := fmt.Sprintf("u%02d", i)
		got, ok := firstName(t, client, tables, name)
		switch {
		case name == oversized:
			if ok {
				t.Errorf("%s is in the table", name)
			}
		case i < 5:
			if got != "v3" {
				t.Errorf("%s holds %q, want the newer v3 it held before", name, got)
			}
		case got != "v2":
			t.Errorf("%s holds %q (present %v), want v2", name, got, ok)
		}
	}
}

// orderLog is DynamoDB Local that notes, before it sends them, the writes of the activity
// table (the event id of every activity item), so that a test can tell what came first.
type orderLog struct {
	*dynamodb.Client
	activities string

	mu     sync.Mutex
	events []string
}

func (d *orderLog) note(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, s)
}

func (d *orderLog) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if aws.ToString(in.TableName) == d.activities {
		d.note("activity " + dynamo.StringAttr(in.Item, "event_id"))
	}
	return d.Client.PutItem(ctx, in, optFns...)
}

func (d *orderLog) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	for _, r := range in.RequestItems[d.activities] {
		if r.PutRequest != nil {
			d.note("activity " + dynamo.StringAttr(r.PutRequest.Item, "event_id"))
		}
	}
	return d.Client.BatchWriteItem(ctx, in, optFns...)
}

// TestCommitterTellsOfAViewBeforeItsGroupsActivities: given events handed to a Committer
// at once (so that some commit alone and others in groups), one of them older than what
// the table holds, then each caller hears that its view is written once the view holds
// its version (a consistent read then sees it), before any activity of its commit is
// sent, and once only. The projector's progress notice rides on this: an X-Min-Version
// read need not wait for the rest of a group.
func TestCommitterTellsOfAViewBeforeItsGroupsActivities(t *testing.T) {
	client := dynamotest.Current(t).DynamoDB()
	tables := committerTables(t, client)
	if err := New(client, Options{}).Apply(t.Context(), tables, created("u00", 3, nil)); err != nil {
		t.Fatal(err)
	}
	db := &orderLog{Client: client, activities: tables.Activities}
	c := New(db, Options{}).Committer(tables)
	const n = 40
	errs := make([]error, n)
	seen := make([]string, n) // the view's first name when the caller was told
	var told [n]atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("u%02d", i)
		e := created(name, 2, nil)
		wg.Go(func() {
			errs[i] = c.Apply(t.Context(), e, func() {
				if told[i].Add(1) == 1 {
					db.note("viewed " + e.EventID)
					got, _, _ := firstNameOf(context.Background(), client, tables, name)
					seen[i] = got
				}
			})
		})
	}
	wg.Wait()

	at := map[string]int{}
	for i, ev := range db.events {
		if _, ok := at[ev]; !ok {
			at[ev] = i
		}
	}
	for i := range n {
		name, id := fmt.Sprintf("u%02d", i), fmt.Sprintf("ev-u%02d-2", i)
		want := map[bool]string{true: "v3", false: "v2"}[i == 0]
		switch {
		case errs[i] != nil:
			t.Errorf("%s: %v", name, errs[i])
		case told[i].Load() != 1:
			t.Errorf("%s: told %d times that its view is written, want once", name, told[i].Load())
		case seen[i] != want:
			t.Errorf("%s: told while its view held %q, want %q", name, seen[i], want)
		}
		viewed, ok1 := at["viewed "+id]
		activity, ok2 := at["activity "+id]
		if !ok1 || !ok2 || viewed > activity {
			t.Errorf("%s: told at %d (%v), activity sent at %d (%v); want the view told of first", name, viewed, ok1, activity, ok2)
		}
	}
}

// firstNameOf is the first name in user name's view, read strongly consistent, and whether
// the view is there.
func firstNameOf(ctx context.Context, db *dynamodb.Client, tables Tables, name string) (string, bool, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tables.Users), ConsistentRead: aws.Bool(true),
		Key: configKey(dynamo.UserID(name))})
	if err != nil || out.Item == nil {
		return "", false, err
	}
	u, err := decodeUser(out.Item)
	return u.FirstName, err == nil, err
}

// TestAGroupIsToldOfAfterTheMembershipsItsVersionChanged: a reader told that a group's
// view holds a membership event's version (X-Min-Version) finds every membership that
// version added or removed: through a Committer and through Apply.
func TestAGroupIsToldOfAfterTheMembershipsItsVersionChanged(t *testing.T) {
	client := dynamotest.Current(t).DynamoDB()
	at := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	change := func(version int64, added []string, removed ...string) events.Envelope {
		g := events.Group{ID: "g-id", Key: "g", Name: "G", Version: version, CreatedAt: at, UpdatedAt: at}
		p := &events.GroupMembersChanged{Group: g}
		for _, u := range added {
			p.Added = append(p.Added, events.Member{Username: u, UserID: u + "-id", MembershipRev: 1})
		}
		for _, u := range removed {
			p.Removed = append(p.Removed, events.Member{Username: u, UserID: u + "-id"})
		}
		return events.Envelope{EventID: fmt.Sprint("ev-g-", version), Type: p.EventType(), SchemaVersion: events.SchemaVersion,
			Kind: events.KindGroup, Key: "g", Version: version, Actor: "test", CommandID: "cmd", CorrelationID: "corr", OccurredAt: at, Payload: p}
	}
	var added []string
	for i := range 60 {
		added = append(added, fmt.Sprintf("u%02d", i))
	}
	// live is how many of the users are live members of g now, and whether u00's
	// membership is a tombstone.
	live := func(tables Tables) (int, bool) {
		out, err := client.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(tables.Users), ConsistentRead: aws.Bool(true),
			KeyConditionExpression: aws.String("id = :g"), ExpressionAttributeValues: map[string]types.AttributeValue{":g": str("group#g")}})
		if err != nil {
			t.Error(err)
			return 0, false
		}
		n, gone := 0, false
		for _, it := range out.Items {
			switch {
			case dynamo.StringAttr(it, "member_id") != "":
				n++
			case dynamo.StringAttr(it, "sk") == dynamo.MemberSK("u00"):
				gone = true
			}
		}
		return n, gone
	}
	for _, via := range []string{"a Committer", "Apply"} {
		t.Run(via, func(t *testing.T) {
			tables := committerTables(t, client)
			p := New(client, Options{})
			if err := p.Apply(t.Context(), tables, change(1, added)); err != nil {
				t.Fatal(err)
			}
			var n int
			var gone bool
			viewed := func() { n, gone = live(tables) }
			var err error
			if via == "Apply" {
				err = p.apply(t.Context(), tables, change(2, []string{"v00", "v01"}, "u00"), viewed)
			} else {
				err = p.Committer(tables).Apply(t.Context(), change(2, []string{"v00", "v01"}, "u00"), viewed)
			}
			if err != nil {
				t.Fatal(err)
			}
			if n != 61 || !gone {
				t.Errorf("told of version 2 while %d memberships were live and u00's removal written %v; want 61 and true", n, gone)
			}
		})
	}
}

// TestCommitterWithSinglePutsWritesEachViewAlone: the same as above with SinglePuts (how
// the projector writes on AWS, where a transactional write costs twice a PutItem): every
// view item goes out as its own conditional PutItem, none in a transaction, each caller
// learns its own outcome, and nothing older is put over newer.
func TestCommitterWithSinglePutsWritesEachViewAlone(t *testing.T) {
	client := dynamotest.Current(t).DynamoDB()
	tables := committerTables(t, client)
	direct := New(client, Options{SinglePuts: true})
	for i := range 5 {
		if err := direct.Apply(t.Context(), tables, created(fmt.Sprintf("u%02d", i), 3, nil)); err != nil {
			t.Fatal(err)
		}
	}
	db := &gatedDB{Client: client, gate: make(chan struct{})}
	close(db.gate)
	c := New(db, Options{SinglePuts: true}).Committer(tables)
	const n = 40
	const oversized = "u17"
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("u%02d", i)
		var attrs map[string][]string
		if name == oversized {
			attrs = map[string][]string{"blob": {strings.Repeat("x", 420<<10)}}
		}
		wg.Go(func() { errs[i] = c.Apply(t.Context(), created(name, 2, attrs), nil) })
	}
	wg.Wait()
	for i, err := range errs {
		if name := fmt.Sprintf("u%02d", i); (err != nil) != (name == oversized) {
			t.Errorf("%s: outcome %v", name, err)
		}
	}
	if len(db.groups) != 0 {
		t.Errorf("transactions %v: with single puts no view item goes out in one", db.groups)
	}
	if db.puts < n {
		t.Errorf("%d PutItems for %d events", db.puts, n)
	}
	for i := range n {
		name := fmt.Sprintf("u%02d", i)
		got, ok := firstName(t, client, tables, name)
		switch {
		case name == oversized:
			if ok {
				t.Errorf("%s is in the table", name)
			}
		case i < 5:
			if got != "v3" {
				t.Errorf("%s holds %q, want the newer v3 it held before", name, got)
			}
		case got != "v2":
			t.Errorf("%s holds %q (present %v), want v2", name, got, ok)
		}
	}
}
