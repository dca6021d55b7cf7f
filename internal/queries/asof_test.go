package queries

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
)

// TestAsOfListsOverHTTP reads members and groups at instants between the steps of a
// history through the real handlers, and the refusals: an instant before the index's
// coverage (history_not_kept), beyond SSO_HISTORY_RETENTION, in the future, malformed,
// a cursor of another list or group, and a name nobody held at the instant.
func TestAsOfListsOverHTTP(t *testing.T) {
	ctx := t.Context()
	var now time.Time
	svc, f := fixture(t, nil, Options{HistoryRetention: 30 * 24 * time.Hour, Now: func() time.Time { return now }})
	db := dynamotest.Current(t).DynamoDB()
	x := asof.New(db)
	var steps []events.Envelope
	step := func(e events.Envelope) time.Time {
		apply(t, f, e)
		if err := x.Apply(ctx, f.Tables().Users, e); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, e)
		return e.OccurredAt
	}
	created := step(f.CreateGroup("Ops", ""))
	if err := asof.MarkCoverage(ctx, db, f.Tables().Users, asof.Millis(created)); err != nil {
		t.Fatal(err)
	}
	step(f.CreateGroup("Dev", ""))
	step(f.CreateUser(events.User{Username: "ann"}))
	step(f.CreateUser(events.User{Username: "ben"}))
	annIn := step(f.AddMember("Ops", "ann"))
	benIn := step(f.AddMember("Ops", "ben"))
	annOut := step(f.RemoveMember("Ops", "ann"))
	now = annOut.Add(time.Hour)

	e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
	NewHandlers(svc).Register(e)
	get := func(path string, q url.Values) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/v1/systems/acme/tenants/eu"+path+"?"+q.Encode(), nil)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Code, body
	}
	names := func(body map[string]any, field string) []string {
		var out []string
		for _, it := range body["items"].([]any) {
			out = append(out, it.(map[string]any)[field].(string))
		}
		slices.Sort(out)
		return out
	}
	at := func(t time.Time) url.Values { return url.Values{"as_of": {t.Format(time.RFC3339Nano)}} }

	for _, c := range []struct {
		at   time.Time
		want []string
	}{
		{annIn.Add(-time.Millisecond), nil},
		{annIn, []string{"ann"}},
		{benIn.Add(time.Millisecond), []string{"ann", "ben"}},
		{annOut, []string{"ben"}},
	} {
		code, body := get("/groups/ops/members", at(c.at))
		if code != 200 || !slices.Equal(names(body, "username"), c.want) {
			t.Errorf("members at %s: %d %v, want %v", c.at, code, body, c.want)
		}
	}
	q := at(benIn)
	q.Set("limit", "1")
	code, body := get("/groups/Ops/members", q)
	if code != 200 || len(body["items"].([]any)) != 1 || body["next_cursor"] == nil {
		t.Fatalf("first page: %d %v", code, body)
	}
	q.Set("cursor", body["next_cursor"].(string))
	if code, body := get("/groups/Ops/members", q); code != 200 || len(body["items"].([]any)) != 1 {
		t.Errorf("second page: %d %v", code, body)
	}
	if code, body := get("/users/ann/groups", at(benIn)); code != 200 || !slices.Equal(names(body, "name"), []string{"Ops"}) {
		t.Errorf("ann's groups: %d %v", code, body)
	}
	if code, body := get("/users/ann/groups", at(annOut)); code != 200 || len(body["items"].([]any)) != 0 {
		t.Errorf("ann's groups after her removal: %d %v", code, body)
	}

	otherList := at(benIn)
	otherList.Set("cursor", q.Get("cursor"))
	otherGroup := at(benIn)
	otherGroup.Set("cursor", q.Get("cursor"))
	for _, c := range []struct {
		path string
		q    url.Values
		code int
		want string
	}{
		{"/groups/ops/members", at(created.Add(-time.Millisecond)), 400, "history_not_kept"},
		{"/groups/ops/members", at(now.Add(-31 * 24 * time.Hour)), 400, "history_not_kept"},
		{"/users/ann/groups", at(now.Add(time.Second)), 400, "validation_failed"},
		{"/groups/ops/members", url.Values{"as_of": {"yesterday"}}, 400, "validation_failed"},
		{"/groups/ops/members", url.Values{"as_of": {""}}, 400, "validation_failed"},
		{"/groups/ops/members", url.Values{"as_of": {annIn.Format(time.RFC3339Nano)}, "day": {"x"}}, 400, "validation_failed"},
		{"/users/ann/groups", otherList, 400, "validation_failed"},
		{"/groups/dev/members", otherGroup, 400, "validation_failed"}, // the cursor carries Ops's id: bound to its name
		{"/groups/nobody/members", at(benIn), 404, "not_found"},
		{"/users/zed/groups", at(benIn), 404, "not_found"},
		{"/users/ben/groups", at(created), 404, "not_found"}, // ben did not exist yet
	} {
		code, body := get(c.path, c.q)
		if code != c.code || body["code"] != c.want {
			t.Errorf("GET %s?%s: %d %v, want %d %s", c.path, c.q.Encode(), code, body, c.code, c.want)
		}
	}
}
