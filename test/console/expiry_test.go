package console

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// expiresShown waits until the element sel shows "until <instant>" for the instant the
// browser reads local as (what the datetime-local picker meant), whatever its time zone.
func expiresShown(sel, local string) action {
	return poll(fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; const m = e.textContent.match(/until (\S+)/); return !!m && new Date(m[1]).getTime() === new Date(%q).getTime(); })()`, sel, local))
}

// TestMembershipExpiryIsSetAndShown: adding a member with an expiry from the group's page
// sets it (the API has it), the group's member list and the user's groups show it, and
// adding the member again with a later one renews it (docs/expiry.md).
func TestMembershipExpiryIsSetAndShown(t *testing.T) {
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
	mustCall(t, 204, "PUT", acme+"/groups/staff/members/bob", nil)
	waitProjected(t, in, "/activity?entity=group:staff", 2)
	b := newBrowser(t)
	a := b.ctx

	b.run(a, "add a member with an expiry from the group's page",
		chromedp.Navigate(consoleURL(t, in)), waitFor("#users tbody tr"), goHash("#/t/demo/acme/groups/Staff"),
		waitText("#members", "bob"),
		typeText("#add-member-name", "ann"), setValue("#add-member-expires", "2030-06-01T12:00"),
		click(`#add-member button[type="submit"]`),
		waitText("#flash", "ann added"), waitText("#members", "ann"),
		expiresShown(`#members li:has(a[href$="/users/ann"]) .expires`, "2030-06-01T12:00"), labelled())
	// Only ann's membership expires: bob's shows none.
	b.run(a, "a member without an expiry shows none",
		poll(`!document.querySelector('#members li:has(a[href$="/users/bob"]) .expires')`))

	var members struct {
		Items []struct {
			Username  string     `json:"username"`
			ExpiresAt *time.Time `json:"expires_at"`
		} `json:"items"`
	}
	if err := json.Unmarshal(mustCall(t, 200, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme/groups/staff/members", nil), &members); err != nil {
		t.Fatal(err)
	}
	var annExpires *time.Time
	for _, m := range members.Items {
		if m.Username == "ann" {
			annExpires = m.ExpiresAt
		} else if m.ExpiresAt != nil {
			t.Errorf("%s expires at %v; want no expiry", m.Username, m.ExpiresAt)
		}
	}
	if annExpires == nil || annExpires.Year() != 2030 {
		t.Fatalf("ann's membership expires at %v; want the instant the console set in 2030", annExpires)
	}

	b.run(a, "the user's groups show the expiry",
		click(`#members a[href$="/users/ann"]`), waitText("main h1", "ann"),
		waitText("#user-groups", "Staff"),
		expiresShown("#user-groups .expires", "2030-06-01T12:00"), labelled())

	b.run(a, "adding the member again with a later expiry renews it",
		click(`#user-groups a[href$="/groups/Staff"]`), waitText("main h1", "Staff"),
		waitText("#members", "ann"),
		typeText("#add-member-name", "ann"), setValue("#add-member-expires", "2031-01-15T08:30"),
		click(`#add-member button[type="submit"]`),
		expiresShown(`#members li:has(a[href$="/users/ann"]) .expires`, "2031-01-15T08:30"))
	b.run(a, "and the user's groups show the renewed expiry",
		goHash("#/t/demo/acme/users/ann"), waitText("#user-groups", "Staff"),
		expiresShown("#user-groups .expires", "2031-01-15T08:30"))

	annLi := `#members li:has(a[href$="/users/ann"])`
	b.run(a, "Remove expiry on the group's page clears it and keeps the member",
		goHash("#/t/demo/acme/groups/Staff"), waitText("#members", "ann"),
		poll(`!document.querySelector('#members li:has(a[href$="/users/bob"]) .clear-expiry')`),
		click(annLi+` button.clear-expiry`),
		waitText("#flash", "no longer expires"),
		poll(fmt.Sprintf(`!!document.querySelector(%q) && !document.querySelector(%q)`, annLi, annLi+" .expires")),
		poll(fmt.Sprintf(`!document.querySelector(%q)`, annLi+" .clear-expiry")), labelled())
	if exp, ok := memberExpiry(t, in, "ann"); !ok || exp != nil {
		t.Errorf("after Remove expiry, ann is a member %v expiring at %v; want a member without an expiry", ok, exp)
	}

	mustCall(t, 204, "PUT", acme+"/groups/staff/members/ann", map[string]any{"expires_at": "2032-03-01T00:00:00Z"})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if exp, _ := memberExpiry(t, in, "ann"); exp != nil && exp.Year() == 2032 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the expiry set by the API never reached the members list")
		}
	}
	b.run(a, "Remove expiry on the user's page clears it too",
		goHash("#/t/demo/acme/users/ann"), expiresShown("#user-groups .expires", "2032-03-01T00:00:00Z"),
		click(`#user-groups button.clear-expiry`),
		waitText("#flash", "no longer expires"),
		poll(`!!document.querySelector('#user-groups a[href$="/groups/Staff"]') && !document.querySelector('#user-groups .expires')`))
	if exp, ok := memberExpiry(t, in, "ann"); !ok || exp != nil {
		t.Errorf("after Remove expiry on the user's page, ann is a member %v expiring at %v; want a member without an expiry", ok, exp)
	}
	b.noErrors()
}

// memberExpiry is username's expiry in Staff as the query API lists it; ok is false when
// they are not a member.
func memberExpiry(t *testing.T, in *install, username string) (*time.Time, bool) {
	t.Helper()
	var members struct {
		Items []struct {
			Username  string     `json:"username"`
			ExpiresAt *time.Time `json:"expires_at"`
		} `json:"items"`
	}
	if err := json.Unmarshal(mustCall(t, 200, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme/groups/staff/members", nil), &members); err != nil {
		t.Fatal(err)
	}
	for _, m := range members.Items {
		if m.Username == username {
			return m.ExpiresAt, true
		}
	}
	return nil, false
}
