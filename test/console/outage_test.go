package console

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
)

// seedMany provisions demo/acme with 30 users (u00…u29), 30 groups (g00…g29), u00 in every
// group and every user in g00: each list of the console has a second page.
func seedMany(t *testing.T, in *install) {
	t.Helper()
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants", map[string]any{"tenant_id": "acme"})
	base := in.url("command-api") + "/v1/systems/demo/tenants/acme"
	for i := range 30 {
		mustCall(t, 201, "POST", base+"/users", map[string]any{"username": fmt.Sprintf("u%02d", i), "email": fmt.Sprintf("u%02d@example.com", i),
			"first_name": fmt.Sprintf("First%02d", i), "last_name": "Paged"})
		mustCall(t, 201, "POST", base+"/groups", map[string]any{"name": fmt.Sprintf("g%02d", i)})
	}
	for i := range 30 {
		mustCall(t, 204, "PUT", fmt.Sprintf("%s/groups/g%02d/members/u00", base, i), nil)
		if i > 0 {
			mustCall(t, 204, "PUT", fmt.Sprintf("%s/groups/g00/members/u%02d", base, i), nil)
		}
	}
	waitProjected(t, in, "/users?limit=500", 30)
	waitProjected(t, in, "/groups?limit=500", 30)
	waitProjected(t, in, "/groups/g00/members?limit=500", 30)
	waitProjected(t, in, "/users/u00/groups?limit=500", 30)
}

// disabled waits until every button sel matches is disabled.
func disabled(sel string) action {
	return poll(fmt.Sprintf(`(() => { const els = [...document.querySelectorAll(%q)]; return els.length > 0 && els.every((b) => b.disabled); })()`, sel))
}

// noAnswer waits for the message of a read that timed out in the element sel, with its
// "Try again".
func noAnswer(sel string) action {
	return chromedp.Steps(waitText(sel, "did not answer within 3 s"), waitFor(sel+" .retry"))
}

// With the query API paused (SIGSTOP: it accepts connections and answers nothing) and then
// stopped, every kind of page and every pager says that it is loading, disables its
// pager meanwhile, then says the read failed, with "Try again", where the user looks;
// nothing is left as an unhandled rejection.
func TestReadsWhenTheQueryAPIIsPausedOrStopped(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	const timeout = "SSO_CONSOLE_READ_TIMEOUT=3s"
	q := in.start("query-api", timeout)
	in.start("keycloak-sync")
	seedMany(t, in)
	b := newBrowser(t)
	b.unreachable = true
	a := b.ctx

	b.run(a, "the users list", chromedp.Navigate(consoleURL(t, in)), rows(25))
	q.pause()
	b.run(a, "Next under users, paused: the pager is disabled while it loads, then the read fails with a retry",
		click(".pager .next"), disabled(".pager .next, .pager .prev"), waitText("#users-status", "Loading"),
		noAnswer("#users-status"))
	q.resume()
	b.run(a, "Try again reads the page", click("#users-status .retry"), rows(5), waitText("#users tbody", "u00"),
		waitNoText("#users-status", "did not answer"))

	q.pause()
	b.run(a, "a user's page, paused: loading, then no answer with a retry",
		goHash("#/t/demo/acme/users/u00"), waitText("#page-loading", "Loading"),
		waitText("main h1", "No answer"), waitText("main", "did not answer within 3 s"), waitFor("#page-retry"))
	q.resume()
	b.run(a, "the user's page comes with Try again", click("#page-retry"), waitText("#user-facts", "u00@example.com"),
		waitText("#user-groups", "g00"), waitFor("#user-groups + .list-foot .next"))
	q.pause()
	b.run(a, "Next under a user's groups, paused",
		click("#user-groups + .list-foot .next"), disabled("#user-groups + .list-foot button"),
		waitText("#user-groups-status", "Loading"), noAnswer("#user-groups-status"))
	q.resume()
	b.run(a, "the user's second page of groups", click("#user-groups-status .retry"), waitText("#user-groups", "g29"), waitNoText("#user-groups", "g00"))

	b.run(a, "a group's page", goHash("#/t/demo/acme/groups/g00"), waitText("#members", "u00"), waitFor("#older"))
	q.pause()
	b.run(a, "Show older, paused",
		click("#older"), disabled("#older"), waitText("#activity-status", "Loading"), noAnswer("#activity-status"))
	b.run(a, "Next under a group's members, paused",
		click("#members + .list-foot .next"), disabled("#members + .list-foot button"),
		waitText("#members-status", "Loading"), noAnswer("#members-status"))
	q.resume()
	b.run(a, "both come with Try again",
		click("#activity-status .retry"), poll(`document.querySelectorAll("#activity > li").length > 25`),
		click("#members-status .retry"), waitText("#members", "u29"), waitNoText("#members", "u01 "))

	q.pause()
	b.run(a, "the groups list, paused", goHash("#/t/demo/acme/groups"), waitText("#groups-status", "Loading"), noAnswer("#groups-status"))
	b.run(a, "the tenant's activity, paused", goHash("#/t/demo/acme/activity"), waitText("#tenant-activity-status", "Loading"), noAnswer("#tenant-activity-status"))
	b.run(a, "operations, paused: the tenant's card says so, the consumers' cards come",
		goHash("#/t/demo/acme/ops"), waitText("#tenant-card", "did not answer within 3 s"), waitText("#projector-ready", "Ready"))
	q.resume()
	b.run(a, "operations read again by themselves", waitText("#tenant-card", "demo/acme"), waitText("#tenant-card", "active"))
	q.pause()
	b.run(a, "opening a tenant, paused",
		goHash("#/tenants"), waitFor("#tenant-form"), setValue(`#tenant-form [name="system"]`, "demo"), setValue(`#tenant-form [name="tenant"]`, "acme"),
		click(`#tenant-form button[type="submit"]`), waitText("#tenant-form", "Looking for the tenant"),
		waitText("#tenant-form .form-error", "did not answer within 3 s"))
	q.resume()

	b.run(a, "a group's page before the query API stops", goHash("#/t/demo/acme/groups/g00"), waitText("#members", "u00"))
	q.kill()
	b.run(a, "Next under a group's members, stopped: the failure shows at once, with a retry",
		click("#members + .list-foot .next"), waitText("#members-status", "Cannot reach"), waitFor("#members-status .retry"))
	b.run(a, "a page, stopped", goHash("#/t/demo/acme/users/u01"), waitText("main", "Cannot reach"), waitFor("#page-retry"))
	in.start("query-api", timeout)
	b.run(a, "once the query API is back, Try again reads the page",
		click("#page-retry"), waitText("#user-facts", "u01@example.com"))
	b.noErrors()
}
