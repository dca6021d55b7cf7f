package projections_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const retention = 90 * 24 * time.Hour

func client(t testing.TB) *dynamodb.Client {
	t.Helper()
	return dynamotest.Current(t).DynamoDB()
}

// newTables creates a fresh read table and activity table, deleted when the test ends.
func newTables(t testing.TB, db *dynamodb.Client) projections.Tables {
	t.Helper()
	base := dynamotest.UniqueName("proj")
	tables := projections.Tables{Users: base + "_users", Activities: base + "_activities"}
	ctx := context.Background()
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(tables.Users), dynamo.ActivitiesTable(tables.Activities)} {
		if err := dynamo.EnsureTable(ctx, db, spec); err != nil {
			t.Fatal(err)
		}
		name := aws.ToString(spec.Input.TableName)
		t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), db, name) })
	}
	return tables
}

func applyAll(t testing.TB, p *projections.Projector, tables projections.Tables, es []events.Envelope) {
	t.Helper()
	for _, e := range es {
		if err := p.Apply(context.Background(), tables, e); err != nil {
			t.Fatalf("apply %s %s v%d: %v", e.Type, e.Entity(), e.Version, err)
		}
	}
}

// pick lists log[i] for every i of order.
func pick(log []events.Envelope, order []int) []events.Envelope {
	out := make([]events.Envelope, 0, len(order))
	for _, i := range order {
		out = append(out, log[i])
	}
	return out
}

// snapshot is the full content of a pair of tables, keyed "<pk>/<sk>", without the
// projection-time `updated_at`, which legitimately differs between two runs. The group
// pointers in users' partitions (projections.GroupPointer) are kept apart from the other
// items of the read table.
type snapshot struct {
	Users      map[string]map[string]any
	Pointers   map[string]map[string]any
	Activities map[string]map[string]any
}

func takeSnapshot(t testing.TB, db *dynamodb.Client, tables projections.Tables) snapshot {
	t.Helper()
	s := snapshot{Users: scan(t, db, tables.Users, "id"), Pointers: map[string]map[string]any{}, Activities: scan(t, db, tables.Activities, "pk")}
	for k, it := range s.Users {
		if strings.HasPrefix(fmt.Sprint(it["id"]), "user#") && strings.HasPrefix(fmt.Sprint(it["sk"]), "group#") {
			s.Pointers[k] = it
			delete(s.Users, k)
		}
	}
	return s
}

func scan(t testing.TB, db *dynamodb.Client, table, pk string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	pages := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		for _, it := range page.Items {
			var m map[string]any
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				t.Fatal(err)
			}
			delete(m, "updated_at")
			out[fmt.Sprint(m[pk], "/", m["sk"])] = m
		}
	}
	return out
}

// diff describes how b differs from a, or is empty.
func (a snapshot) diff(b snapshot) string {
	return diffItems("users", a.Users, b.Users) + diffItems("group pointers", a.Pointers, b.Pointers) +
		diffItems("activities", a.Activities, b.Activities)
}

func diffItems(table string, a, b map[string]map[string]any) string {
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if _, ok := b[k]; !ok {
			fmt.Fprintf(&sb, "%s: %s only in first: %s\n", table, k, js(a[k]))
		} else if !reflect.DeepEqual(a[k], b[k]) {
			fmt.Fprintf(&sb, "%s: %s differs:\n  first:  %s\n  second: %s\n", table, k, js(a[k]), js(b[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			fmt.Fprintf(&sb, "%s: %s only in second: %s\n", table, k, js(b[k]))
		}
	}
	return sb.String()
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// assertNoSecrets fails if any item of s holds a password or its ciphertext: the world
// puts "SECRET" into every one it records, and a change set must not even name one.
func assertNoSecrets(t testing.TB, s snapshot) {
	t.Helper()
	if all := js(s); strings.Contains(all, "SECRET") {
		t.Errorf("a password reached the tables: %s", all)
	}
	for _, table := range []map[string]map[string]any{s.Users, s.Activities} {
		for k, it := range table {
			for name := range it {
				if strings.Contains(name, "password") {
					t.Errorf("item %s has attribute %s", k, name)
				}
			}
		}
	}
	for k, it := range s.Activities {
		var ch map[string]any
		if err := json.Unmarshal([]byte(fmt.Sprint(it["changes"])), &ch); err != nil {
			t.Errorf("activity %s: changes %v: %v", k, it["changes"], err)
		}
		for name := range ch {
			if strings.Contains(strings.ToLower(name), "password") {
				t.Errorf("activity %s has a change of %s", k, name)
			}
		}
	}
}

// assertActivities checks that the activity table holds exactly one item per distinct
// event of applied, and per member of a group.members_changed, and for each membership
// change one more in the member's own feed.
func assertActivities(t testing.TB, s snapshot, applied []events.Envelope) {
	t.Helper()
	want := map[string]bool{}
	mine := func(e events.Envelope, username, eventID string) {
		want[projections.EntityPK("user:"+username)+"/"+projections.ActivitySK(e.OccurredAt, eventID)] = true
	}
	for _, e := range applied {
		switch p := e.Payload.(type) {
		case *events.GroupMembersChanged:
			for i, m := range append(slices.Clone(p.Added), p.Removed...) {
				id := fmt.Sprintf("%s.%04d", e.EventID, i)
				want[projections.EntityPK(e.Entity())+"/"+projections.ActivitySK(e.OccurredAt, id)] = true
				if !m.Erased {
					mine(e, m.Username, id)
				}
			}
			continue
		case *events.GroupMemberAdded:
			if !p.Erased {
				mine(e, p.Username, e.EventID)
			}
		case *events.GroupMemberRemoved:
			if !p.Erased {
				mine(e, p.Username, e.EventID)
			}
		case *events.GroupDeleted:
			// Each member the delete removed sees it in their own feed.
			for _, m := range p.Members {
				if !m.Erased {
					mine(e, m.Username, e.EventID)
				}
			}
		}
		want[projections.EntityPK(e.Entity())+"/"+projections.ActivitySK(e.OccurredAt, e.EventID)] = true
	}
	got := map[string]bool{}
	for k := range s.Activities {
		got[k] = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("activity items %v, want one per event %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

// assertPointers checks that the read table holds a group pointer for every user that
// an event of applied added to a group, and no other.
func assertPointers(t testing.TB, s snapshot, applied []events.Envelope) {
	t.Helper()
	want := map[string]bool{}
	add := func(user, group string) { want["user#"+user+"/group#"+group] = true }
	for _, e := range applied {
		switch p := e.Payload.(type) {
		case *events.GroupMemberAdded:
			add(p.Username, e.Key)
		case *events.GroupMembersChanged:
			for _, m := range p.Added {
				add(m.Username, e.Key)
			}
		}
	}
	got := map[string]bool{}
	for k := range s.Pointers {
		got[k] = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("group pointers %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

// want is one item the read table must hold: attrs are attributes it must have with these
// values (all of them when exact), absent ones it must not have.
type want struct {
	key    string
	attrs  map[string]any
	absent []string
	exact  bool
}

// assertItems checks that the read table holds exactly the wanted items.
func assertItems(t testing.TB, s snapshot, wants []want) {
	t.Helper()
	keys := map[string]bool{}
	for _, w := range wants {
		keys[w.key] = true
		got, ok := s.Users[w.key]
		if !ok {
			t.Errorf("no item %s", w.key)
			continue
		}
		exp := normalize(w.attrs).(map[string]any)
		if w.exact {
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("item %s:\n  got  %s\n  want %s", w.key, js(got), js(exp))
			}
			continue
		}
		for name, v := range exp {
			if !reflect.DeepEqual(got[name], v) {
				t.Errorf("item %s: %s = %s, want %s", w.key, name, js(got[name]), js(v))
			}
		}
		for _, name := range w.absent {
			if v, ok := got[name]; ok {
				t.Errorf("item %s: has %s = %s, want none", w.key, name, js(v))
			}
		}
	}
	for k, it := range s.Users {
		if !keys[k] {
			t.Errorf("unexpected item %s: %s", k, js(it))
		}
	}
}

// normalize turns the ints of a literal into the float64 a decoded number is.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	}
	return v
}

// reset empties both tables, which is cheaper than creating new ones between the many
// orders a case tries.
func reset(t testing.TB, db *dynamodb.Client, tables projections.Tables) {
	t.Helper()
	ctx := context.Background()
	for _, tk := range []struct{ table, pk string }{{tables.Users, "id"}, {tables.Activities, "pk"}} {
		pages := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
			TableName: aws.String(tk.table), ConsistentRead: aws.Bool(true),
			ProjectionExpression:     aws.String("#pk, #sk"),
			ExpressionAttributeNames: map[string]string{"#pk": tk.pk, "#sk": "sk"},
		})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				t.Fatalf("scan %s: %v", tk.table, err)
			}
			for _, it := range page.Items {
				if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(tk.table), Key: it}); err != nil {
					t.Fatalf("delete from %s: %v", tk.table, err)
				}
			}
		}
	}
}
