package console

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

func rows(n int) action {
	return poll(fmt.Sprintf(`document.querySelectorAll("#users tbody tr").length === %d`, n))
}

func TestConsoleWritesAndPaging(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants", map[string]any{"tenant_id": "acme"})
	for i := range 30 {
		mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants/acme/users", map[string]any{
			"username": fmt.Sprintf("u%02d", i), "email": fmt.Sprintf("u%02d@example.com", i),
			"first_name": fmt.Sprintf("First%02d", i), "last_name": "Paged"})
	}
	waitProjected(t, in, "/users?limit=500", 30)
	b := newBrowser(t)
	a := b.ctx

	b.run(a, "the list of all users is paged with the API's cursors",
		chromedp.Navigate(consoleURL(t, in)), rows(25), waitText("#users tbody tr:first-child", "u29"),
		click(".pager .next"), rows(5), waitText("#users tbody tr:last-child", "u00"),
		click(".pager .prev"), rows(25), waitText("#users tbody tr:first-child", "u29"))
	b.run(a, "oldest first",
		setValue("#order", "updated_asc"), rows(25), waitText("#users tbody tr:first-child", "u00"))
	b.run(a, "a name search is paged too, in name order",
		setValue("#search-by", "last_name"), typeText("#search", "pag"), rows(25), waitText("#user-count", "Sorted by last name"),
		click(".pager .next"), rows(5), poll(`document.querySelector(".pager .next").disabled`))

	b.run(a, "a taken username is shown next to the username field",
		goHash("#/t/demo/acme/users/+new"), waitFor("#user-form"),
		setValue(`#user-form [name="username"]`, "u00"), setValue(`#user-form [name="email"]`, "newbie@example.com"),
		setValue(`#user-form [name="attributes"]`, `{"dept": "ops"`),
		click(`#user-form button[type="submit"]`),
		waitFor(`#user-form [name="attributes"][aria-invalid="true"]`),
		setValue(`#user-form [name="attributes"]`, `{"dept": ["ops"]}`),
		click(`#user-form button[type="submit"]`),
		waitFor(`#user-form [name="username"][aria-invalid="true"]`),
		poll(`!document.querySelector('#user-form [name="attributes"][aria-invalid]')`))
	b.run(a, "create a user",
		setValue(`#user-form [name="username"]`, "newbie"), setValue(`#user-form [name="first_name"]`, "Nina"),
		setValue(`#user-form [name="last_name"]`, "Newbie"), setValue(`#user-form [name="password"]`, "correct horse"),
		click(`#user-form button[type="submit"]`),
		waitText("#flash", "User newbie created"), waitText("#user-facts", "newbie@example.com"), waitText("#user-facts", "ops"),
		waitText("#activity li:first-child", "Created"))
	b.run(a, "deactivate and activate",
		click("#toggle-active"), waitText("h1 .badge", "Inactive"), waitText("#activity li:first-child", "Deactivated"),
		click("#toggle-active"), waitText("h1 .badge", "Active"), waitText("#activity li:first-child", "Activated"))
	b.run(a, "a password too short is refused next to the field; a good one is set",
		click("#set-password"), setValue(`#password-form [name="password"]`, "short"),
		click(`#password-form button[type="submit"]`), waitFor(`#password-form [name="password"][aria-invalid="true"]`),
		setValue(`#password-form [name="password"]`, "correct horse battery"),
		click(`#password-form button[type="submit"]`),
		waitText("#flash", "Password set"), waitText("#activity li:first-child", "Password changed"))

	b.run(a, "create a group and edit it",
		goHash("#/t/demo/acme/groups/+new"), waitFor("#group-form"),
		setValue(`#group-form [name="name"]`, "Ops Team"), setValue(`#group-form [name="description"]`, "On call"),
		click(`#group-form button[type="submit"]`),
		waitText("#flash", "Group Ops Team created"), waitText("#group-description", "On call"),
		click("#edit-group"), setValue(`#group-form [name="description"]`, "On-call rota"),
		click(`#group-form button[type="submit"]`),
		waitText("#group-description", "On-call rota"),
		waitText("#activity li:first-child .old", "On call"), waitText("#activity li:first-child .new", "On-call rota"))
	b.run(a, "add to a group and remove from it on the user's page",
		goHash("#/t/demo/acme/users/newbie"), waitText("#user-groups", "Not in any group"),
		typeText("#add-group-name", "ops team"), click(`#add-group button[type="submit"]`),
		waitText("#user-groups", "Ops Team"), waitText("#flash", "Added to Ops Team"),
		click(`#user-groups button[aria-label="Remove from Ops Team"]`),
		waitText("#user-groups", "Not in any group"), waitText("#flash", "Removed from Ops Team"))
	b.run(a, "an unknown group is named next to the field",
		typeText("#add-group-name", "nope"), click(`#add-group button[type="submit"]`),
		waitText("#add-group .field-error", "no group named nope"))
	b.run(a, "remove a member on the group's page, then delete the group",
		goHash("#/t/demo/acme/groups/Ops%20Team"), waitText("#members", "No members"),
		typeText("#add-member-name", "u01"), click(`#add-member button[type="submit"]`), waitText("#members", "u01"),
		click(`#members button[aria-label="Remove u01"]`), waitText("#members", "No members"),
		waitText("#activity li:first-child", "Member removed"),
		click("#delete-group"), click("#confirm-delete"),
		waitText("#flash", "Group Ops Team deleted"), waitText("#groups tbody", "No groups yet"))
	mustCall(t, 404, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme/groups/ops%20team", nil)

	b.run(a, "an actor's name in a timeline opens everything that actor did, paged",
		goHash("#/t/demo/acme/users/newbie"), waitText("#activity li:first-child", "Removed from group Ops Team"),
		click("#activity li:first-child a.actor"),
		waitText("#activity-scope", "Everything bootstrap (the development token) did"),
		waitText("#tenant-activity li:first-child", "Deleted"), waitText("#tenant-activity li:first-child", "group ops team"),
		poll(`(window.firstPage = document.querySelectorAll("#tenant-activity > li").length) > 0`),
		click("#older"), poll(`document.querySelectorAll("#tenant-activity > li").length > window.firstPage`),
		waitText("#tenant-activity", "user u00"), labelled())
	b.run(a, "today's activity",
		click(`#nav a[href$="/activity"]`), waitText("#activity-scope", "(UTC)"),
		waitText("#tenant-activity li:first-child", "Deleted"))
	b.run(a, "a day that is not a date is refused next to the field",
		goHash("#/t/demo/acme/activity?day=2026-13-45"), waitFor(`#activity-filter [name="day"][aria-invalid="true"]`))
	b.run(a, "an unknown user's page says so",
		goHash("#/t/demo/acme/users/ghost"), waitText("main h1", "No user “ghost”"), waitText("main", "never existed"))
	b.noErrors()
}
