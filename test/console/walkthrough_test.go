package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// seedNewcomer provisions demo/acme as a newcomer finds it after a while: 28 users p00…p27
// and a user named like an email (30 users: the list has a second page), a group whose
// member "leaver" was erased since, a user a SCIM token made, and a user whose first name
// was changed. It answers the SCIM token's id.
func seedNewcomer(t *testing.T, in *install) string {
	t.Helper()
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants", map[string]any{"tenant_id": "acme"})
	base := in.url("command-api") + "/v1/systems/demo/tenants/acme"
	for i := range 28 {
		mustCall(t, 201, "POST", base+"/users", map[string]any{"username": fmt.Sprintf("p%02d", i), "email": fmt.Sprintf("p%02d@example.com", i),
			"first_name": fmt.Sprintf("First%02d", i), "last_name": "Paged"})
	}
	mustCall(t, 201, "POST", base+"/users", map[string]any{"username": "ann@example.com", "email": "ann@example.com", "first_name": "Ann", "last_name": "Example"})
	mustCall(t, 201, "POST", base+"/users", map[string]any{"username": "leaver", "email": "leaver@example.com", "first_name": "Lee", "last_name": "Eaver"})
	mustCall(t, 201, "POST", base+"/groups", map[string]any{"name": "Admins", "description": "Demo administrators"})
	mustCall(t, 200, "POST", base+"/groups/admins/members", map[string]any{"add": []string{"leaver", "ann@example.com"}})
	mustCall(t, 200, "PATCH", base+"/users/p00", map[string]any{"first_name": "Paula"})
	mustCall(t, 202, "POST", base+"/users/leaver/erase", map[string]any{"reason": "walk-through"})

	var tok struct{ ID, Token string }
	if err := json.Unmarshal(mustCall(t, 201, "POST", base+"/scim-tokens", map[string]any{"name": "okta-prod"}), &tok); err != nil || tok.Token == "" {
		t.Fatalf("SCIM token: %+v %v", tok, err)
	}
	req, _ := http.NewRequest("POST", in.url("command-api")+"/scim/v2/demo/acme/Users", strings.NewReader(
		`{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"kwong","name":{"givenName":"Kim","familyName":"Wong"},"emails":[{"value":"kwong@example.com","primary":true}]}`))
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	req.Header.Set("Content-Type", "application/scim+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("SCIM create: %v %v", resp, err)
	}
	resp.Body.Close()

	// The erasure's first pass rewrites the group's feed: the member shows without a name.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		feed := string(mustCall(t, 200, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme/activity?entity=group:admins", nil))
		if strings.Contains(feed, `"erased":true`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group's feed does not show the erased member after 60 s: %s", feed)
		}
	}
	waitProjected(t, in, "/users?limit=500", 30)
	return tok.ID
}

// inView waits until the element sel is on the screen: its top within the window.
func inView(sel string) action {
	return poll(fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; const r = el.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.top < innerHeight; })()`, sel))
}

// TestNewcomerWalkThrough clicks through what a first-time administrator does — a sign-in
// link (a used one first), a search, page 2, a bulk action, a user named like an email, an
// erased member, a SCIM token's work, the query API paused and stopped, phone width — and
// checks at each step that the console says it in words. `make console-screenshots`
// saves its screenshots for docs/.
func TestNewcomerWalkThrough(t *testing.T) {
	in := newInstall(t, "SSO_ERASURE_SETTLE=10s")
	in.start("command-api")
	in.start("projector")
	const timeout = "SSO_CONSOLE_READ_TIMEOUT=3s"
	q := in.start("query-api", timeout)
	in.start("keycloak-sync")
	tokenID := seedNewcomer(t, in)
	b := newBrowser(t)
	b.unreachable = true
	shots := screenshots(t)
	a := b.ctx

	used := consoleURL(t, in)
	if got := redeem(t, in, codeOf(t, used)); got != http.StatusOK {
		t.Fatalf("redeem: %d", got)
	}
	b.run(a, "a used sign-in link says so, above the token field its message points to",
		chromedp.Navigate(used), waitText("#code-error", "used or has expired"), waitText("#code-error", "enter the development token below"),
		waitFor(`#dev-signin input[name="token"]`), labelled())
	shots.take(b, a, "console-link-used")

	b.run(a, "a fresh link signs in", chromedp.Navigate(consoleURL(t, in)), rows(25), waitText(".page-no", "Page 1"))
	b.run(a, "a search for an email finds the user named like it",
		typeText("#search", "ann@example.com"), rows(1), waitText("#users tbody", "ann@example.com"))
	shots.take(b, a, "console-email-search")
	b.run(a, "the user named like an email: its page, its group, its timeline",
		click(`#users tbody a`), waitText("#user-facts", "ann@example.com"), waitText("#user-groups", "Admins"),
		waitText("#activity", "Created"), waitText("#activity", "bootstrap (the development token)"))

	b.run(a, "the group's timeline names the erased member in words",
		click(`#user-groups a[href$="/groups/Admins"]`), waitText("#members", "ann@example.com"),
		waitText("#activity", "an erased person"), waitNoText("#activity", "erased\":"), waitNoText("#activity", "{"),
		waitText("#activity", "Member"), waitFor("#activity .new.erased"))
	shots.take(b, a, "console-erased-member")
	b.run(a, "so does the tenant's activity", click(`#nav a[href$="/activity"]`),
		waitText("#tenant-activity", "an erased person"), waitNoText("#tenant-activity", "{"),
		waitText("#activity-filter", "Done by"))
	b.run(a, "the erased user's page says what may have happened, in words",
		goHash("#/t/demo/acme/users/leaver"), waitText("main h1", "No user “leaver”"), waitText("#gone", "erased"),
		waitNoText("main", "user not found"), waitFor(`#gone a[href*="users?q=leaver"]`))

	b.run(a, "a change shows its field in words, old → new",
		goHash("#/t/demo/acme/users/p00"), waitText("#activity li:first-child", "First name"),
		waitNoText("#activity", "first_name"), waitText("#activity li:first-child .old", "First00"), waitText("#activity li:first-child .new", "Paula"))
	b.run(a, "a SCIM token's work is shown by the token's name, its id on hover",
		goHash("#/t/demo/acme/users/kwong"), waitText("#activity", "SCIM token “okta-prod”"),
		poll(fmt.Sprintf(`document.querySelector("#activity .actor").title === %q`, "scim-token:"+tokenID)))
	shots.take(b, a, "console-scim-actor")

	b.run(a, "page 2 of all users, and a bulk action on it",
		goHash("#/t/demo/acme/users"), rows(25), click(".pager .next"), rows(5), waitText(".page-no", "Page 2"),
		checkUser("p01"), checkUser("p02"), click("#bulk-deactivate"), waitText("#bulk-summary", "2 deactivated"))
	// The list is by last update: once the deactivations are in the view, p01 and p02 lead
	// page 1, and a page 2 read after that is the same page whenever it is read again.
	// They reach the view only after the erasure's second pass (SSO_ERASURE_SETTLE after its
	// first), which parks the stream till then: longer than one X-Min-Version read waits.
	for _, u := range []string{"p01", "p02"} {
		waitVersion(t, in.url("query-api")+"/v1/systems/demo/tenants/acme/users/"+u, 2)
	}
	b.run(a, "back to page 1", click(".pager .prev"), rows(25), waitText(".page-no", "Page 1"))

	q.pause()
	b.run(a, "Next with the query API paused: the rows shown are not actionable while it loads",
		checkUser("kwong"), waitText("#bulk-count", "1 selected"),
		click(".pager .next"), waitText("#users-status", "Loading"),
		poll(`document.querySelector("#users tbody").inert && document.querySelector("#select-all").disabled`),
		disabled("#bulk-deactivate, #bulk-activate, #bulk-add"), waitText("#bulk-count", "None selected"))
	b.run(a, "then no answer: in view, naming the query API, with no rows of the page before under Page 2",
		waitText("#users-status", "No answer from the query API"), waitText("#users-status", "did not answer within 3 s"),
		inView("#users-status .retry"), rows(0), waitText(".page-no", "Page 2"), poll(`location.hash.includes("cursor=")`),
		disabled("#bulk-deactivate, #bulk-activate, #bulk-add"), poll(`!document.querySelector("#users tbody").inert`))
	shots.take(b, a, "console-no-answer")
	q.resume()
	b.run(a, "Try again shows page 2", click("#users-status .retry"), rows(5), waitText(".page-no", "Page 2"),
		waitNoText("#users-status", "did not answer"))

	q.kill()
	b.run(a, "the query API stopped: the page names it, with the hint that can apply",
		goHash("#/t/demo/acme/users/p03"), waitText("main h1", "Cannot reach the query API"),
		waitText("main", "It served this page"), waitNoText("main", "SSO_CORS_ORIGINS"), waitFor("#page-retry"),
		poll(fmt.Sprintf(`document.querySelector("main").innerText.split(%q).length === 2`, in.url("query-api"))))
	shots.take(b, a, "console-unreachable")
	in.start("query-api", timeout)
	b.run(a, "once it is back, Try again reads the page", click("#page-retry"), waitText("#user-facts", "p03@example.com"))

	b.run(a, "operations in words", click(`#nav a[href$="/ops"]`), waitText("#projector-facts", "How far behind"),
		waitText("#projector-facts", "Changes set aside"), waitNoText("main", "Dead letters now stored"))

	b.run(a, "at phone width the first rows of the users list are on the first screen",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), goHash("#/t/demo/acme/users"), rows(25),
		inView("#users tbody tr:nth-child(3)"),
		poll(`document.querySelector("#users tbody tr:nth-child(3)").getBoundingClientRect().bottom <= innerHeight`))
	shots.screen(b, a, "console-walk-phone")
	b.noErrors()
}
