package console

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// receiver is a webhook endpoint on loopback: it answers 500 while failing is set, else
// 204, and remembers the subjects of the changes it took and the signatures they bore.
type receiver struct {
	failing  atomic.Bool
	mu       sync.Mutex
	took     []string
	unsigned int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if r.failing.Load() {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	r.mu.Lock()
	if !strings.HasPrefix(req.Header.Get("webhook-signature"), "v1,") {
		r.unsigned++
	}
	for _, s := range []string{"user:ann", "user:bob"} {
		if strings.Contains(string(body), `"subject":"`+s+`"`) {
			r.took = append(r.took, s)
		}
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) got() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.took...), r.unsigned
}

// refreshUntil clicks Refresh (sel) until a row of the table tbl holds every one of want
// (the projector delivers on its own schedule), one read at a time.
func refreshUntil(tbl, sel string, want ...string) action {
	js := fmt.Sprintf(`(() => {
	  const body = document.querySelector(%q + ' tbody');
	  if (!body || body.hasAttribute('aria-busy')) return false;
	  if ([...body.querySelectorAll('tr')].some((r) => %s.every((w) => r.innerText.includes(w)))) return true;
	  const b = document.querySelector(%q);
	  if (b && !b.disabled) b.click();
	  return false;
	})()`, tbl, jsStrings(want), sel)
	return void(chromedp.Poll[bool](js, chromedp.WithPollingTimeout(25*time.Second), chromedp.WithPollingInterval(400*time.Millisecond)))
}

func jsStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// secretValue reads the secret the page shows once.
func secretValue(out *string) action {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		v, err := chromedp.Evaluate[string](`document.querySelector('#webhook-secret-value').innerText`)(ctx, t)
		*out = v
		return chromedp.Void{}, err
	}
}

// TestWebhooksPageCreatesWatchesReplaysRotatesAndDeletes: a support person registers an
// endpoint (a bad URL refused on its field; the secret shown once, with the warning), sees a
// change delivered, sees the endpoint fail with the receiver's 500 in words, replays it once
// the receiver works, makes a new secret (shown once, the old one still signing) and
// deletes it after confirming.
func TestWebhooksPageCreatesWatchesReplaysRotatesAndDeletes(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	in := newInstall(t, "SSO_WEBHOOKS_ALLOW_PRIVATE=true")
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	tenants := in.url("command-api") + "/v1/systems/demo/tenants"
	mustCall(t, 201, "POST", tenants, map[string]any{"tenant_id": "acme"})
	acme := tenants + "/acme"

	b := newBrowser(t)
	a := b.ctx
	b.run(a, "the Webhooks page is in the menu and says there are none",
		chromedp.Navigate(consoleURL(t, in)), waitFor("#users tbody tr"), click(`#nav a[href$="/webhooks"]`),
		waitText("main h1", "Webhooks"), waitText("#webhooks tbody", "No webhooks yet"))
	b.run(a, "a URL that is not https is refused on its field",
		click("#new-webhook"), waitFor("#webhook-form"), labelled(),
		setValue("#f-url", "ftp://hooks.example.com/x"), click("#create-webhook"),
		waitFor(`#f-url[aria-invalid="true"]`), waitText("#webhook-form .field-error", "https"))
	var first string
	b.run(a, "the endpoint is created for users created; its secret is shown once",
		setValue("#f-url", srv.URL+"/hook"), click(`input[name="types"][value="user.created"]`),
		setValue("#f-description", "HR sync"), click("#create-webhook"),
		waitText("#webhook-secret", "you will not see it again"), waitText("#webhook-secret-value", "whsec_"),
		waitText("#webhook-facts", "user.created"), waitText("#webhook-facts", "HR sync"),
		waitText("#deliveries tbody", "Nothing sent yet"), labelled(), secretValue(&first))

	mustCall(t, 201, "POST", acme+"/users", map[string]any{"username": "ann"})
	b.run(a, "the change is listed as delivered, with the receiver's answer",
		refreshUntil("#deliveries", "#deliveries-refresh", "Delivered", "HTTP 204", "user.created", "user:ann"))
	if took, unsigned := rcv.got(); len(took) != 1 || took[0] != "user:ann" || unsigned != 0 {
		t.Fatalf("the receiver took %v (%d unsigned), want ann's creation, signed", took, unsigned)
	}

	rcv.failing.Store(true)
	mustCall(t, 201, "POST", acme+"/users", map[string]any{"username": "bob"})
	b.run(a, "the receiver's 500 shows as a failed delivery, in words",
		refreshUntil("#deliveries", "#deliveries-refresh", "Failed", "HTTP 500", "user:bob", "Internal Server Error"))
	b.run(a, "the endpoint shows as failing, on its page and in the list",
		click(".crumbs a"), refreshUntil("#webhooks", "#webhooks-refresh", "Failing", "HTTP 500"),
		click(`#webhooks tbody a`), waitText("#webhook-state", "Failing"), waitText("#webhook-state", "Internal Server Error"),
		waitNoText("main", "whsec_"))

	rcv.failing.Store(false)
	b.run(a, "replay sends the held change again once the receiver works",
		click("#replay-webhook"), waitFor("#replay-form:not([hidden])"), labelled(), click("#confirm-replay"),
		waitText("#flash", "Delivering again"),
		refreshUntil("#deliveries", "#deliveries-refresh", "Delivered", "user:bob"))
	if took, _ := rcv.got(); len(took) != 2 || took[1] != "user:bob" {
		t.Fatalf("the receiver took %v, want ann's creation then bob's", took)
	}

	var second string
	b.run(a, "a new secret is shown once; the old one still signs for a while",
		click("#rotate-secret"), click("#confirm-rotate"),
		waitText("#webhook-secret", "new signing secret"), waitText("#webhook-secret", "you will not see it again"),
		waitText("#webhook-facts", "Old secret still signs until"), secretValue(&second))
	if !strings.HasPrefix(second, "whsec_") || second == first {
		t.Fatalf("the new secret %q, the first %q", second, first)
	}
	b.run(a, "delete asks first, then the endpoint is gone",
		click("#delete-webhook"), waitText("#delete-confirm", "cannot be undone"), click("#confirm-delete"),
		waitText("#flash", "deleted"), waitText("#webhooks tbody", "No webhooks yet"))
	mustCall(t, 200, "GET", acme+"/webhooks", nil)
	b.noErrors()
}

// TestWebhooksPageMarksADisabledEndpoint: an endpoint the projector disabled (here: held at a
// failing change past the feed's retention, which the projector has at 3 s) is marked in the
// list and on its page, with the reason in words and Replay offered to enable it; a replay
// from a malformed cursor is refused on that field.
func TestWebhooksPageMarksADisabledEndpoint(t *testing.T) {
	rcv := &receiver{}
	rcv.failing.Store(true)
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	in := newInstall(t, "SSO_WEBHOOKS_ALLOW_PRIVATE=true")
	in.start("command-api")
	in.start("projector", "SSO_EVENTS_RETENTION=3s")
	in.start("query-api")
	tenants := in.url("command-api") + "/v1/systems/demo/tenants"
	mustCall(t, 201, "POST", tenants, map[string]any{"tenant_id": "acme"})
	acme := tenants + "/acme"
	mustCall(t, 201, "POST", acme+"/webhooks", map[string]any{"url": srv.URL + "/down", "description": "ticketing"})
	mustCall(t, 201, "POST", acme+"/users", map[string]any{"username": "ann"})

	b := newBrowser(t)
	a := b.ctx
	b.run(a, "the list marks the endpoint disabled, with why",
		chromedp.Navigate(consoleURL(t, in)), waitFor("#users tbody tr"), click(`#nav a[href$="/webhooks"]`),
		refreshUntil("#webhooks", "#webhooks-refresh", "Disabled", "no longer kept"), waitFor("#webhooks tbody tr.disabled"))
	b.run(a, "its page says it is disabled, since when, why and what to do",
		click("#webhooks tbody a"), waitText("#webhook-state", "Disabled: nothing is sent"),
		waitText("#webhook-state", "no longer kept"), waitText("#webhook-state", "Replay from a recent cursor"), waitNoText("main", "null"),
		waitText("#replay-webhook", "Replay and enable"))
	b.run(a, "a replay from a malformed cursor is refused on its field",
		click("#replay-webhook"), setValue("#replay-after", "not-a-cursor"), click("#confirm-replay"),
		waitFor(`#replay-after[aria-invalid="true"]`), waitText("#webhook-state", "Disabled"))
	b.noErrors()
}
