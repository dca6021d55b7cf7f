package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
)

// Webhooks end to end (API.md "Changes out"): endpoints registered through the command API
// are httptest servers on loopback (SSO_WEBHOOKS_ALLOW_PRIVATE=true on the command API and
// the projector), and every request they get is checked against the command log and
// verified with the Standard Webhooks algorithm written here, not the project's signer.

// allowPrivate lets the webhooks reach the test's loopback endpoints.
const allowPrivate = "SSO_WEBHOOKS_ALLOW_PRIVATE=true"

// hookRequest is one request an endpoint got.
type hookRequest struct {
	header http.Header
	body   []byte
	at     time.Time
	// accepted: the endpoint answered 2xx (a failed or hung request is not a delivery).
	accepted bool
}

// hookEndpoint is a webhook endpoint: a local server whose misbehave says, for its n-th
// request (from 1), whether it fails it (having answered or hung as it likes) rather
// than answering 200.
type hookEndpoint struct {
	name      string
	srv       *httptest.Server
	misbehave func(n int64, w http.ResponseWriter, r *http.Request) bool
	requests  atomic.Int64
	// id and secret are the webhook's, as the command API answered its registration.
	id, secret string

	mu  sync.Mutex
	got []hookRequest
}

func newHookEndpoint(t *testing.T, name string, misbehave func(n int64, w http.ResponseWriter, r *http.Request) bool) *hookEndpoint {
	t.Helper()
	h := &hookEndpoint{name: name, misbehave: misbehave}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(func() { h.srv.CloseClientConnections(); h.srv.Close() })
	return h
}

func (h *hookEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	n := h.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the deliverer went away mid-request (a kill): nothing was delivered
	}
	rec := hookRequest{header: r.Header.Clone(), body: body, at: time.Now()}
	if h.misbehave == nil || !h.misbehave(n, w, r) {
		w.WriteHeader(http.StatusOK)
		rec.accepted = true
	}
	h.mu.Lock()
	h.got = append(h.got, rec)
	h.mu.Unlock()
}

func (h *hookEndpoint) snapshot() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

// delivered is how many distinct changes the endpoint accepted.
func (h *hookEndpoint) delivered() int {
	ids := map[string]bool{}
	for _, g := range h.snapshot() {
		if g.accepted {
			ids[g.header.Get("webhook-id")] = true
		}
	}
	return len(ids)
}

// failFirst answers 503 to the first request and drops the connection of the second
// without an answer: an endpoint failing for a while.
func failFirst(n int64, w http.ResponseWriter, _ *http.Request) bool {
	switch n {
	case 1:
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	case 2:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				conn.Close()
				return true
			}
		}
		w.WriteHeader(http.StatusBadGateway)
		return true
	}
	return false
}

// hangFirst holds its first two requests open until the deliverer gives up on them (its
// 10 s timeout) or goes away: an endpoint hanging for a while.
func hangFirst(n int64, _ http.ResponseWriter, r *http.Request) bool {
	if n > 2 {
		return false
	}
	select {
	case <-r.Context().Done():
	case <-time.After(2 * time.Minute):
	}
	return true
}

// registerHook registers the endpoint for every change of the tenant through the command
// API and keeps its id and its secret (shown once).
func registerHook(t *testing.T, api *service, path string, h *hookEndpoint) {
	t.Helper()
	r := call(t, "POST", "http://"+api.addr+path+"/webhooks", map[string]any{"url": h.srv.URL + "/hook", "description": "e2e " + h.name})
	mustStatus(t, r, 201)
	var out struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
		State  string `json:"state"`
	}
	r.json(t, &out)
	if !strings.HasPrefix(out.Secret, "whsec_") || out.ID == "" || out.State != "active" {
		t.Fatalf("registration answered %s", r.body)
	}
	h.id, h.secret = out.ID, out.Secret
}

// verifySignature is the Standard Webhooks verification, written from the specification:
// the signed content is "{webhook-id}.{webhook-timestamp}.{body}", the key the base64
// part of the secret after "whsec_", decoded; webhook-signature holds space-separated
// "v1,<base64 HMAC-SHA256>" signatures, one of which must match; the timestamp must be
// within five minutes of receipt.
func verifySignature(secret string, h http.Header, body []byte, received time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return fmt.Errorf("the secret %q is not whsec_ and base64", secret)
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	if id == "" || ts == "" {
		return fmt.Errorf("no webhook-id or webhook-timestamp: %v", h)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", ts)
	}
	if d := received.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %s is %s from the request's receipt", ts, d)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(h.Get("webhook-signature")) {
		v, b64, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no signature of %q verifies", h.Get("webhook-signature"))
}

// checkHooks holds each endpoint's requests to the command log: every request signed as
// Standard Webhooks says, webhook-id the CloudEvent's id; every change of the log accepted
// (at least once), none that is not in it, each aggregate's in version order; and the
// deliveries listed by GET …/webhooks/{id}/deliveries name every change as delivered.
func checkHooks(t *testing.T, api *service, path string, want map[string]changefeed.Change, hooks ...*hookEndpoint) {
	t.Helper()
	for _, h := range hooks {
		last := map[string]int64{}
		accepted, duplicates := map[string]bool{}, 0
		for _, g := range h.snapshot() {
			if err := verifySignature(h.secret, g.header, g.body, g.at); err != nil {
				t.Errorf("%s: %v", h.name, err)
			}
			var ev feedEvent
			if err := json.Unmarshal(g.body, &ev); err != nil {
				t.Errorf("%s got a body that is no CloudEvent: %.300s", h.name, g.body)
				continue
			}
			if g.header.Get("webhook-id") != ev.ID || !strings.HasPrefix(g.header.Get("Content-Type"), "application/json") {
				t.Errorf("%s: webhook-id %q, Content-Type %q for change %s", h.name, g.header.Get("webhook-id"), g.header.Get("Content-Type"), ev.ID)
			}
			c, ok := want[ev.ID]
			switch {
			case !ok:
				t.Errorf("%s got change %s, which is in no history record: %.300s", h.name, ev.ID, g.body)
			case ev.Data.ID != c.Aggregate || ev.Data.Version != c.Version || ev.SpecVersion != "1.0" || ev.Source != path:
				t.Errorf("%s got change %s as %s v%d from %s, the log says %s v%d", h.name, ev.ID, ev.Data.ID, ev.Data.Version, ev.Source, c.Aggregate, c.Version)
			}
			if !g.accepted {
				continue
			}
			if ev.Data.Version < last[ev.Data.ID] {
				t.Errorf("%s got %s v%d after v%d", h.name, ev.Data.ID, ev.Data.Version, last[ev.Data.ID])
			}
			last[ev.Data.ID] = max(last[ev.Data.ID], ev.Data.Version)
			if accepted[ev.ID] {
				duplicates++
			}
			accepted[ev.ID] = true
		}
		for id, c := range want {
			if !accepted[id] {
				t.Errorf("%s never got change %s (%s v%d)", h.name, id, c.Aggregate, c.Version)
			}
		}
		t.Logf("%s: %d requests, %d changes, %d delivered again (at least once)", h.name, h.requests.Load(), len(accepted), duplicates)

		listed := deliveriesOf(t, api, path, h.id)
		for id := range want {
			if listed[id]["delivered"] == 0 {
				t.Errorf("%s: change %s is not listed as delivered", h.name, id)
			}
		}
		r := call(t, "GET", "http://"+api.addr+path+"/webhooks/"+h.id, nil)
		mustStatus(t, r, 200)
		var ep struct {
			State          string `json:"state"`
			FailedAttempts int    `json:"failed_attempts"`
		}
		r.json(t, &ep)
		if ep.State != "active" || ep.FailedAttempts != 0 {
			t.Errorf("%s ends as %s", h.name, r.body)
		}
	}
}

// deliveriesOf walks an endpoint's deliveries: for each change, its attempts by status.
func deliveriesOf(t *testing.T, api *service, path, id string) map[string]map[string]int {
	t.Helper()
	out := map[string]map[string]int{}
	after := ""
	for {
		u := "http://" + api.addr + path + "/webhooks/" + id + "/deliveries?limit=200"
		if after != "" {
			u += "&after=" + url.QueryEscape(after)
		}
		r := call(t, "GET", u, nil)
		mustStatus(t, r, 200)
		var page struct {
			Items []struct {
				EventID string `json:"event_id"`
				Status  string `json:"status"`
			} `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		r.json(t, &page)
		for _, d := range page.Items {
			if out[d.EventID] == nil {
				out[d.EventID] = map[string]int{}
			}
			out[d.EventID][d.Status]++
		}
		if page.NextCursor == "" || len(page.Items) == 0 {
			return out
		}
		after = page.NextCursor
	}
}

// failedAttempts counts the attempts listed as failed.
func failedAttempts(listed map[string]map[string]int) int {
	n := 0
	for _, by := range listed {
		n += by["failed"]
	}
	return n
}

// TestTheStandardWebhooksVerificationOfTheTestsIsTheSpecifications: the verification the
// end-to-end tests hold deliveries to accepts the Standard Webhooks specification's own
// example, and refuses it with another body, another secret, a signature of another
// version or a timestamp too old.
func TestTheStandardWebhooksVerificationOfTheTestsIsTheSpecifications(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	body := []byte(`{"test": 2432232314}`)
	at := time.Unix(1614265330, 0)
	header := func(sig string) http.Header {
		h := http.Header{}
		h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
		h.Set("webhook-timestamp", "1614265330")
		h.Set("webhook-signature", sig)
		return h
	}
	good := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	if err := verifySignature(secret, header("v1,bm90IGl0 "+good), body, at.Add(time.Minute)); err != nil {
		t.Errorf("the specification's example: %v", err)
	}
	for name, c := range map[string]struct {
		secret, sig string
		body        []byte
		at          time.Time
	}{
		"another body":        {secret, good, []byte(`{"test": 2432232315}`), at},
		"another secret":      {"whsec_" + base64.StdEncoding.EncodeToString([]byte("another key of the endpoint, 32 b")), good, body, at},
		"another version":     {secret, "v2," + strings.TrimPrefix(good, "v1,"), body, at},
		"an old timestamp":    {secret, good, body, at.Add(6 * time.Minute)},
		"a secret unprefixed": {strings.TrimPrefix(secret, "whsec_"), good, body, at},
	} {
		if err := verifySignature(c.secret, header(c.sig), c.body, c.at); err == nil {
			t.Errorf("%s verifies", name)
		}
	}
}
