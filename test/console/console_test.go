package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// seed provisions tenant demo/acme with three users and a group, through the command API.
func seed(t *testing.T, in *install) {
	t.Helper()
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants", map[string]any{"tenant_id": "acme"})
	base := in.url("command-api") + "/v1/systems/demo/tenants/acme"
	for _, u := range []map[string]any{
		{"username": "jdoe", "email": "jdoe@example.com", "first_name": "Jane", "last_name": "Doe"},
		{"username": "rroe", "email": "rroe@example.com", "first_name": "Richard", "last_name": "Roe"},
		{"username": "asmith", "email": "asmith@example.com", "first_name": "Ann", "last_name": "Smith", "attributes": map[string][]string{"dept": {"eng"}}},
	} {
		mustCall(t, 201, "POST", base+"/users", u)
	}
	mustCall(t, 201, "POST", base+"/groups", map[string]any{"name": "Admins", "description": "Demo administrators"})
	waitProjected(t, in, "/users?limit=500", 3)
	waitProjected(t, in, "/groups?limit=500", 1)

}

// consoleURL is what make run prints: the console's sign-in route with a fresh one-time
// code (never the token) and the demo tenant, in its fragment.
func consoleURL(t *testing.T, in *install) string {
	t.Helper()
	var m struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(mustCall(t, 201, "POST", in.url("query-api")+"/console/dev-codes", nil), &m); err != nil || m.Code == "" {
		t.Fatalf("mint a sign-in code: %+v %v", m, err)
	}
	return in.url("query-api") + "/console/#/signin?" + url.Values{"code": {m.Code}, "tenant": {"demo/acme"}}.Encode()
}

func TestConsoleInABrowser(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	in.start("keycloak-sync")
	seed(t, in)
	query := in.url("query-api") + "/v1/systems/demo/tenants/acme"
	b := newBrowser(t)
	shots := screenshots(t)
	a := b.ctx

	b.run(a, "sign in with the development token from make run's URL",
		chromedp.Navigate(consoleURL(t, in)),
		waitText("#users tbody", "asmith"), waitText("#users tbody", "jdoe"), waitText("#users tbody", "rroe"),
		waitText("#who", "demo/acme"), labelled())
	shots.take(b, a, "console-users")

	b.run(a, "one field searches names as you type",
		typeText("#search", "sm"),
		waitNoText("#users tbody", "jdoe"), waitText("#users tbody", "asmith"), waitText("#user-count", "then last names"))
	b.run(a, "the same field searches usernames first, and lists a user matched twice once",
		setValue("#search", ""), typeText("#search", "J"),
		waitNoText("#users tbody", "asmith"), waitText("#users tbody", "jdoe"), rows(1))
	b.run(a, "a chosen match searches first names only",
		setValue("#search", ""), setValue("#search-by", "first_name"),
		typeText("#search", "ric"),
		waitNoText("#users tbody", "asmith"), waitText("#users tbody", "rroe"), waitText("#user-count", "Sorted by first name"))
	b.run(a, "typing an address finds the user with that email, and the match stays as chosen",
		setValue("#search", ""), setValue("#search-by", "auto"), typeText("#search", "JDOE@example.com"),
		waitNoText("#users tbody", "rroe"), waitText("#users tbody", "jdoe"), waitText("#user-count", "The user with the email"),
		poll(`document.querySelector("#search-by").value === "auto"`))
	b.run(a, "an emptied field lists every user again, not an empty email match",
		setValue("#search", ""), rows(3), waitText("#users tbody", "rroe"), waitText("#user-count", "All users"))

	b.run(a, "open a user",
		click(`#users a[href$="/users/jdoe"]`),
		waitText("#user-facts", "jdoe@example.com"), waitText("#activity", "Created"), labelled())

	b.run(a, "edit it and see the change in the timeline, old → new",
		click("#edit-user"),
		setValue(`#user-form [name="last_name"]`, "Dough"),
		click("#save-user"),
		waitText("#user-last-name", "Dough"), waitText("#flash", "Changes saved"),
		waitText("#activity li:first-child", "Updated"), waitText("#activity li:first-child", "Last name"),
		waitText("#activity li:first-child .old", "Doe"), waitText("#activity li:first-child .new", "Dough"),
		waitText("#activity li:first-child", "bootstrap"))
	b.run(a, "the edit form is labelled too", click("#edit-user"), labelled(), click(`#user-form button[type="button"]`))
	shots.take(b, a, "console-user")

	b.run(a, "an invalid edit shows the API's message next to the field and changes nothing",
		click("#edit-user"),
		setValue(`#user-form [name="email"]`, "not-an-address"),
		click("#save-user"),
		waitFor(`#user-form [name="email"][aria-invalid="true"]`),
		waitFor(`#user-form .field:has([name="email"]) .field-error`))
	var u struct {
		Email   string `json:"email"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(mustCall(t, 200, "GET", query+"/users/jdoe", nil), &u); err != nil || u.Email != "jdoe@example.com" {
		t.Fatalf("after a refused edit the user is %+v (%v)", u, err)
	}

	// A second session (another tab, signed in on its own) changes the user this tab shows.
	second := b.tab()
	b.run(second, "a second session edits the same user",
		chromedp.Navigate(consoleURL(t, in)), waitText("#users tbody", "jdoe"),
		goHash("#/t/demo/acme/users/jdoe"), waitText("#user-facts", "Dough"),
		click("#edit-user"),
		setValue(`#user-form [name="first_name"]`, "Janet"),
		click("#save-user"),
		waitText("#user-first-name", "Janet"))
	b.run(a, "this session's save, from the version it showed, gets 412 and says so",
		waitText("#user-first-name", "Jane"),
		setValue(`#user-form [name="email"]`, "jdoe@example.com"),
		setValue(`#user-form [name="last_name"]`, "Doh"),
		click("#save-user"),
		waitText("#conflict-message", "User jdoe was changed by someone else since you opened it"))
	shots.take(b, a, "console-conflict")
	b.run(a, "reload shows the other session's change, and this one was not saved",
		click("#conflict-reload"),
		waitText("#user-first-name", "Janet"), waitText("#user-last-name", "Dough"))

	b.run(a, "add a member from the group's page",
		click(`#nav a[href$="/groups"]`),
		waitText("#groups tbody", "Admins"),
		click(`#groups a[href$="/groups/Admins"]`),
		waitText("#members", "No members"),
		typeText("#add-member-name", "jdoe"),
		click(`#add-member button[type="submit"]`),
		waitText("#members", "jdoe"), waitText("#flash", "jdoe added"),
		waitText("#activity li:first-child", "Member added"), labelled())
	shots.take(b, a, "console-group")
	var members struct {
		Items []struct{ Username string } `json:"items"`
	}
	_ = json.Unmarshal(mustCall(t, 200, "GET", query+"/groups/admins/members", nil), &members)
	if len(members.Items) != 1 || members.Items[0].Username != "jdoe" {
		t.Fatalf("members after the console added one: %+v", members.Items)
	}

	b.run(a, "the user's page lists the group",
		click(`#members a[href$="/users/jdoe"]`),
		waitText("#user-groups", "Admins"))

	b.run(a, "operations show the projector and keycloak-sync for the tenant",
		click(`#nav a[href$="/ops"]`),
		waitText("#projector-ready", "Ready"), waitText("#keycloak-sync-ready", "Ready"),
		waitPositive("#projector-facts", "Records applied"), waitText("#keycloak-sync-facts", "Last full check that Keycloak matches the directory"), waitText("#keycloak-sync-facts", "On hold because Keycloak keeps failing"), waitText("#keycloak-sync-facts", "Differences that check found"), labelled())
	shots.take(b, a, "console-operations")
	b.run(a, "today's activity across the tenant",
		click(`#nav a[href$="/activity"]`), waitText("#tenant-activity li:first-child", "Member added"),
		waitText("#tenant-activity", "user jdoe"), labelled())
	shots.take(b, a, "console-activity")

	b.run(a, "delete a user",
		goHash("#/t/demo/acme/users/rroe"), waitText("#user-facts", "rroe@example.com"),
		click("#delete-user"),
		click("#confirm-delete"),
		waitText("#flash", "User rroe deleted"), waitNoText("#users tbody", "rroe"), waitText("#users tbody", "jdoe"))
	if status, _, body := call(t, "GET", query+"/users/rroe", nil); status != 404 {
		t.Fatalf("deleted user: %d %s", status, body)
	}

	shots.phone(b, a, in)
	b.noErrors()
}

// shooter writes screenshots into SSODIR_CONSOLE_SCREENSHOTS when it is set (make
// console-screenshots points it at docs/); otherwise it does nothing.
type shooter struct {
	t   *testing.T
	dir string
}

func screenshots(t *testing.T) shooter {
	return shooter{t: t, dir: os.Getenv("SSODIR_CONSOLE_SCREENSHOTS")}
}

// take saves the whole page.
func (s shooter) take(b *browser, ctx context.Context, name string) {
	s.save(ctx, name, chromedp.FullScreenshot(100))
}

// screen saves what the window shows: the first screen, as a user sees it on opening the
// page (a full-page shot of a phone's long list would hide where the first screen ends).
func (s shooter) screen(b *browser, ctx context.Context, name string) {
	s.save(ctx, name, chromedp.CaptureScreenshot())
}

func (s shooter) save(ctx context.Context, name string, shot chromedp.Action[[]byte]) {
	if s.dir == "" {
		return
	}
	// A long page has a scrollbar, which a full-page screenshot would cut the page's right
	// edge off for.
	if _, err := chromedp.Call(ctx, emulation.SetScrollbarsHidden, emulation.SetScrollbarsHiddenParams{Hidden: true}); err != nil {
		s.t.Fatalf("hide scrollbars: %v", err)
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, name+".png"), png, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func (s shooter) phone(b *browser, ctx context.Context, in *install) {
	if s.dir == "" {
		return
	}
	b.run(ctx, "phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)),
		goHash("#/t/demo/acme/users/jdoe"), waitText("#activity", "Updated"))
	s.take(b, ctx, "console-user-phone")
	b.run(ctx, "phone users", goHash("#/t/demo/acme/users"), waitText("#users tbody", "jdoe"))
	s.take(b, ctx, "console-users-phone")
}

// waitVersion reads url with X-Min-Version until it answers 200 (30 s at most): a 503
// says that the view has not reached the version within the query API's wait.
func waitVersion(t *testing.T, url string, version int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status, _, body := call(t, "GET", url, nil, "X-Min-Version", fmt.Sprint(version))
		switch {
		case status == http.StatusOK:
			return
		case status != http.StatusServiceUnavailable || time.Now().After(deadline):
			t.Fatalf("GET %s with X-Min-Version %d: %d %s", url, version, status, body)
		}
	}
}

// waitProjected waits until the query API's list at path (of demo/acme) has n items: the
// views follow the command log a moment later, and the console's first page is a list.
func waitProjected(t *testing.T, in *install, path string, n int) {
	t.Helper()
	var got int
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(mustCall(t, 200, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme"+path, nil), &page); err != nil {
			t.Fatal(err)
		}
		if got = len(page.Items); got == n {
			return
		}
	}
	t.Fatalf("%s has %d items, want %d", path, got, n)
}
