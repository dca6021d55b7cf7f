package console

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestEveryActionOnAUserNamedLikeAnEmail: a user whose username is a plus-addressed email
// (as Okta and Entra provision them: `@` and `+` in the name) can be opened from a search,
// edited, deactivated and activated, given a password, added to a group and removed from
// it on their page and on the group's, deactivated, activated and added to a group in bulk,
// renamed to another such name, and deleted, each through the console, and the API shows
// each change.
func TestEveryActionOnAUserNamedLikeAnEmail(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	const (
		name    = "ann.o.smith+eu@example.com"
		renamed = "ann.smith+emea@example.org"
	)
	base := in.url("command-api") + "/v1/systems/demo/tenants"
	mustCall(t, 201, "POST", base, map[string]any{"tenant_id": "acme"})
	mustCall(t, 201, "POST", base+"/acme/users", map[string]any{"username": name, "email": "ann@example.com", "first_name": "Ann", "last_name": "Smith"})
	mustCall(t, 201, "POST", base+"/acme/users", map[string]any{"username": "bob", "email": "bob@example.com"})
	mustCall(t, 201, "POST", base+"/acme/groups", map[string]any{"name": "Staff"})
	mustCall(t, 201, "POST", base+"/acme/groups", map[string]any{"name": "On Call"})
	waitProjected(t, in, "/users?limit=500", 2)
	query := in.url("query-api") + "/v1/systems/demo/tenants/acme"
	type user struct {
		Username  string `json:"username"`
		LastName  string `json:"last_name"`
		IsActive  bool   `json:"is_active"`
		Version   int    `json:"version"`
		FirstName string `json:"first_name"`
	}
	get := func(username string, minVersion string) user {
		t.Helper()
		var u user
		if err := json.Unmarshal(mustCall(t, 200, "GET", query+"/users/"+url.PathEscape(username), nil, "X-Min-Version", minVersion), &u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	b := newBrowser(t)
	a := b.ctx
	// row is the user's row in the list, as a JavaScript expression.
	row := `document.querySelector('#users tbody tr:has(input[data-username="` + name + `"])')`

	b.run(a, "a search finds the user, and the link opens their page",
		chromedp.Navigate(consoleURL(t, in)), rows(2), typeText("#search", "ann.o.smith"), rows(1),
		click(`#users tbody a`), waitText("main .crumbs", name), waitText("#user-facts", "ann@example.com"), labelled())
	b.run(a, "edit",
		click("#edit-user"), setValue(`#user-form [name="last_name"]`, "Smythe"), click("#save-user"),
		waitText("#flash", "Changes saved"), waitText("#user-last-name", "Smythe"), waitText("#activity li:first-child", "Updated"))
	b.run(a, "deactivate and activate",
		click("#toggle-active"), waitText("h1 .badge", "Inactive"), waitText("#activity li:first-child", "Deactivated"),
		click("#toggle-active"), waitText("h1 .badge", "Active"), waitText("#activity li:first-child", "Activated"))
	b.run(a, "set a password",
		click("#set-password"), setValue(`#password-form [name="password"]`, "correct horse battery"),
		click(`#password-form button[type="submit"]`), waitText("#flash", "Password set"),
		waitText("#activity li:first-child", "Password changed"))
	if u := get(name, "5"); u.LastName != "Smythe" || !u.IsActive || u.Version != 5 {
		t.Fatalf("after the edits: %+v, want last name Smythe, active, version 5", u)
	}
	b.run(a, "add to a group and remove from it on the user's page",
		typeText("#add-group-name", "staff"), click(`#add-group button[type="submit"]`),
		waitText("#flash", "Added to Staff"), waitText("#user-groups", "Staff"),
		click(`#user-groups button[aria-label="Remove from Staff"]`),
		waitText("#flash", "Removed from Staff"), waitText("#user-groups", "Not in any group"))
	b.run(a, "add and remove them on the group's page",
		goHash("#/t/demo/acme/groups/Staff"), waitText("#members", "No members"),
		typeText("#add-member-name", name), click(`#add-member button[type="submit"]`),
		waitText("#members", name), waitText("#activity li:first-child", "Member added"),
		click(`#members a[href*="/users/"]`), waitText("main .crumbs", name), waitText("#user-groups", "Staff"),
		goHash("#/t/demo/acme/groups/Staff"), waitText("#members", name),
		click(`#members button[aria-label="Remove `+name+`"]`), waitText("#members", "No members"),
		waitText("#activity li:first-child", "Member removed"))

	b.run(a, "bulk deactivate, activate and add to a group",
		goHash("#/t/demo/acme/users"), rows(2), checkUser(name), waitText("#bulk-count", "1 selected"),
		click("#bulk-deactivate"), waitText("#bulk-summary", "1 deactivated"), waitText("#bulk-count", "None selected"),
		poll(row+`.innerText.includes("Inactive")`))
	if u := get(name, "6"); u.IsActive {
		t.Fatalf("after the bulk deactivate: %+v, want inactive", u)
	}
	b.run(a, "bulk activate",
		checkUser(name), waitText("#bulk-count", "1 selected"), click("#bulk-activate"), waitText("#bulk-summary", "1 activated"),
		waitText("#bulk-count", "None selected"), poll(`!`+row+`.innerText.includes("Inactive")`))
	b.run(a, "bulk add to a group",
		checkUser(name), waitText("#bulk-count", "1 selected"), setValue("#bulk-group", "On Call"), click("#bulk-add"),
		waitText("#bulk-summary", "1 added to On Call"))
	if u := get(name, "7"); !u.IsActive {
		t.Fatalf("after the bulk activate: %+v, want active", u)
	}
	waitProjected(t, in, "/groups/on%20call/members", 1)
	var members struct {
		Items []struct{ Username string } `json:"items"`
	}
	if err := json.Unmarshal(mustCall(t, 200, "GET", query+"/groups/on%20call/members", nil), &members); err != nil {
		t.Fatal(err)
	}
	if len(members.Items) != 1 || members.Items[0].Username != name {
		t.Fatalf("On Call's members after the bulk add: %+v", members.Items)
	}

	b.run(a, "rename to another name like an email",
		click(`#users tbody tr:has(input[data-username="`+name+`"]) a`),
		waitText("main .crumbs", name),
		click("#rename-user"), setValue(`#rename-form [name="username"]`, renamed), click(`#rename-form button[type="submit"]`),
		waitText("#flash", "Renamed from "+name), waitText("main .crumbs", renamed), waitText("#user-groups", "On Call"),
		waitText("#activity li:first-child", "Renamed"))
	if u := get(renamed, "8"); u.Username != renamed || u.LastName != "Smythe" {
		t.Fatalf("after the rename: %+v", u)
	}
	mustCall(t, 404, "GET", query+"/users/"+url.PathEscape(name), nil)

	b.run(a, "delete",
		click("#delete-user"), click("#confirm-delete"),
		waitText("#flash", "User "+renamed+" deleted"), waitNoText("#users tbody", renamed), waitText("#users tbody", "bob"))
	mustCall(t, 404, "GET", query+"/users/"+url.PathEscape(renamed), nil)
	b.noErrors()
}
