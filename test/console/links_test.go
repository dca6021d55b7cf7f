package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// elsewhere is a service at another local address that counts every request it gets and
// answers as an obliging API would (CORS for anyone, 200), so that a console that called
// it would not even notice.
type elsewhere struct {
	URL   string
	mu    sync.Mutex
	calls []string
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.calls = append(e.calls, r.Method+" "+r.URL.String())
		e.mu.Unlock()
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Allow-Headers", "*")
		w.Header().Set("Access-Control-Allow-Methods", "*")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[],"next_cursor":null}`))
	}))
	t.Cleanup(srv.Close)
	e.URL = srv.URL
	return e
}

// none fails the test if the service was called at all.
func (e *elsewhere) none(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.calls) > 0 {
		t.Fatalf("the console sent %d requests to %s: %v", len(e.calls), e.URL, e.calls)
	}
}

// redeem exchanges a console sign-in code at the query API and answers the status.
func redeem(t *testing.T, in *install, code string) int {
	t.Helper()
	status, _, _ := call(t, "POST", in.url("query-api")+"/console/dev-codes/redeem", map[string]string{"code": code})
	return status
}

func codeOf(t *testing.T, link string) string {
	t.Helper()
	_, frag, _ := strings.Cut(link, "#/signin?")
	q, err := url.ParseQuery(frag)
	if err != nil || q.Get("code") == "" {
		t.Fatalf("no code in %s", link)
	}
	return q.Get("code")
}

func sessionJSON(b *browser) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`sessionStorage.getItem("ssodir.session") || ""`))
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// With the services' addresses set by the operator (as make run sets them), a crafted link
// sends nothing anywhere else and signs no one in; make run's link signs in with a one-time
// code that the browser's history keeps only as a used code.
func TestCraftedSignInLinks(t *testing.T) {
	in := newInstall(t)
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	in.start("keycloak-sync")
	seed(t, in)
	evil := newElsewhere(t)
	b := newBrowser(t)
	a := b.ctx
	crafted := "#/signin?" + url.Values{"command_api": {evil.URL}, "projector": {evil.URL}, "keycloak_sync": {evil.URL},
		"token": {token}, "tenant": {"demo/acme"}}.Encode()

	b.run(a, "a crafted link with other addresses and a token signs no one in and says why",
		chromedp.Navigate(in.url("query-api")+"/console/"+crafted),
		waitText("main", "carried a token"), waitText("main", "were ignored"), waitFor("#dev-signin"),
		poll(`sessionStorage.getItem("ssodir.session") === null`),
		poll(`location.hash === "#/signin"`),
		poll(`!(localStorage.getItem("ssodir.settings") || "").includes(`+jsString(evil.URL)+`)`),
		poll(`document.querySelector("#connection").textContent.includes(`+jsString(in.url("command-api"))+`)`))
	evil.none(t)

	link := consoleURL(t, in)
	b.run(a, "make run's link signs in with its one-time code",
		chromedp.Navigate("about:blank"), chromedp.Navigate(link), waitText("#users tbody", "jdoe"), waitText("#who", "demo/acme"),
		poll(`!location.hash.includes("code=")`))
	if got := redeem(t, in, codeOf(t, link)); got != http.StatusBadRequest {
		t.Fatalf("the link's code redeemed again after the console used it: %d", got)
	}
	history, err := chromedp.Call(a, page.GetNavigationHistory, cdp.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range history.Entries {
		if strings.Contains(e.URL, token) || strings.Contains(e.URL, url.QueryEscape(token)) {
			t.Fatalf("the browser's history holds the token: %s", e.URL)
		}
	}
	if len(history.Entries) < 2 {
		t.Fatalf("history %+v: want the links' entries", history.Entries)
	}

	b.run(a, "writes, with a password in the body, and the operations page reach the operator's services",
		goHash("#/t/demo/acme/users/+new"), waitFor("#user-form"),
		setValue(`#user-form [name="username"]`, "mallory"), setValue(`#user-form [name="email"]`, "mallory@example.com"),
		setValue(`#user-form [name="password"]`, "correct horse battery"),
		click(`#user-form button[type="submit"]`), waitText("#flash", "User mallory created"),
		click(`#nav a[href$="/ops"]`), waitText("#projector-ready", "Ready"), waitText("#keycloak-sync-ready", "Ready"))
	mustCall(t, 200, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme/users/mallory", nil, "X-Min-Version", "1")

	signedIn := sessionJSON(b)
	b.run(a, "the crafted link in a signed-in tab leaves the session as it was",
		goHash(crafted), waitText("main", "carried a token"), waitText("#signed-in-as", "signed in as bootstrap"),
		poll(`sessionStorage.getItem("ssodir.session") === `+jsString(signedIn)))

	fresh := consoleURL(t, in)
	b.run(a, "a sign-in link in a signed-in tab asks before it replaces the session",
		goHash("#/signin?"+strings.SplitN(fresh, "#/signin?", 2)[1]),
		waitText("#link-confirm", "in place of your session as bootstrap"),
		click("#link-reject"), waitNoText("main", "Check this sign-in link"),
		poll(`sessionStorage.getItem("ssodir.session") === `+jsString(signedIn)))
	if got := redeem(t, in, codeOf(t, fresh)); got != http.StatusOK {
		t.Fatalf("the refused link's code was used by the console: redeem answered %d", got)
	}

	other := b.tab()
	b.run(other, "a used link, opened again, signs in no one",
		chromedp.Navigate(link), waitText("#code-error", "used or has expired"),
		// Its message points to the token field: it is there, below it.
		waitText("#code-error", "enter the development token below"), waitFor(`#dev-signin input[name="token"]`),
		poll(`sessionStorage.getItem("ssodir.session") === null`))
	evil.none(t)
	b.noErrors()
}

// Without the operator's addresses (a development setup) a link's addresses are shown and
// used only if the user says yes, and only on this machine; typed addresses are confirmed
// before they are saved.
func TestLinkAddressesNeedTheUsersYes(t *testing.T) {
	in := newInstall(t)
	in.noConsoleAddrs = true
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	seed(t, in)
	evil := newElsewhere(t)
	b := newBrowser(t)
	a := b.ctx
	code := codeOf(t, consoleURL(t, in))
	crafted := in.url("query-api") + "/console/#/signin?" + url.Values{"command_api": {evil.URL}, "projector": {"https://directory.example.com"},
		"code": {code}, "tenant": {"demo/acme"}}.Encode()

	b.run(a, "a link's addresses are shown, a foreign one refused, and nothing happens until the user answers",
		chromedp.Navigate(crafted),
		waitText("#link-addresses", evil.URL), waitText("#link-addresses", "refused"), waitText("#link-confirm", "signs this tab in"),
		poll(`sessionStorage.getItem("ssodir.session") === null`))
	b.run(a, "ignoring the link saves nothing and signs no one in",
		click("#link-reject"), waitNoText("main", "Check this sign-in link"),
		poll(`sessionStorage.getItem("ssodir.session") === null`),
		poll(`!(localStorage.getItem("ssodir.settings") || "").includes("command_api")`))
	evil.none(t)
	if got := redeem(t, in, code); got != http.StatusOK {
		t.Fatalf("the ignored link's code was used: redeem answered %d", got)
	}

	b.run(a, "signed in, with no command API address the console can read but not write",
		chromedp.Navigate("about:blank"), chromedp.Navigate(consoleURL(t, in)), waitText("#users tbody", "jdoe"),
		goHash("#/t/demo/acme/users/+new"), waitFor("#user-form"),
		setValue(`#user-form [name="username"]`, "newbie"), setValue(`#user-form [name="email"]`, "newbie@example.com"),
		click(`#user-form button[type="submit"]`), waitText("#user-form .form-error", "not set"))
	b.run(a, "an address of another host typed on the sign-in page is refused next to its field",
		goHash("#/signin"), waitFor("#connection"),
		setValue(`#connection [name="command_api"]`, "https://directory.example.com:8080"),
		click(`#connection button[type="submit"]`), waitFor(`#connection [name="command_api"][aria-invalid="true"]`))
	b.run(a, "a typed address on this machine is saved once the user confirms it",
		setValue(`#connection [name="command_api"]`, in.url("command-api")),
		click(`#connection button[type="submit"]`), waitText("#connection-confirm", in.url("command-api")),
		poll(`!(localStorage.getItem("ssodir.settings") || "").includes("command_api")`),
		click("#connection-accept"), waitText("#flash", "Connection saved"),
		goHash("#/t/demo/acme/users/+new"), waitFor("#user-form"),
		setValue(`#user-form [name="username"]`, "newbie"), setValue(`#user-form [name="email"]`, "newbie@example.com"),
		click(`#user-form button[type="submit"]`), waitText("#flash", "User newbie created"))
	evil.none(t)
	b.noErrors()
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
