package projections_test

import (
	"slices"
	"testing"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestAUsersFeedShowsTheirMemberships: every membership change — one member added or
// removed, or many in one members change — is in the member's own feed too, newest first
// among the user's own events, with its actor, time, group version and the group's name;
// an erased member gets nothing; the actor's and the day's feeds list each change once;
// and records delivered twice leave the same items.
func TestAUsersFeedShowsTheirMemberships(t *testing.T) {
	t.Parallel()
	db := client(t)
	w := newWorld(t)
	w.createUser("jdoe", "jdoe@example.com", "Jane", "Doe") // ev0001
	w.createUser("ann", "ann@example.com", "Ann", "Smith")  // ev0002
	w.createGroup("Admins", "")                             // ev0003
	w.actor = "alice"
	w.addMember("admins", "jdoe") // ev0004
	w.actor = "bob"
	bulk := w.changeMembers("admins", []string{"ann"}, []string{"jdoe"}) // ev0005: .0000 ann added, .0001 jdoe removed
	w.updateUser("jdoe", func(u *events.User) { u.LastName = "Roe" })    // ev0006
	w.actor = "carol"
	w.removeMember("admins", "ann") // ev0007
	// A record rewritten by an erasure names no member: no one's feed gets it.
	w.tick()
	g := w.groups["admins"]
	g.state.Version++
	erased := w.record(events.KindGroup, "admins", g.state.Version,
		&events.GroupMemberAdded{Group: g.state, Erased: true}, map[string]events.Change{"member": {New: events.ErasedValue()}})

	p := projections.New(db, projections.Options{Retention: retention})
	tables := newTables(t, db)
	applyAll(t, p, tables, w.log)
	first := takeSnapshot(t, db, tables)
	applyAll(t, p, tables, w.log)
	if d := first.diff(takeSnapshot(t, db, tables)); d != "" {
		t.Errorf("records delivered again changed the tables:\n%s", d)
	}
	assertActivities(t, first, w.log)

	type row struct {
		eventID, typ, entity, actor string
		version                     int64
		changes                     string
	}
	feed := func(pk string) ([]row, []projections.ActivityView) {
		var rows []row
		var views []projections.ActivityView
		for _, it := range query(t, db, byKey(tables.Activities, "", "pk", pk, "", "", false)) {
			a, err := projections.DecodeActivity(it)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row{a.EventID, a.Type, a.Entity, a.Actor, a.Version, a.Changes})
			views = append(views, a)
		}
		return rows, views
	}
	jdoe, views := feed(projections.EntityPK("user:jdoe"))
	if len(jdoe) != 4 {
		t.Fatalf("jdoe's feed: %+v, want 4 items (created, added, removed, updated)", jdoe)
	}
	want := []row{
		{"ev0006", "user.updated", "user:jdoe", "bob", 2, `{"last_name":{"old":"Doe","new":"Roe"}}`},
		{bulk.EventID + ".0001", "group.member_removed", "group:admins", "bob", 3, `{"group":{"old":"Admins","new":null}}`},
		{"ev0004", "group.member_added", "group:admins", "alice", 2, `{"group":{"old":null,"new":"Admins"}}`},
		{"ev0001", "user.created", "user:jdoe", "admin-1", 1, jdoe[3].changes},
	}
	if !slices.Equal(jdoe, want) {
		t.Errorf("jdoe's feed:\n got %+v\nwant %+v", jdoe, want)
	}
	for _, a := range views[1:3] {
		if a.UserID != w.users["jdoe"].state.ID || a.ActorPK != "" || a.DayPK != "" || a.ExpiresAt == 0 {
			t.Errorf("jdoe's copy of %s: user id %q, actor_pk %q, day_pk %q, expires %d; want jdoe's id, no index keys, a TTL",
				a.EventID, a.UserID, a.ActorPK, a.DayPK, a.ExpiresAt)
		}
		if byGroup := first.Activities[projections.EntityPK("group:admins")+"/"+a.SK]; byGroup["occurred_at"] != a.OccurredAt {
			t.Errorf("jdoe's copy of %s is at %s, the group's item at %v", a.EventID, a.OccurredAt, byGroup["occurred_at"])
		}
	}
	if views[0].UserID != "" {
		t.Errorf("the user's own event carries user_id %q", views[0].UserID)
	}

	ann, _ := feed(projections.EntityPK("user:ann"))
	if len(ann) != 3 {
		t.Fatalf("ann's feed: %+v, want 3 items (created, added, removed)", ann)
	}
	wantAnn := []row{
		{"ev0007", "group.member_removed", "group:admins", "carol", 4, `{"group":{"old":"Admins","new":null}}`},
		{bulk.EventID + ".0000", "group.member_added", "group:admins", "bob", 3, `{"group":{"old":null,"new":"Admins"}}`},
		{"ev0002", "user.created", "user:ann", "admin-1", 1, ann[2].changes},
	}
	if !slices.Equal(ann, wantAnn) {
		t.Errorf("ann's feed:\n got %+v\nwant %+v", ann, wantAnn)
	}

	ids := func(items []projections.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, dynamo.StringAttr(it, "pk")+" "+dynamo.StringAttr(it, "event_id"))
		}
		return out
	}
	if got, want := ids(query(t, db, byKey(tables.Activities, dynamo.IndexActor, "actor_pk", projections.ActorPK("bob"), "", "", true))),
		[]string{"entity#group:admins ev0005.0000", "entity#group:admins ev0005.0001", "entity#user:jdoe ev0006"}; !slices.Equal(got, want) {
		t.Errorf("bob's feed: %v, want %v", got, want)
	}
	if got, want := ids(query(t, db, byKey(tables.Activities, dynamo.IndexDay, "day_pk", projections.DayPK(t0), "", "", true))), []string{
		"entity#user:jdoe ev0001", "entity#user:ann ev0002", "entity#group:admins ev0003", "entity#group:admins ev0004",
		"entity#group:admins ev0005.0000", "entity#group:admins ev0005.0001", "entity#user:jdoe ev0006",
		"entity#group:admins ev0007", "entity#group:admins " + erased.EventID,
	}; !slices.Equal(got, want) {
		t.Errorf("the day's feed: %v, want %v", got, want)
	}
	for k := range first.Activities {
		if first.Activities[k]["event_id"] == erased.EventID && first.Activities[k]["pk"] != projections.EntityPK("group:admins") {
			t.Errorf("the erased member's change is in %s", k)
		}
	}
}
