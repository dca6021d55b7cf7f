package console

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestUserTimelineShowsGroupJoinsAndLeaves: a user's page shows, among their own events,
// when they were added to and removed from groups — one member at a time, in bulk and by
// the group's delete — in words ("Added to group Staff", "Removed from group Temp (group
// deleted)"), with who did it and a link to the group (none to a deleted one), newest first;
// no raw field or event name shows. A group change that is not theirs (another member's)
// is not in their timeline, and the group's own timeline still names its members.
func TestUserTimelineShowsGroupJoinsAndLeaves(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	base := in.url("command-api") + "/v1/systems/demo/tenants"
	mustCall(t, 201, "POST", base, map[string]any{"tenant_id": "acme"})
	acme := base + "/acme"
	mustCall(t, 201, "POST", acme+"/users", map[string]any{"username": "ann", "email": "ann@example.com", "first_name": "Ann"})
	mustCall(t, 201, "POST", acme+"/users", map[string]any{"username": "bob"})
	mustCall(t, 201, "POST", acme+"/groups", map[string]any{"name": "Staff"})
	mustCall(t, 201, "POST", acme+"/groups", map[string]any{"name": "On Call"})
	mustCall(t, 204, "PUT", acme+"/groups/staff/members/ann", nil)
	mustCall(t, 200, "POST", acme+"/groups/on%20call/members", map[string]any{"add": []string{"ann", "bob"}})
	mustCall(t, 204, "DELETE", acme+"/groups/staff/members/ann", nil)
	mustCall(t, 204, "PUT", acme+"/groups/staff/members/bob", nil)
	// A group delete ends ann's membership of it: her timeline says so too.
	mustCall(t, 201, "POST", acme+"/groups", map[string]any{"name": "Temp"})
	mustCall(t, 204, "PUT", acme+"/groups/temp/members/ann", nil)
	mustCall(t, 204, "DELETE", acme+"/groups/temp", nil)
	waitProjected(t, in, "/users?limit=500", 2)
	// The page reads the timeline once: have the projector write all of it first.
	waitProjected(t, in, "/activity?entity=user:ann", 6)
	b := newBrowser(t)
	a := b.ctx

	b.run(a, "the user's timeline says when they joined and left each group, newest first",
		chromedp.Navigate(consoleURL(t, in)), waitFor("#users tbody tr"), goHash("#/t/demo/acme/users/ann"),
		waitText("#user-groups", "On Call"),
		waitText("#activity li:nth-child(1)", "Removed from group Temp (group deleted)"),
		waitText("#activity li:nth-child(2)", "Added to group Temp"),
		waitText("#activity li:nth-child(3)", "Removed from group Staff"),
		waitText("#activity li:nth-child(4)", "Added to group On Call"),
		waitText("#activity li:nth-child(5)", "Added to group Staff"),
		waitText("#activity li:nth-child(6)", "Created"),
		waitText("#activity li:nth-child(1) .meta", "bootstrap (the development token)"),
		poll(`document.querySelectorAll("#activity > li").length === 6`),
		waitNoText("#activity", "member_"), waitNoText("#activity", "Member"), waitNoText("#activity", "{"),
		waitNoText("#activity", "bob"), labelled())
	b.run(a, "the group in an item opens the group's page",
		click(`#activity li:nth-child(4) a[href$="/groups/on%20call"]`), waitText("main h1", "On Call"),
		waitText("#members", "ann"), waitText("#members", "bob"))
	b.run(a, "the group's own timeline still names the members it gained",
		waitText("#activity li:first-child", "Member added"), waitText("#activity", "ann"), waitText("#activity", "bob"),
		waitNoText("#activity", "Added to group"))
	b.noErrors()
}
