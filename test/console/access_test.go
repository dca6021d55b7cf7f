package console

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestAccessPageShowsMembersThenAndDownloadsTheReport: the Access page answers "who was in
// the group at that instant" for instants between the writes (and refuses one before the
// kept history, in words), and downloads the access report of a range, saying how many
// membership intervals it holds.
func TestAccessPageShowsMembersThenAndDownloadsTheReport(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	base := in.url("command-api") + "/v1/systems/demo/tenants"
	mustCall(t, 201, "POST", base, map[string]any{"tenant_id": "acme"})
	acme := base + "/acme"
	mustCall(t, 201, "POST", acme+"/users", map[string]any{"username": "ann"})
	mustCall(t, 201, "POST", acme+"/users", map[string]any{"username": "bob"})
	mustCall(t, 201, "POST", acme+"/groups", map[string]any{"name": "Staff"})
	mustCall(t, 204, "PUT", acme+"/groups/staff/members/ann", nil)
	mustCall(t, 204, "PUT", acme+"/groups/staff/members/bob", nil)
	mustCall(t, 204, "DELETE", acme+"/groups/staff/members/ann", nil)
	waitProjected(t, in, "/activity?entity=group:staff", 4)
	var feed struct {
		Items []struct {
			Type       string `json:"type"`
			OccurredAt string `json:"occurred_at"`
		} `json:"items"`
	}
	if err := json.Unmarshal(mustCall(t, 200, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme/activity?entity=group:staff", nil), &feed); err != nil {
		t.Fatal(err)
	}
	// Newest first: ann removed, bob added, ann added, created.
	annOut, bobIn, annIn := feed.Items[0].OccurredAt, feed.Items[1].OccurredAt, feed.Items[2].OccurredAt
	at := func(instant string) string {
		return "#/t/demo/acme/access?" + url.Values{"group": {"Staff"}, "as_of": {instant}}.Encode()
	}
	b := newBrowser(t)
	a := b.ctx

	b.run(a, "the Access page is in the menu",
		chromedp.Navigate(consoleURL(t, in)), waitFor("#users tbody tr"), click(`#nav a[href$="/access"]`),
		waitText("main h1", "Access"), waitFor("#report-form"), labelled())
	b.run(a, "ann alone once she was added",
		goHash(at(annIn)), waitText("#access-members", "ann"), waitNoText("#access-members", "bob"),
		waitText("#access-members", "bootstrap"))
	b.run(a, "both once bob was added",
		goHash(at(bobIn)), waitText("#access-members", "bob"), waitText("#access-members", "ann"))
	b.run(a, "bob alone from ann's removal on",
		goHash(at(annOut)), waitText("#access-members", "bob"), waitNoText("#access-members", "ann"))
	b.run(a, "the form asks for another group and instant",
		setValue("#access-group", "staff"), setValue("#access-at", "2001-01-01T00:00:00"), click(`#access-members-form button[type="submit"]`),
		waitText("#access-members-form .form-error", "kept history"))
	b.run(a, "the report of the tenant's life so far: ann's interval and bob's",
		setValue("#report-format", "csv"), click("#report-download"),
		waitText("#report-status", "2 membership intervals"), waitFor(`#report-link[download$=".csv"]`))
	// Its range starts at the tenant's creation to the millisecond, not at the next whole
	// second shown in the field: changes in the tenant's first second are in the report.
	var tenant struct {
		CreatedAt string `json:"created_at"`
	}
	if err := json.Unmarshal(mustCall(t, 200, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme", nil), &tenant); err != nil {
		t.Fatal(err)
	}
	created, err := time.Parse(time.RFC3339Nano, tenant.CreatedAt)
	if err != nil {
		t.Fatal(err)
	}
	b.run(a, "the report's range, kept in the address, starts at the tenant's creation",
		poll(fmt.Sprintf(`new Date(new URLSearchParams(location.hash.split("?")[1] || "").get("from")).getTime() === %d`, created.UnixMilli())))
	b.run(a, "a range that ends before it begins is refused next to its field",
		setValue("#report-to", "2001-01-01T00:00:00"), click("#report-download"),
		waitFor(`#report-to[aria-invalid="true"]`))
	b.noErrors()
}
