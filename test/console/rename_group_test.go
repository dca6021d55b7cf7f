package console

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleRenamesAGroup: the group page's Rename action moves to the group's page
// under the new name, with its members and its whole history; a taken name is shown at
// the field; the old name is not found.
func TestConsoleRenamesAGroup(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	base := in.url("command-api") + "/v1/systems/demo/tenants"
	mustCall(t, 201, "POST", base, map[string]any{"tenant_id": "acme"})
	mustCall(t, 201, "POST", base+"/acme/users", map[string]any{"username": "ann", "email": "ann@example.com", "first_name": "Ann"})
	mustCall(t, 201, "POST", base+"/acme/groups", map[string]any{"name": "Staff"})
	mustCall(t, 201, "POST", base+"/acme/groups", map[string]any{"name": "Ops"})
	mustCall(t, 204, "PUT", base+"/acme/groups/staff/members/ann", nil)
	waitProjected(t, in, "/users?limit=500", 1)
	b := newBrowser(t)
	a := b.ctx

	b.run(a, "rename a group on its page",
		chromedp.Navigate(consoleURL(t, in)), waitFor("#users tbody tr"), goHash("#/t/demo/acme/groups/staff"), waitText("#members", "ann"),
		click("#rename-group"), setValue(`#rename-form [name="name"]`, "Site Staff"),
		click(`#rename-form button[type="submit"]`),
		waitText("#flash", "Renamed from Staff"), waitText("main .crumbs", "Site Staff"),
		waitText("#members", "ann"), waitText("#activity li:first-child", "Renamed"),
		waitText("#activity", "Member added"), waitText("#activity", "Created"), labelled())
	b.run(a, "a taken name is shown next to the field",
		click("#rename-group"), setValue(`#rename-form [name="name"]`, "OPS"),
		click(`#rename-form button[type="submit"]`), waitFor(`#rename-form [name="name"][aria-invalid="true"]`))
	b.run(a, "the member's groups show the new name",
		goHash("#/t/demo/acme/users/ann"), waitText("#user-groups", "Site Staff"))
	b.run(a, "the old name is not found",
		goHash("#/t/demo/acme/groups/staff"), waitText("main h1", "No group"))
	b.noErrors()
}
