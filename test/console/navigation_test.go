package console

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

func back() action { return void(chromedp.Evaluate[bool](`(history.back(), true)`)) }

// The page, the search and the order are in the address bar: Back and a reload return to
// the same page of the same search, and a search is one history entry, not one a key.
func TestPagesAndSearchesAreInTheURL(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	seedMany(t, in)
	b := newBrowser(t)
	a := b.ctx

	b.run(a, "page 2 of all users", chromedp.Navigate(consoleURL(t, in)), rows(25), waitText("#users tbody tr:first-child", "u29"),
		click(".pager .next"), rows(5), waitText("#users tbody tr:last-child", "u00"), waitText(".page-no", "Page 2"),
		poll(`location.hash.includes("cursor=")`))
	b.run(a, "open a user of page 2, then Back: page 2 again",
		click(`#users a[href$="/users/u03"]`), waitText("#user-facts", "u03@example.com"),
		back(), rows(5), waitText("#users tbody tr:first-child", "u04"), waitText(".page-no", "Page 2"))
	b.run(a, "a reload keeps page 2, and Previous still leads to page 1",
		chromedp.Reload(), rows(5), waitText("#users tbody tr:first-child", "u04"), waitText(".page-no", "Page 2"),
		click(".pager .prev"), rows(25), waitText("#users tbody tr:first-child", "u29"), waitText(".page-no", "Page 1"))
	b.run(a, "Back after Previous is page 2 again", back(), rows(5), waitText(".page-no", "Page 2"))

	b.run(a, "back to page 1", back(), rows(25), waitText("#users tbody tr:first-child", "u29"))
	b.run(a, "a search typed key by key is one history entry: the first key makes it, the next ones change it",
		typeText("#search", "u"), poll(`location.hash.includes("q=u")`), rows(25),
		poll(`(window.before = history.length) > 0`),
		typeText("#search", "0"), rows(10), waitText("#users tbody", "u09"), waitNoText("#users tbody", "u10"),
		poll(`history.length === window.before && location.hash.includes("q=u0")`))
	b.run(a, "a chosen match and its pages are in the URL too",
		setValue("#search-by", "last_name"), setValue("#search", "paged"), rows(25), waitText("#user-count", "Sorted by last name"),
		poll(`location.hash.includes("by=last_name") && location.hash.includes("q=paged")`),
		click(".pager .next"), rows(5), waitText(".page-no", "Page 2"),
		click(`#users tbody tr:first-child a`), waitFor("#user-facts"),
		back(), rows(5), waitText(".page-no", "Page 2"),
		poll(`document.querySelector("#search").value === "paged" && document.querySelector("#search-by").value === "last_name"`))
	b.run(a, "Back steps through the search's pages, then to the list before the search",
		back(), rows(25), waitText(".page-no", "Page 1"), poll(`document.querySelector("#search").value === "paged"`),
		back(), rows(25), waitText("#users tbody tr:first-child", "u29"), poll(`document.querySelector("#search").value === ""`))
	b.run(a, "the order is in the URL",
		setValue("#order", "updated_asc"), rows(25), waitText("#users tbody tr:first-child", "u00"),
		poll(`location.hash.includes("order=updated_asc")`),
		chromedp.Reload(), rows(25), waitText("#users tbody tr:first-child", "u00"), poll(`document.querySelector("#order").value === "updated_asc"`))

	b.run(a, "page 2 of a group's members survives a visit to a member and Back",
		goHash("#/t/demo/acme/groups/g00"), waitText("#members", "u00"),
		click("#members + .list-foot .next"), waitText("#members", "u29"),
		click(`#members a[href$="/users/u29"]`), waitText("#user-facts", "u29@example.com"),
		back(), waitText("#members", "u29"), waitNoText("#members", "u01 "), waitText("#members + .list-foot .page-no", "Page 2"))
	b.run(a, "page 2 of the groups list too",
		goHash("#/t/demo/acme/groups"), waitText("#groups tbody", "g00"), click(".pager .next"), waitText("#groups tbody", "g29"),
		chromedp.Reload(), waitText("#groups tbody", "g29"), waitNoText("#groups tbody", "g00"))
	b.noErrors()
}

// checkUser selects the user's row in the users list.
func checkUser(username string) action {
	return click(fmt.Sprintf(`#users input[data-username=%q]`, username))
}

// Users selected in the list are deactivated, activated or added to a group, each by its
// own command with If-Match; what failed is named with its reason.
func TestBulkActions(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants", map[string]any{"tenant_id": "acme"})
	cmd := in.url("command-api") + "/v1/systems/demo/tenants/acme"
	query := in.url("query-api") + "/v1/systems/demo/tenants/acme"
	for i := 1; i <= 5; i++ {
		mustCall(t, 201, "POST", cmd+"/users", map[string]any{"username": fmt.Sprintf("b%d", i), "email": fmt.Sprintf("b%d@example.com", i), "last_name": "Bulk"})
	}
	mustCall(t, 201, "POST", cmd+"/groups", map[string]any{"name": "Ops"})
	mustCall(t, 204, "PUT", cmd+"/groups/ops/members/b4", nil)
	waitProjected(t, in, "/users?limit=500", 5)
	waitProjected(t, in, "/groups/ops/members", 1)
	active := func(username string, minVersion int) bool {
		t.Helper()
		var u struct {
			IsActive bool `json:"is_active"`
		}
		_ = json.Unmarshal(mustCall(t, 200, "GET", query+"/users/"+username, nil, "X-Min-Version", fmt.Sprint(minVersion)), &u)
		return u.IsActive
	}

	b := newBrowser(t)
	a := b.ctx
	b.run(a, "the users list, with nothing selected", chromedp.Navigate(consoleURL(t, in)), rows(5),
		waitText("#bulk-count", "None selected"), disabled("#bulk-deactivate, #bulk-activate, #bulk-add"), labelled())
	// Someone else changes b2 after the console listed it.
	mustCall(t, 200, "PATCH", cmd+"/users/b2", map[string]any{"first_name": "Changed"})
	b.run(a, "deactivate three: the one changed meanwhile fails with its reason, the others are done",
		checkUser("b1"), checkUser("b2"), checkUser("b3"), waitText("#bulk-count", "3 selected"),
		click("#bulk-deactivate"), waitText("#bulk-summary", "2 deactivated, 1 failed"),
		waitText("#bulk-failures", "b2"), waitText("#bulk-failures", "changed by someone else"),
		waitText("#bulk-count", "None selected"))
	if active("b1", 2) || active("b3", 2) || !active("b2", 2) {
		t.Fatal("after the bulk deactivate: want b1 and b3 inactive, b2 active")
	}
	b.run(a, "the list shows what was done",
		poll(`[...document.querySelectorAll("#users tbody tr")].filter((r) => r.innerText.includes("Inactive")).length === 2`))

	b.run(a, "activate three, one of them already active",
		checkUser("b1"), checkUser("b2"), checkUser("b3"),
		click("#bulk-activate"), waitText("#bulk-summary", "2 activated, 1 already active"))
	if !active("b1", 3) || !active("b3", 3) {
		t.Fatal("after the bulk activate: want b1 and b3 active")
	}

	// b5 is deleted after the console listed it.
	mustCall(t, 204, "DELETE", cmd+"/users/b5", nil)
	b.run(a, "an unknown group is named next to its field, and nothing is sent",
		click("#select-all"), waitText("#bulk-count", "5 selected"),
		setValue("#bulk-group", "Nope"), click("#bulk-add"), waitText("#bulk .field-error", "no group named Nope"))
	b.run(a, "add to a group: the deleted user fails, a member already is one, the others join in one change",
		click("#select-all"), waitText("#bulk-count", "None selected"),
		checkUser("b1"), checkUser("b3"), checkUser("b4"), checkUser("b5"),
		setValue("#bulk-group", "ops"), click("#bulk-add"),
		waitText("#bulk-summary", "2 added to ops, 1 already members, 1 failed"), waitText("#bulk-failures", "b5"),
		waitText("#bulk-failures", "no longer exists"))
	waitProjected(t, in, "/groups/ops/members", 3)
	var members struct {
		Items []struct{ Username string } `json:"items"`
	}
	_ = json.Unmarshal(mustCall(t, 200, "GET", query+"/groups/ops/members", nil), &members)
	if len(members.Items) != 3 || members.Items[0].Username != "b1" || members.Items[1].Username != "b3" || members.Items[2].Username != "b4" {
		t.Fatalf("members of Ops: %+v, want b1, b3 and b4", members.Items)
	}
	// Created (1), b4 (2), then b1 and b3 in one members change (3): not one version a user.
	var ops struct {
		Version int `json:"version"`
	}
	if err := json.Unmarshal(mustCall(t, 200, "GET", query+"/groups/ops", nil), &ops); err != nil || ops.Version != 3 {
		t.Fatalf("Ops is at version %d (%v) after the bulk add, want 3: one members change", ops.Version, err)
	}

	// keycloak-sync does not run here: its card says it cannot be reached.
	b.unreachable = true
	const applied = `Number([...document.querySelectorAll("#projector-facts dt")].find((d) => d.innerText.startsWith("Records applied")).nextElementSibling.innerText)`
	b.run(a, "the operations page", click(`#nav a[href$="/ops"]`), waitPositive("#projector-facts", "Records applied"),
		poll(`(window.appliedBefore = `+applied+`) > 0`))
	mustCall(t, 201, "POST", cmd+"/users", map[string]any{"username": "b6", "email": "b6@example.com"})
	b.run(a, "refreshes itself: a write made elsewhere shows up without a click",
		poll(applied+` > window.appliedBefore`), waitText("#ops-updated", "refreshes every 5 s"))
	b.noErrors()
}
