package projector

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestReplayRebuildsTheMembersFeeds: a replay's page writes the same activity items as
// the live projector did record by record — the users' copies of their membership
// changes (added alone, in bulk, removed alone and in bulk, across a rename) included.
func TestReplayRebuildsTheMembersFeeds(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "ann", Email: "ann@example.com"}, commands.CreateUser{Username: "bob", Email: "bob@example.com"},
		commands.CreateGroup{Name: "Admins"}, commands.CreateGroup{Name: "Ops"},
		commands.AddMember{Group: "admins", Username: "ann"},
		commands.ChangeMembers{Group: "ops", Add: []string{"ann", "bob"}},
		commands.ChangeMembers{Group: "admins", Add: []string{"bob"}, Remove: []string{"ann"}},
		commands.RenameUser{Username: "bob", NewUsername: "robert"},
		commands.ChangeMembers{Group: "ops", Remove: []string{"robert"}})
	if _, err := commands.NewRemoveMemberHandler(f.deps).Handle(ctx, f.tenant, commands.RemoveMember{Group: "ops", Username: "ann"}, f.meta); err != nil {
		t.Fatal(err)
	}

	live := projections.Tables{Users: dynamotest.UniqueName("live-users"), Activities: dynamotest.UniqueName("live-activities")}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(live.Users), dynamo.ActivitiesTable(live.Activities)} {
		if err := dynamo.EnsureTable(ctx, f.db, spec); err != nil {
			t.Fatal(err)
		}
	}
	log := f.log(t)
	for _, it := range log {
		if !dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
			continue
		}
		e, err := dynamo.DecodeRecord(f.reg, it)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.projector.Apply(ctx, live, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := f.replayer.applyPage(ctx, f.row, f.next, log, &checklist{}, &sync.Map{}); err != nil {
		t.Fatal(err)
	}

	scan := func(table string) map[string]map[string]any {
		out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		items := map[string]map[string]any{}
		for _, it := range out.Items {
			var m map[string]any
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				t.Fatal(err)
			}
			items[fmt.Sprint(m["pk"], " ", m["sk"])] = m
		}
		return items
	}
	want, got := scan(live.Activities), scan(f.next.Activities)
	copies := map[string]int{}
	for k, it := range want {
		if it["user_id"] != nil {
			copies[fmt.Sprint(it["pk"])]++
		}
		if !reflect.DeepEqual(it, got[k]) {
			t.Errorf("%s: live %v, replayed %v", k, it, got[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("%s only in the replay: %v", k, got[k])
		}
	}
	// ann: added to admins, to ops, removed from admins, from ops; bob: added to ops and
	// admins (as bob); robert: removed from ops.
	if w := map[string]int{"entity#user:ann": 4, "entity#user:bob": 2, "entity#user:robert": 1}; !reflect.DeepEqual(copies, w) {
		t.Errorf("membership items per user feed: %v, want %v", copies, w)
	}
}
