package asof_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

// reportStory is story() with alice deactivated and activated again, so that the report
// shows a user's periods.
func reportStory() *history {
	h := story()
	alice := user("u-alice", "alice", h.at(1))
	alice.IsActive = false
	h.add(2.5, events.KindUser, "alice", "admin", &events.UserDeactivated{User: alice})
	alice.IsActive = true
	h.add(3.5, events.KindUser, "alice", "helpdesk", &events.UserActivated{User: alice})
	return h
}

// rowString is a row in one line: group/id user/id +at by -at by [periods].
func rowString(h *history, r asof.Row) string {
	sec := func(t time.Time) string { return strings.TrimSuffix(t.Sub(h.t0).String(), "s") }
	user := r.Username + "/" + r.UserID
	if r.Erased {
		user = "(erased)"
	}
	out := r.Group + "/" + r.GroupID + " " + user + " +" + sec(r.AddedAt) + " " + r.AddedBy
	if r.RemovedAt != nil {
		out += " -" + sec(*r.RemovedAt) + " " + r.RemovedBy
	}
	if r.ExpiresAt != nil {
		out += " expires " + sec(*r.ExpiresAt)
	}
	var ps []string
	for _, p := range r.UserPeriods {
		s := string(p.Status) + " " + sec(p.From) + "-"
		if p.To != nil {
			s += sec(*p.To)
		}
		ps = append(ps, s)
	}
	return out + " [" + strings.Join(ps, ", ") + "]"
}

func report(t *testing.T, h *history, table string, from, to float64, pageSize int32) []string {
	t.Helper()
	var out []string
	err := asof.Report(context.Background(), dynamotest.Current(t).DynamoDB(), table, asof.Millis(h.at(from)), asof.Millis(h.at(to)), pageSize, func(rows []asof.Row) error {
		for _, r := range rows {
			out = append(out, rowString(h, r))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestReportIsEveryIntervalOfTheRange: the report of the story's history, built in order
// and shuffled (every record twice), over several ranges: every interval that overlaps
// the range, with its instants and actors as recorded (one of them a formula), the names
// held at the interval's start in the range (bob before his rename, robert after), the
// intervals a user's or a group's delete ended, an erased member, and the users' periods.
func TestReportIsEveryIntervalOfTheRange(t *testing.T) {
	ctx := context.Background()
	h := reportStory()
	alicePeriods := "[active 1-2.5, inactive 2.5-3.5, active 3.5-]"
	for _, order := range []string{"in order", "shuffled twice"} {
		t.Run(order, func(t *testing.T) {
			x, _, table := newTable(t)
			applyIn(t, x, table, h.es, order, 11)
			if err := asof.Erase(ctx, dynamotest.Current(t).DynamoDB(), table, []string{asof.Hash("u-dave")}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name     string
				from, to float64
				want     []string
			}{
				{"everything", 0, 10, []string{
					"ENG/g-2 (erased) +8.5 admin -9 dpo [active 8-9, deleted 9-]",
					"ENG/g-2 alice/u-alice +8.5 admin " + alicePeriods,
					"Eng/g-1 alice/u-alice +2 admin -4 scim:okta " + alicePeriods,
					"Eng/g-1 bob/u-bob +3 =cmd|' /C calc'!A0 -7 admin [active 1-]",
					"Eng/g-1 carol/u-carol +4 scim:okta -6 admin [active 1-6, deleted 6-]",
				}},
				{"after the rename", 5.5, 6.5, []string{
					"Eng/g-1 carol/u-carol +4 scim:okta -6 admin [active 1-6, deleted 6-]",
					"Eng/g-1 robert/u-bob +3 =cmd|' /C calc'!A0 -7 admin [active 1-]",
				}},
				{"to is exclusive, from inclusive", 4, 8.5, []string{
					"Eng/g-1 bob/u-bob +3 =cmd|' /C calc'!A0 -7 admin [active 1-]",
					"Eng/g-1 carol/u-carol +4 scim:okta -6 admin [active 1-6, deleted 6-]",
				}},
				{"alice's inactive period only", 2.6, 3.4, []string{
					"Eng/g-1 alice/u-alice +2 admin -4 scim:okta [inactive 2.5-3.5]",
					"Eng/g-1 bob/u-bob +3 =cmd|' /C calc'!A0 -7 admin [active 1-]",
				}},
				{"before anything", 0, 1, nil},
			} {
				// Pages of 3 scanned items: the rows of a range come a page at a time.
				for _, size := range []int32{0, 3} {
					if got := report(t, h, table, c.from, c.to, size); !slices.Equal(got, c.want) {
						t.Errorf("%s (pages of %d): got\n%s\nwant\n%s", c.name, size, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
					}
				}
			}
		})
	}
}

// expiryStory: memberships that expire (docs/expiry.md). alice is added expiring at 10,
// renewed to 20, removed by an admin, added again by a bulk change expiring at 30 and that
// expiry cleared; bob is added by a bulk change expiring at 5 and removed then by the
// expiry; carol is added without an expiry and given one later.
func expiryStory() *history {
	h := &history{t0: time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)}
	at := func(sec float64) *time.Time { t := h.at(sec); return &t }
	eng := events.Group{ID: "g-1", Key: "eng", Name: "Eng", CreatedAt: h.at(1)}
	h.add(1, events.KindGroup, "eng", "admin", &events.GroupCreated{Group: eng})
	for _, u := range []string{"alice", "bob", "carol"} {
		h.add(1, events.KindUser, u, "admin", &events.UserCreated{User: user("u-"+u, u, h.at(1))})
	}
	h.add(2, events.KindGroup, "eng", "admin", &events.GroupMemberAdded{Group: eng, Username: "alice", UserID: "u-alice", ExpiresAt: at(10)})
	h.add(2, events.KindGroup, "eng", "admin", &events.GroupMemberAdded{Group: eng, Username: "carol", UserID: "u-carol"})
	h.add(3, events.KindGroup, "eng", "admin", &events.GroupMemberExpirySet{Group: eng, Username: "alice", UserID: "u-alice", AddedAt: h.at(2), ExpiresAt: at(20), Previous: at(10)})
	h.add(4, events.KindGroup, "eng", "scim:okta", &events.GroupMembersChanged{Group: eng,
		Added: []events.Member{{Username: "bob", UserID: "u-bob", ExpiresAt: at(5)}}})
	h.add(5, events.KindGroup, "eng", "system:expiry", &events.GroupMemberRemoved{Group: eng, Username: "bob", UserID: "u-bob"})
	h.add(6, events.KindGroup, "eng", "admin", &events.GroupMemberExpirySet{Group: eng, Username: "carol", UserID: "u-carol", AddedAt: h.at(2), ExpiresAt: at(12)})
	h.add(7, events.KindGroup, "eng", "admin", &events.GroupMemberRemoved{Group: eng, Username: "alice", UserID: "u-alice"})
	h.add(8, events.KindGroup, "eng", "admin", &events.GroupMembersChanged{Group: eng,
		Added: []events.Member{{Username: "alice", UserID: "u-alice", ExpiresAt: at(30)}}})
	h.add(9, events.KindGroup, "eng", "admin", &events.GroupMemberExpirySet{Group: eng, Username: "alice", UserID: "u-alice", AddedAt: h.at(8), Previous: at(30)})
	return h
}

// TestReportKeepsTheExpiryOfEachInterval: each interval of the report carries the expiry
// it had last (its addition's, a renewal, or none once cleared), never one of another
// interval of the same pair; an interval the expiry ended shows removed_by system:expiry.
// Built in order and shuffled with every record twice.
func TestReportKeepsTheExpiryOfEachInterval(t *testing.T) {
	h := expiryStory()
	for _, order := range []string{"in order", "shuffled twice"} {
		t.Run(order, func(t *testing.T) {
			x, _, table := newTable(t)
			applyIn(t, x, table, h.es, order, 38)
			for _, c := range []struct {
				name     string
				from, to float64
				want     []string
			}{
				{"everything", 0, 11, []string{
					"Eng/g-1 alice/u-alice +2 admin -7 admin expires 20 [active 1-]",
					"Eng/g-1 alice/u-alice +8 admin [active 1-]",
					"Eng/g-1 bob/u-bob +4 scim:okta -5 system:expiry expires 5 [active 1-]",
					"Eng/g-1 carol/u-carol +2 admin expires 12 [active 1-]",
				}},
				{"before the renewal", 2, 2.5, []string{
					"Eng/g-1 alice/u-alice +2 admin -7 admin expires 20 [active 1-]",
					"Eng/g-1 carol/u-carol +2 admin expires 12 [active 1-]",
				}},
			} {
				if got := report(t, h, table, c.from, c.to, 0); !slices.Equal(got, c.want) {
					t.Errorf("%s: got\n%s\nwant\n%s", c.name, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
				}
			}
		})
	}
}
