package projector

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/commands"
)

// TestReplayRebuildsTheAsOfIndex runs real commands at known instants — adds, a bulk
// change that adds and removes, a rename, a user delete, a group delete and re-create —
// rebuilds the tables from the log as a replay's page does, and reads the members at
// instants between the steps from the rebuilt index.
func TestReplayRebuildsTheAsOfIndex(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	var now time.Time
	f.deps.Now = func() time.Time { return now }
	at := func(step float64) time.Time { return t0.Add(time.Duration(step * float64(time.Second))) }
	expires, renewed := t0.Add(2*time.Hour), t0.Add(3*time.Hour)
	steps := [][]any{
		{commands.CreateUser{Username: "ann", Email: "ann@example.com"}, commands.CreateUser{Username: "ben", Email: "ben@example.com"},
			commands.CreateUser{Username: "cat", Email: "cat@example.com"}, commands.CreateGroup{Name: "G"}},
		{commands.AddMember{Group: "G", Username: "ann"}},
		{commands.ChangeMembers{Group: "G", Add: []string{"ben", "cat"}, Remove: []string{"ann"}}},
		{commands.RenameUser{Username: "ben", NewUsername: "bea"}},
		{commands.DeleteUser{Username: "cat"}},
		{commands.DeleteGroup{Name: "G"}},
		{commands.CreateGroup{Name: "G"}, commands.AddMember{Group: "G", Username: "ann"}},
		{commands.RenameGroup{Name: "G", NewName: "H"}},
		// An expiry set when added, then renewed: the report has the renewed one.
		{commands.AddMember{Group: "H", Username: "bea", Expiry: &commands.ExpiryChange{At: &expires}}},
		{commands.AddMember{Group: "H", Username: "bea", Expiry: &commands.ExpiryChange{At: &renewed}}},
	}
	for i, s := range steps {
		now = at(float64(i + 1))
		f.run(t, s...)
	}
	if _, _, err := f.replayer.applyPage(ctx, f.row, f.next, f.log(t), &checklist{}, &sync.Map{}); err != nil {
		t.Fatal(err)
	}
	r := asof.NewReader(f.db)
	for _, c := range []struct {
		at    float64
		group string
		want  []string // nil: no group of the name then
	}{
		{0.5, "g", nil},
		{1.5, "g", []string{}},
		{2.5, "g", []string{"ann"}},
		{3.5, "g", []string{"ben", "cat"}},
		{4.5, "g", []string{"bea", "cat"}},
		{5.5, "g", []string{"bea"}},
		{6.5, "g", nil},
		{7.5, "g", []string{"ann"}},
		{7.5, "h", nil},
		// The rename: the name g is free, the group (and its member) under h.
		{8.5, "g", nil},
		{8.5, "h", []string{"ann"}},
		{10.5, "h", []string{"ann", "bea"}},
	} {
		page, err := r.Members(ctx, f.next.Users, c.group, asof.Millis(at(c.at)), 50, "")
		if c.want == nil {
			if !errors.Is(err, asof.ErrNotFound) {
				t.Errorf("%s at +%vs: %+v, %v; want not found", c.group, c.at, page, err)
			}
			continue
		}
		var got []string
		for _, m := range page.Items {
			got = append(got, m.Username)
		}
		slices.Sort(got)
		if err != nil || !slices.Equal(got, c.want) || page.Next != nil {
			t.Errorf("%s at +%vs: %v (next %v), %v; want %v", c.group, c.at, got, page.Next, err, c.want)
		}
	}
	var rows []asof.Row
	if err := asof.Report(ctx, f.db, f.next.Users, asof.Millis(at(0)), asof.Millis(at(11)), 0, func(rs []asof.Row) error {
		for _, row := range rs {
			if row.Username == "bea" && row.Group == "H" {
				rows = append(rows, row)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ExpiresAt == nil || !rows[0].ExpiresAt.Equal(renewed) {
		t.Errorf("bea's interval in H from the rebuilt index: %+v; want one expiring at %v (the renewal)", rows, renewed)
	}
}
