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
	steps := [][]any{
		{commands.CreateUser{Username: "ann", Email: "ann@example.com"}, commands.CreateUser{Username: "ben", Email: "ben@example.com"},
			commands.CreateUser{Username: "cat", Email: "cat@example.com"}, commands.CreateGroup{Name: "G"}},
		{commands.AddMember{Group: "G", Username: "ann"}},
		{commands.ChangeMembers{Group: "G", Add: []string{"ben", "cat"}, Remove: []string{"ann"}}},
		{commands.RenameUser{Username: "ben", NewUsername: "bea"}},
		{commands.DeleteUser{Username: "cat"}},
		{commands.DeleteGroup{Name: "G"}},
		{commands.CreateGroup{Name: "G"}, commands.AddMember{Group: "G", Username: "ann"}},
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
		at   float64
		want []string // nil: no group G then
	}{
		{0.5, nil},
		{1.5, []string{}},
		{2.5, []string{"ann"}},
		{3.5, []string{"ben", "cat"}},
		{4.5, []string{"bea", "cat"}},
		{5.5, []string{"bea"}},
		{6.5, nil},
		{7.5, []string{"ann"}},
	} {
		page, err := r.Members(ctx, f.next.Users, "g", asof.Millis(at(c.at)), 50, "")
		if c.want == nil {
			if !errors.Is(err, asof.ErrNotFound) {
				t.Errorf("G at +%vs: %+v, %v; want not found", c.at, page, err)
			}
			continue
		}
		var got []string
		for _, m := range page.Items {
			got = append(got, m.Username)
		}
		slices.Sort(got)
		if err != nil || !slices.Equal(got, c.want) || page.Next != nil {
			t.Errorf("G at +%vs: %v (next %v), %v; want %v", c.at, got, page.Next, err, c.want)
		}
	}
}
