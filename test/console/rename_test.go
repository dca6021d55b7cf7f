package console

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleRenamesAUser: the user page's Rename action moves to the person's page under
// the new name, with its groups and its whole history; the old name is not found.
func TestConsoleRenamesAUser(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	base := in.url("command-api") + "/v1/systems/demo/tenants"
	mustCall(t, 201, "POST", base, map[string]any{"tenant_id": "acme"})
	mustCall(t, 201, "POST", base+"/acme/users", map[string]any{"username": "ann", "email": "ann@example.com", "first_name": "Ann"})
	mustCall(t, 201, "POST", base+"/acme/groups", map[string]any{"name": "Staff"})
	mustCall(t, 204, "PUT", base+"/acme/groups/staff/members/ann", nil)
	waitProjected(t, in, "/users?limit=500", 1)
	b := newBrowser(t)
	a := b.ctx

	b.run(a, "rename a user on its page",
		chromedp.Navigate(consoleURL(t, in)), waitFor("#users tbody tr"), goHash("#/t/demo/acme/users/ann"), waitText("#user-groups", "Staff"),
		click("#rename-user"), setValue(`#rename-form [name="username"]`, "ann.smith"),
		click(`#rename-form button[type="submit"]`),
		waitText("#flash", "Renamed from ann"), waitText("main .crumbs", "ann.smith"),
		waitText("#user-groups", "Staff"), waitText("#activity li:first-child", "Renamed"),
		waitText("#activity", "Created"), labelled())
	mustCall(t, 201, "POST", base+"/acme/users", map[string]any{"username": "bob"})
	b.run(a, "a taken name is shown next to the field",
		click("#rename-user"), setValue(`#rename-form [name="username"]`, "bob"),
		click(`#rename-form button[type="submit"]`), waitFor(`#rename-form [name="username"][aria-invalid="true"]`))
	b.run(a, "the old name is not found",
		goHash("#/t/demo/acme/users/ann"), waitText("main h1", "No user"))
	b.noErrors()
}
