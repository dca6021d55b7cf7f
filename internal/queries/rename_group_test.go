package queries

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestAGroupRenameIsProjectedAsTheGroupUnderItsNewName runs real commands on the write
// side, projects their records, and reads the result through the query service: the group
// under the new name (onto a name an earlier group left) with the same id, its members
// and the users' groups following it (also through a later rename of a member), the old
// name free for a new group, and the whole history in the new name's activity feed. The
// records applied in the opposite order, and as a replay's batch, give the same tables.
func TestAGroupRenameIsProjectedAsTheGroupUnderItsNewName(t *testing.T) {
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
	var renamed events.Group
	run := func(cmds ...any) {
		t.Helper()
		for _, c := range cmds {
			var err error
			switch c := c.(type) {
			case commands.CreateUser:
				_, err = commands.NewCreateUserHandler(deps, nil).Handle(ctx, tenant, c, meta)
			case commands.CreateGroup:
				_, err = commands.NewCreateGroupHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.DeleteGroup:
				_, err = commands.NewDeleteGroupHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.AddMember:
				_, err = commands.NewAddMemberHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.RemoveMember:
				_, err = commands.NewRemoveMemberHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.RenameUser:
				_, err = commands.NewRenameUserHandler(deps).Handle(ctx, tenant, c, meta)
			case commands.RenameGroup:
				renamed, err = commands.NewRenameGroupHandler(deps).Handle(ctx, tenant, c, meta)
			default:
				t.Fatalf("no handler for %T", c)
			}
			if err != nil {
				t.Fatalf("%T %+v: %v", c, c, err)
			}
		}
	}
	run(
		// An earlier Crew, deleted at v2.
		commands.CreateGroup{Name: "Crew"}, commands.DeleteGroup{Name: "crew"},
		commands.CreateUser{Username: "ann"}, commands.CreateUser{Username: "bob"},
		commands.CreateGroup{Name: "Old"}, commands.AddMember{Group: "old", Username: "ann"}, commands.AddMember{Group: "old", Username: "bob"},
		commands.RenameGroup{Name: "old", NewName: "Crew"},
	)
	run(commands.RemoveMember{Group: "crew", Username: "bob"}, commands.RenameUser{Username: "ann", NewUsername: "anna"},
		commands.CreateGroup{Name: "old"})

	es := history(t, f.DB, reg, f.Names.Commands(f.System, f.ID))
	apply(t, f, es...)

	g, err := svc.Group(ctx, f.System, f.ID, "CREW", 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.ID != renamed.ID || g.Name != "Crew" {
		t.Errorf("crew = %+v, want the renamed group %s", g, renamed.ID)
	}
	if again, err := svc.Group(ctx, f.System, f.ID, "old", 0); err != nil || again.ID == renamed.ID {
		t.Errorf("old = %+v (%v), want the new group of the name", again, err)
	}
	ms, err := svc.GroupMembers(ctx, f.System, f.ID, "crew", PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms.Items) != 1 || ms.Items[0].Username != "anna" {
		t.Errorf("members of crew = %+v, want anna", ms.Items)
	}
	if ms, err := svc.GroupMembers(ctx, f.System, f.ID, "old", PageRequest{}); err != nil || len(ms.Items) != 0 {
		t.Errorf("members of the new old = %+v (%v), want none", ms.Items, err)
	}
	gs, err := svc.UserGroups(ctx, f.System, f.ID, "anna", PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if names := groupNames(gs.Items); !slices.Equal(names, []string{"Crew"}) {
		t.Errorf("groups of anna = %v, want Crew", names)
	}
	if gs, err := svc.UserGroups(ctx, f.System, f.ID, "bob", PageRequest{}); err != nil || len(gs.Items) != 0 {
		t.Errorf("groups of bob = %v (%v), want none", groupNames(gs.Items), err)
	}
	if _, err := svc.GroupMembers(ctx, f.System, f.ID, "nothing", PageRequest{}); apperr.KindOf(err) != apperr.KindNotFound {
		t.Errorf("members of an unknown group: %v, want 404", err)
	}

	// The feed of the new name: the group's whole history (created as Old, its joins, the
	// rename, a leave as Crew), newest first, besides what the earlier Crew did; not the
	// new Old's creation.
	feed := walkActivity(t, svc, f.System, f.ID, "group:crew", 0)
	var got []string
	for _, a := range feed {
		got = append(got, fmt.Sprintf("%s %s v%d", a.Entity, a.Type, a.Version))
	}
	want := []string{"group:crew group.member_removed v5", "group:crew group.renamed v4",
		"group:old group.member_added v3", "group:old group.member_added v2", "group:old group.created v1",
		"group:crew group.deleted v2", "group:crew group.created v1"}
	if !slices.Equal(got, want) {
		t.Errorf("crew's feed = %v, want %v", got, want)
	}
	for _, limit := range []int{1, 2, 3} {
		if paged := walkActivity(t, svc, f.System, f.ID, "group:crew", limit); !reflect.DeepEqual(paged, feed) {
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
