package erasure_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/events"
)

// TestReapplyCleansARestoredChangeFeed is a restore drill of the stage's change feed: a
// copy of {p}_events made before the erasure holds the person's own change and a group's
// membership change naming them; the re-application (--events-table) deletes the one,
// rewrites the other to an erased member, and leaves another person's change alone, and
// the change of a later user of the name (in the copy and in the stage's own feed, which
// a re-application without --events-table sweeps) as it was; a membership change whose
// change set names the member by username alone is the person's while they held the name
// and the later user's after.
func TestReapplyCleansARestoredChangeFeed(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	row := st.tenant(t, "s", "feeddrill")
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	erasureID := "00000000-0000-0000-0000-0000000000e7"
	ev := st.erasee(t, row, erasuretest.Spec{Username: "erasee", History: 2, Groups: 1, Others: 3, At: at}, erasureID)

	feed := changefeed.TableName(st.names)
	if err := dynamo.EnsureTable(ctx, st.db, changefeed.Table(feed)); err != nil {
		t.Fatal(err)
	}
	envelope := func(kind events.AggregateKind, key string, v int64, p events.Payload) events.Envelope {
		return events.Envelope{EventID: key + "-ev", Type: p.EventType(), Kind: kind, Key: key, Version: v, Actor: "seed", OccurredAt: at, Payload: p}
	}
	// named gives a membership change the change set its command records: the member by
	// username alone.
	named := func(env events.Envelope) events.Envelope {
		env.Changes = map[string]events.Change{"member": {New: "erasee"}}
		return env
	}
	a := changefeed.NewAppender(st.db, feed, changefeed.Options{})
	for _, env := range []events.Envelope{
		envelope(events.KindUser, "erasee", 2, &events.UserUpdated{User: events.User{ID: "id-erasee", Username: "erasee", Email: "erasee@example.org", Version: 2}}),
		envelope(events.KindGroup, "erasee-g0", 3, &events.GroupMemberAdded{Group: events.Group{ID: "gid-0", Key: "erasee-g0", Name: "G0", Version: 3},
			Username: "erasee", UserID: "id-erasee"}),
		envelope(events.KindUser, "other", 1, &events.UserCreated{User: events.User{ID: "id-other", Username: "other", Email: "other@example.org", Version: 1}}),
		// A single add's change set names the member by username alone.
		named(envelope(events.KindGroup, "erasee-g0", 4, &events.GroupMemberAdded{Group: events.Group{ID: "gid-0", Key: "erasee-g0", Name: "G0", Version: 4},
			Username: "erasee", UserID: "id-erasee"})),
	} {
		c, err := changefeed.FromEnvelope(row.SystemID, row.TenantID, env)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Append(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// The restore drill: the feed and the tenant's tables (where the re-application finds
	// the person again), copied before the erasure.
	restored := erasure.Restored{EventsTable: st.copyTable(t, changefeed.Table(feed+"_r"), feed),
		CommandsTable:   st.copyTable(t, dynamo.CommandsTable(row.CommandsTable+"_r"), row.CommandsTable),
		UsersTable:      st.copyTable(t, dynamo.UsersTable(row.UsersTable+"_r"), row.UsersTable),
		ActivitiesTable: st.copyTable(t, dynamo.ActivitiesTable(row.ActivitiesTable+"_r"), row.ActivitiesTable)}

	x := erasure.NewEraser(st.db, st.names, st.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond})
	run(t, st, x, row, ev)
	if err := x.Ledger().MarkDone(ctx, row.SystemID, row.TenantID, erasureID, commands.PlaceKeycloak); err != nil {
		t.Fatal(err)
	}
	// A later user takes the name after the erasure: their changes (their creation, an add
	// to the group whose change set names them by username alone) are in the live feed,
	// and in the copy too (a copy holding both), and name the name.
	after := time.Now().UTC().Add(time.Second)
	for _, env := range []events.Envelope{
		envelope(events.KindUser, "erasee", 1, &events.UserCreated{User: events.User{ID: "id-later", Username: "erasee", Email: "later@example.org", Version: 1}}),
		named(envelope(events.KindGroup, "erasee-g0", 5, &events.GroupMemberAdded{Group: events.Group{ID: "gid-0", Key: "erasee-g0", Name: "G0", Version: 5},
			Username: "erasee", UserID: "id-later"})),
	} {
		env.OccurredAt, env.EventID = after, "later-"+env.EventID
		later, err := changefeed.FromEnvelope(row.SystemID, row.TenantID, env)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Append(ctx, later); err != nil {
			t.Fatal(err)
		}
		if err := changefeed.NewAppender(st.db, restored.EventsTable, changefeed.Options{}).Append(ctx, later); err != nil {
			t.Fatal(err)
		}
	}
	laterIntact := func(table string) {
		t.Helper()
		n := 0
		for _, it := range st.contents(t, table) {
			if strings.Contains(it, `\"id\":\"later-`) { // its changes (their event ids), not its guard
				n++
				if strings.Contains(it, "erased") || !strings.Contains(it, `\"erasee\"`) {
					t.Errorf("the later user's change in %s was rewritten: %.400s", table, it)
				}
			}
		}
		if n != 2 {
			t.Errorf("%d of the later user's 2 changes left in %s", n, table)
		}
	}
	if _, err := x.Reapply(ctx, row.SystemID, row.TenantID, restored); err != nil {
		t.Fatal(err)
	}
	laterIntact(restored.EventsTable)
	// Without --events-table the stage's own feed is swept, by the ids alone too.
	live := restored
	live.EventsTable = ""
	if _, err := x.Reapply(ctx, row.SystemID, row.TenantID, live); err != nil {
		t.Fatal(err)
	}
	laterIntact(feed)

	canaries := []string{`"erasee"`, `\"erasee\"`, "erasee@", `id-erasee`}
	var other, group bool
	for _, it := range st.contents(t, restored.EventsTable) {
		if strings.Contains(it, "id-later") || strings.Contains(it, `\"id\":\"later-`) {
			continue // the later user's guard and changes, checked above
		}
		for _, c := range canaries {
			if strings.Contains(it, c) {
				t.Errorf("the restored feed still names the erased person (%s): %.300s", c, it)
				break
			}
		}
		other = other || strings.Contains(it, "other@example.org")
		group = group || strings.Contains(it, `member_added`) && strings.Contains(it, `{\"erased\":true}`)
	}
	if !other {
		t.Error("another person's change is gone from the restored feed")
	}
	if !group {
		t.Error("the group's membership change is not in the restored feed with an erased member")
	}
}

// TestAnErasureLeavesAnEarlierIncarnationsChangesInTheFeed: an earlier person under the
// name (deleted before the erased incarnation was created) was added to a group, a
// change whose change set names them by username alone. By default the erasure takes the
// incarnation the name resolves to: its own such change is rewritten in the live feed,
// the earlier person's stays as it was.
func TestAnErasureLeavesAnEarlierIncarnationsChangesInTheFeed(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	row := st.tenant(t, "s", "feedearlier")
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	erasureID := "00000000-0000-0000-0000-0000000000e8"
	ev := st.erasee(t, row, erasuretest.Spec{Username: "erasee", History: 2, Groups: 1, Others: 3, At: at}, erasureID)

	feed := changefeed.TableName(st.names)
	if err := dynamo.EnsureTable(ctx, st.db, changefeed.Table(feed)); err != nil {
		t.Fatal(err)
	}
	a := changefeed.NewAppender(st.db, feed, changefeed.Options{})
	for _, c := range []struct {
		id, userID string
		version    int64
		at         time.Time
	}{{"earlier-add", "id-earlier", 1, at.Add(-30 * time.Minute)}, {"erased-add", ev.PreviousID, 2, at.Add(time.Minute)}} {
		env := events.Envelope{EventID: c.id, Type: events.GroupMemberAddedType, Kind: events.KindGroup, Key: "feedgroup", Version: c.version,
			Actor: "seed", OccurredAt: c.at, Changes: map[string]events.Change{"member": {New: "erasee"}},
			Payload: &events.GroupMemberAdded{Group: events.Group{ID: "gid-feed", Key: "feedgroup", Name: "FeedGroup", Version: c.version}, Username: "erasee", UserID: c.userID}}
		change, err := changefeed.FromEnvelope(row.SystemID, row.TenantID, env)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Append(ctx, change); err != nil {
			t.Fatal(err)
		}
	}
	x := erasure.NewEraser(st.db, st.names, st.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond})
	run(t, st, x, row, ev)

	var earlier, erased bool
	for _, it := range st.contents(t, feed) {
		switch {
		case strings.Contains(it, `\"id\":\"earlier-add\"`):
			earlier = true
			if !strings.Contains(it, `\"new\":\"erasee\"`) {
				t.Errorf("the earlier person's change was rewritten: %.400s", it)
			}
		case strings.Contains(it, `\"id\":\"erased-add\"`):
			erased = true
			if strings.Contains(it, `"erasee"`) || strings.Contains(it, `\"erasee\"`) {
				t.Errorf("the erased person's change still names them: %.400s", it)
			}
		}
	}
	if !earlier || !erased {
		t.Errorf("the feed lost a change: earlier %v, erased %v", earlier, erased)
	}
}
