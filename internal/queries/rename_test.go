package queries

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/objects"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestARenameIsProjectedAsThePersonUnderItsNewName runs real commands on the write side,
// projects their records, and reads the result through the query service: the person
// under the new name with the same id, the old name gone, the memberships moved (also
// into a group where an earlier user of the new name left a tombstone at the group's
// current version), and the whole history in the new name's activity feed. The records
// applied in the opposite order, and as a replay's batch, give the same tables.
func TestARenameIsProjectedAsThePersonUnderItsNewName(t *testing.T) {
	ctx := t.Context()
	svc, f := fixture(t, nil, Options{})
	if err := dynamo.EnsureTable(ctx, f.DB, dynamo.CommandsTable(f.Names.Commands(f.System, f.ID))); err != nil {
		t.Fatal(err)
	}
	reg := events.NewRegistry()
	store := dynamo.NewCommandStore(f.DB, f.Names, reg, 0)
	deps := commands.Deps{Store: store, Now: time.Now, NewID: uuid.NewString}
	tenant := commands.Tenant{System: f.System, ID: f.ID}
	meta := commands.Meta{Actor: "tester", CommandID: "c", CorrelationID: "c"}
	var ann events.User
	run := func(cmds ...any) {
		t.Helper()
		for _, c := range cmds {
			var err error
			switch c := c.(type) {
			case commands.CreateUser:
				_, err = commands.NewCreateUserHandler(deps, nil).Handle(ctx, tenant, c, meta)
			case commands.UpdateUser:
				_, err = commands.NewUpdateUserHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.DeleteUser:
				_, err = commands.NewDeleteUserHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.CreateGroup:
				_, err = commands.NewCreateGroupHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.AddMember:
				_, err = commands.NewAddMemberHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.RemoveMember:
				_, err = commands.NewRemoveMemberHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.RenameUser:
				ann, err = commands.NewRenameUserHandler(deps).Handle(ctx, tenant, c, meta)
			}
			if err != nil {
				t.Fatalf("%T %+v: %v", c, c, err)
			}
		}
	}
	first := "Ann"
	run(
		// An earlier bob, in g1 and removed from it at g1's last version, then deleted.
		commands.CreateUser{Username: "bob"}, commands.CreateGroup{Name: "g1"}, commands.CreateGroup{Name: "G2"},
		commands.AddMember{Group: "g1", Username: "bob"},
		commands.CreateUser{Username: "ann", Email: "ann@example.com"}, commands.UpdateUser{Username: "ann", FirstName: &first},
		commands.AddMember{Group: "g1", Username: "ann"}, commands.AddMember{Group: "g2", Username: "ann"},
		commands.RemoveMember{Group: "g1", Username: "bob"}, commands.DeleteUser{Username: "bob"},
		commands.RenameUser{Username: "ann", NewUsername: "bob"},
	)
	last := "Smith"
	run(commands.UpdateUser{Username: "bob", LastName: &last})

	es := history(t, f.DB, reg, f.Names.Commands(f.System, f.ID))
	apply(t, f, es...)

	u, err := svc.User(ctx, f.System, f.ID, "bob", 0)
	if err != nil {
		t.Fatal(err)
	}
	if u.ID != ann.ID || u.FirstName != "Ann" || u.LastName != "Smith" || u.Email != "ann@example.com" {
		t.Errorf("bob = %+v, want ann's person %s", u, ann.ID)
	}
	if _, err := svc.User(ctx, f.System, f.ID, "ann", 0); apperr.KindOf(err) != apperr.KindNotFound {
		t.Errorf("the old name: %v, want 404", err)
	}
	for _, g := range []string{"g1", "g2"} {
		ms, err := svc.GroupMembers(ctx, f.System, f.ID, g, PageRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms.Items) != 1 || ms.Items[0].Username != "bob" || ms.Items[0].ID != ann.ID {
			t.Errorf("members of %s = %+v, want the renamed bob", g, ms.Items)
		}
	}
	gs, err := svc.UserGroups(ctx, f.System, f.ID, "bob", PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if names := groupNames(gs.Items); !slices.Equal(names, []string{"G2", "g1"}) && !slices.Equal(names, []string{"g1", "G2"}) {
		t.Errorf("groups of bob = %v, want g1 and G2", names)
	}
	if gs, err := svc.UserGroups(ctx, f.System, f.ID, "ann", PageRequest{}); err == nil && len(gs.Items) > 0 {
		t.Errorf("groups of the old name = %v, want none", groupNames(gs.Items))
	}

	// The feed of the new name: the person's whole history (created as ann, updated, added
	// to g1 and G2, the rename, updated as bob), newest first, besides what the earlier bob
	// did (his memberships of g1 included).
	feed := walkActivity(t, svc, f.System, f.ID, "user:bob", 0)
	var got []string
	for _, a := range feed {
		got = append(got, fmt.Sprintf("%s %s v%d", a.Entity, a.Type, a.Version))
	}
	// Newest first, in the order they happened; the rename goes on from the earlier bob's
	// tombstone (v2).
	want := []string{"user:bob user.updated v4", "user:bob user.renamed v3", "user:bob user.deleted v2",
		"group:g1 group.member_removed v4", "group:g2 group.member_added v2", "group:g1 group.member_added v3",
		"user:ann user.updated v2", "user:ann user.created v1", "group:g1 group.member_added v2", "user:bob user.created v1"}
	if !slices.Equal(got, want) {
		t.Errorf("bob's feed = %v, want %v", got, want)
	}
	if g2 := string(feed[4].Changes); g2 != `{"group":{"old":null,"new":"G2"}}` || feed[4].Actor != "tester" {
		t.Errorf("ann's addition to G2 in bob's feed: %+v, want the group's name as the change, and the actor", feed[4])
	}
	for _, limit := range []int{1, 2, 3} {
		if paged := walkActivity(t, svc, f.System, f.ID, "user:bob", limit); !reflect.DeepEqual(paged, feed) {
			t.Errorf("walked by %d: %d items, not the feed of %d", limit, len(paged), len(feed))
		}
	}

	// The same records the other way round, and as one batch, leave the same tables.
	forward := dump(t, f.DB, f.Tables())
	p := projections.New(f.DB, projections.Options{})
	backward := freshTables(t, f.DB, "back")
	for _, e := range slices.Backward(es) {
		if err := p.Apply(ctx, backward, e); err != nil {
			t.Fatal(err)
		}
	}
	batch := freshTables(t, f.DB, "batch")
	if err := p.ApplyBatch(ctx, batch, es); err != nil {
		t.Fatal(err)
	}
	for name, tables := range map[string]projections.Tables{"backward": backward, "batch": batch} {
		if got := dump(t, f.DB, tables); !reflect.DeepEqual(got, forward) {
			for k, v := range forward {
				if !reflect.DeepEqual(got[k], v) {
					t.Errorf("%s: %s = %v, forward %v", name, k, got[k], v)
				}
			}
			for k := range got {
				if _, ok := forward[k]; !ok {
					t.Errorf("%s: %s only there", name, k)
				}
			}
		}
	}
}

func groupNames(gs []objects.Group) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Name
	}
	return out
}

// history is every history record of the command table, in the order they were recorded.
func history(t *testing.T, db *dynamodb.Client, reg *events.Registry, table string) []events.Envelope {
	t.Helper()
	out, err := db.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var es []events.Envelope
	for _, it := range out.Items {
		if dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
			e, err := dynamo.DecodeRecord(reg, it)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
	}
	slices.SortStableFunc(es, func(a, b events.Envelope) int { return a.OccurredAt.Compare(b.OccurredAt) })
	return es
}

func walkActivity(t *testing.T, svc *Service, system, tenant, entity string, limit int) []Activity {
	t.Helper()
	var out []Activity
	q := ActivityQuery{Entity: entity, Page: PageRequest{Limit: limit}}
	for range 100 {
		page, err := svc.Activity(t.Context(), system, tenant, q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
		if page.NextCursor == nil {
			return out
		}
		q.Page.Cursor = *page.NextCursor
	}
	t.Fatal("the walk does not end")
	return nil
}

func freshTables(t *testing.T, db *dynamodb.Client, name string) projections.Tables {
	t.Helper()
	tables := projections.Tables{Users: dynamotest.UniqueName(name + "_users"), Activities: dynamotest.UniqueName(name + "_act")}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(tables.Users), dynamo.ActivitiesTable(tables.Activities)} {
		if err := dynamo.EnsureTable(t.Context(), db, spec); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, n := range []string{tables.Users, tables.Activities} {
			_ = dynamo.DeleteTable(context.Background(), db, n)
		}
	})
	return tables
}

// dump is every item of both tables but the projection times, by key.
func dump(t *testing.T, db *dynamodb.Client, tables projections.Tables) map[string]map[string]types.AttributeValue {
	t.Helper()
	out := map[string]map[string]types.AttributeValue{}
	for _, table := range []string{tables.Users, tables.Activities} {
		res, err := db.Scan(t.Context(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			delete(it, "updated_at")
			k := dynamo.StringAttr(it, "id") + dynamo.StringAttr(it, "pk") + "|" + dynamo.StringAttr(it, "sk")
			out[k] = it
		}
	}
	return out
}
