package projector_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/projector"
)

// TestAReplayAfterAnErasureAnswersAsOfAsTheLiveIndex: ann is added, removed, added again
// in bulk, given an expiry, and erased; carl, added with bob, is deleted, and erased
// later; bob is left alone. The live index shows ann and carl as erased members over
// their intervals (carl's ends at his delete, not at his erasure). A replay rebuilds the index
// from the log, whose records of ann are rewritten by then: its members at instants
// between the steps, bob's groups, and the access report's rows are the live ones.
func TestAReplayAfterAnErasureAnswersAsOfAsTheLiveIndex(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	w.handler.Index(asof.New(w.db))
	x := w.erasing()

	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	at := func(step float64) time.Time { return t0.Add(time.Duration(step * float64(time.Second))) }
	var now time.Time
	w.deps.Now = func() time.Time { return now }
	expires := t0.Add(3 * time.Hour)
	erasureID, carlErasure := uuid.NewString(), uuid.NewString()
	steps := []func() error{
		func() error {
			for _, u := range []string{"ann", "bob", "carl"} {
				if _, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: u, FirstName: "Person" + u}, w.meta()); err != nil {
					return err
				}
			}
			return second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta()))
		},
		func() error {
			return second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "ann"}, w.meta()))
		},
		func() error {
			return second(commands.NewChangeMembersHandler(w.deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "g", Add: []string{"bob", "carl"}}, w.meta()))
		},
		func() error {
			if err := second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: "carl"}, w.meta())); err != nil {
				return err
			}
			return second(commands.NewRemoveMemberHandler(w.deps).Handle(ctx, w.tenant, commands.RemoveMember{Group: "g", Username: "ann"}, w.meta()))
		},
		func() error {
			return second(commands.NewChangeMembersHandler(w.deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "g", Add: []string{"ann"}}, w.meta()))
		},
		func() error {
			return second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant,
				commands.AddMember{Group: "g", Username: "ann", Expiry: &commands.ExpiryChange{At: &expires}}, w.meta()))
		},
		func() error {
			if err := second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "ann", Reason: "a request", ErasureID: erasureID}, w.meta())); err != nil {
				return err
			}
			return second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "carl", Reason: "a request", ErasureID: carlErasure}, w.meta()))
		},
	}
	for i, step := range steps {
		now = at(float64(i + 1))
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i+1, err)
		}
		w.project(t)
	}
	w.project(t) // the erasure's second pass
	for _, id := range []string{erasureID, carlErasure} {
		if e, err := x.Ledger().Get(ctx, "s", "t", id); err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
			t.Fatalf("the erasure: %+v, %v", e, err)
		}
	}

	live := w.row.UsersTable
	r := projector.NewReplayer(w.db, w.names, w.tenants, projections.New(w.db, projections.Options{}), events.NewRegistry(), zap.NewNop())
	rep, err := r.Run(ctx, "s", "t", projector.ReplayOptions{SwitchWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	replayed := rep.UsersTable
	if replayed == live {
		t.Fatalf("the replay wrote into the live table %s", live)
	}

	reader := asof.NewReader(w.db)
	members := func(table string, step float64) string {
		page, err := reader.Members(ctx, table, "g", asof.Millis(at(step)), 50, "")
		if err != nil {
			return err.Error()
		}
		var out []string
		for _, m := range page.Items {
			out = append(out, fmt.Sprintf("%s/%v/%s/%s", m.Username, m.Erased, m.AddedAt.Format(time.RFC3339Nano), m.AddedBy))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	groups := func(table string, step float64) string {
		page, err := reader.Groups(ctx, table, "bob", asof.Millis(at(step)), 50, "")
		if err != nil {
			return err.Error()
		}
		return fmt.Sprintf("%+v", page.Items)
	}
	// The live answers are the ones expected: ann shows as an erased member over her
	// intervals, and not after her erasure.
	for step, want := range map[float64]int{2.5: 1, 3.5: 3, 4.5: 1, 5.5: 2, 6.5: 2, 7.5: 1} {
		if got := members(live, step); strings.Count(got, "/") != 3*want || (step != 4.5 && step != 7.5) != strings.Contains(got, "/true/") {
			t.Errorf("live members at +%vs: %s; want %d, ann among them as erased while she was a member", step, got, want)
		}
	}
	for _, step := range []float64{0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5} {
		if l, p := members(live, step), members(replayed, step); l != p {
			t.Errorf("members at +%vs: live %q, replayed %q", step, l, p)
		}
		if l, p := groups(live, step), groups(replayed, step); l != p {
			t.Errorf("bob's groups at +%vs: live %s, replayed %s", step, l, p)
		}
	}

	report := func(table string) []string {
		var rows []string
		if err := asof.Report(ctx, w.db, table, asof.Millis(at(0)), asof.Millis(at(9)), 0, func(rs []asof.Row) error {
			for _, row := range rs {
				rows = append(rows, fmt.Sprintf("%+v", reportRow(row)))
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(rows)
		return rows
	}
	l, p := report(live), report(replayed)
	if len(l) != 4 {
		t.Errorf("live report: %v; want ann's two intervals, bob's and carl's", l)
	}
	if !reflect.DeepEqual(l, p) {
		t.Errorf("access report:\nlive     %v\nreplayed %v", l, p)
	}
}

// printedRow is a report row with its instants as text (a pointer prints as an address).
type printedRow struct {
	Group, Username, UserID string
	Erased                  bool
	AddedAt, AddedBy        string
	RemovedAt, RemovedBy    string
	ExpiresAt, Periods      string
}

func reportRow(r asof.Row) printedRow {
	opt := func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.Format(time.RFC3339Nano)
	}
	var periods []string
	for _, p := range r.UserPeriods {
		periods = append(periods, fmt.Sprintf("%s[%s,%s)", p.Status, p.From.Format(time.RFC3339Nano), opt(p.To)))
	}
	return printedRow{Group: r.Group, Username: r.Username, UserID: r.UserID, Erased: r.Erased,
		AddedAt: r.AddedAt.Format(time.RFC3339Nano), AddedBy: r.AddedBy, RemovedAt: opt(r.RemovedAt), RemovedBy: r.RemovedBy,
		ExpiresAt: opt(r.ExpiresAt), Periods: strings.Join(periods, " ")}
}
