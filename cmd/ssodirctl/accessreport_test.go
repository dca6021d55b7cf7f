package main

import (
	"context"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// TestAccessReportCommand: `access-report` prints the report the query API streams, in
// JSON and CSV, and the client's AccessRows reads the same rows; a range the API refuses
// exits as a usage error.
func TestAccessReportCommand(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c := newCtl(t, s)
	c.ok("tenants", "create", "eu")
	from := time.Now().UTC()
	c.ok("users", "create", "jdoe")
	c.ok("groups", "create", "Auditors")
	c.ok("groups", "members", "add", "Auditors", "jdoe")

	cl, err := client.New(client.Config{CommandURL: s.CommandURL, QueryURL: s.QueryURL, Token: client.StaticToken(servicetest.Token)})
	if err != nil {
		t.Fatal(err)
	}
	tc := cl.Tenant("acme", "eu")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var to time.Time
	var rows []client.AccessRow
	for len(rows) == 0 { // the projector indexes the membership soon after the command
		if ctx.Err() != nil {
			t.Fatal("the membership never reached the access report")
		}
		time.Sleep(200 * time.Millisecond)
		to = time.Now().UTC()
		rows = rows[:0]
		for r, err := range tc.AccessRows(ctx, from, to) {
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
	}
	if len(rows) != 1 || rows[0].Group != "Auditors" || rows[0].Username != "jdoe" || rows[0].AddedBy != "bootstrap" || rows[0].RemovedAt != nil {
		t.Fatalf("rows %+v", rows)
	}
	args := []string{"access-report", "--from", from.Format(time.RFC3339Nano), "--to", to.Format(time.RFC3339Nano)}
	js := decodeJSON[struct{ Items []client.AccessRow }](t, c.ok(args...))
	if len(js.Items) != 1 || js.Items[0].UserID != rows[0].UserID {
		t.Fatalf("JSON %+v", js)
	}
	recs, err := csv.NewReader(strings.NewReader(c.ok(append(args, "--format", "csv")...))).ReadAll()
	if err != nil || len(recs) != 2 || recs[0][0] != "group" || recs[1][0] != "Auditors" || recs[1][2] != "jdoe" {
		t.Fatalf("CSV %q %v", recs, err)
	}
	c.fails(exitUsage, "access-report", "--from", to.Format(time.RFC3339Nano), "--to", from.Format(time.RFC3339Nano))
	c.fails(exitUsage, "access-report", "--from", from.Format(time.RFC3339Nano))
	c.fails(exitUsage, "access-report", "--from", "2000-01-01", "--to", from.Format(time.RFC3339Nano)) // history_not_kept
	c.fails(exitUsage, "access-report", "--from", from.Format(time.RFC3339Nano), "--to", to.Format(time.RFC3339Nano), "--format", "xml")
}
