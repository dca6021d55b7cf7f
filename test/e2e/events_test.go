package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// feedEvent is what the test reads of a change-feed item.
type feedEvent struct {
	SpecVersion string `json:"specversion"`
	ID          string `json:"id"`
	Source      string `json:"source"`
	Type        string `json:"type"`
	Data        struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
	} `json:"data"`
	raw []byte
}

type feedPage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"next_cursor"`
}

// feedWalker walks GET /events with cursors, as a downstream consumer does.
type feedWalker struct {
	t      *testing.T
	url    string
	mu     sync.Mutex
	seen   []feedEvent
	cursor string
}

// page reads one page after the walker's cursor and keeps what it holds.
func (w *feedWalker) page(limit, wait int) int {
	w.t.Helper()
	q := url.Values{"limit": {fmt.Sprint(limit)}, "wait": {fmt.Sprint(wait)}}
	if w.cursor != "" {
		q.Set("after", w.cursor)
	}
	r := call(w.t, "GET", w.url+"?"+q.Encode(), nil)
	if r.status != 200 {
		w.t.Errorf("GET /events: %d %s", r.status, r.body)
		return 0
	}
	var p feedPage
	r.json(w.t, &p)
	if p.NextCursor == "" {
		w.t.Error("GET /events answered no next_cursor")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, raw := range p.Items {
		var ev feedEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			w.t.Errorf("feed item %s: %v", raw, err)
		}
		ev.raw = raw
		w.seen = append(w.seen, ev)
	}
	w.cursor = p.NextCursor
	return len(p.Items)
}

func (w *feedWalker) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// historyOf is the tenant's command log as the feed must give it: each history record's
// event id with its aggregate (immutable id) and version.
func historyOf(t *testing.T, e *env, system, tenant string) map[string]changefeed.Change {
	t.Helper()
	reg := events.NewRegistry()
	out := map[string]changefeed.Change{}
	for _, it := range scan(t, e.db, dynamo.Names{Prefix: e.prefix}.Commands(system, tenant)) {
		if !dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
			continue
		}
		env, err := dynamo.DecodeRecord(reg, it)
		if err != nil {
			t.Fatal(err)
		}
		c, err := changefeed.FromEnvelope(system, tenant, env)
		if err != nil {
			t.Fatal(err)
		}
		out[env.EventID] = c
	}
	return out
}

// TestChangeFeedWalkEqualsTheCommandLog: concurrent writers send hundreds of commands while a
// consumer walks GET /events with small pages, and the projector is killed (SIGKILL) and
// started again mid-way, two of them at once for a while (the lease moves). The walk equals
// the write model's histories exactly: every change once, each aggregate's changes in
// version order, no password anywhere. Meanwhile the projectors deliver the tenant's
// webhooks (webhooks_test.go) to three endpoints — a healthy one, one failing for a while,
// one hanging for a while — and each gets every change of the log, each aggregate's in
// version order, every request signed as Standard Webhooks says. Then: a cursor is bound
// to its tenant, `wait` holds an empty answer until a change comes, and a cursor past
// SSO_EVENTS_RETENTION is 410.
func TestChangeFeedWalkEqualsTheCommandLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := e.start("command-api", allowPrivate)
	query := e.start("query-api")
	path := provision(t, api, "feed", "t1")
	base := "http://" + api.addr + path
	lease := "SSO_STREAM_LEASE=3s"
	hooks := []*hookEndpoint{newHookEndpoint(t, "the healthy endpoint", nil), newHookEndpoint(t, "the failing endpoint", failFirst),
		newHookEndpoint(t, "the hanging endpoint", hangFirst)}
	for _, h := range hooks {
		registerHook(t, api, path, h)
	}

	w := &feedWalker{t: t, url: "http://" + query.addr + path + "/events"}
	stop, stopWalk := make(chan struct{}), make(chan struct{})
	walked := make(chan struct{})
	go func() {
		defer close(walked)
		for {
			select {
			case <-stopWalk:
				return
			default:
			}
			w.page(7, 1)
		}
	}()

	done := make(chan int64)
	go func() { done <- workload(t, base, 600, 37) }()
	// Renames too (users' and groups'): the aggregate's next change is recorded under
	// another partition.
	renamed := make(chan int)
	go func() {
		n := 0
		defer func() { renamed <- n }()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(150 * time.Millisecond):
			}
			r := call(t, "POST", fmt.Sprintf("%s/users/u%d/rename", base, (i*37)%120), map[string]any{"username": fmt.Sprintf("r%d", i)})
			if i%2 == 1 {
				// A group's too: its next change is recorded under its new name.
				r = call(t, "POST", fmt.Sprintf("%s/groups/%s/rename", base, escape(fmt.Sprintf("Group %d", (i*5)%12))),
					map[string]any{"name": fmt.Sprintf("Renamed %d", i)})
			}
			switch {
			case r.status >= 500:
				t.Errorf("rename answered %d: %s", r.status, r.body)
			case r.status == 200:
				n++
			}
		}
	}()
	projector := e.start("projector", lease, allowPrivate)
	var accepted int64
	for round := 0; accepted == 0; round++ {
		select {
		case accepted = <-done:
			continue
		case <-time.After(1500 * time.Millisecond):
		}
		projector.kill() // mid-batch: its records are delivered again to the next holder
		projector = e.start("projector", lease, allowPrivate)
		if round == 1 {
			second := e.start("projector", lease, allowPrivate)
			defer second.stop(t)
		}
	}
	close(stop)
	renames := <-renamed
	t.Logf("workload: %d commands accepted, %d renames", accepted, renames)
	if renames == 0 {
		t.Error("no rename was accepted: the test did not cover them")
	}
	want := historyOf(t, e, "feed", "t1")
	for deadline := time.Now().Add(2 * time.Minute); w.count() < len(want); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stopWalk)
			<-walked
			t.Fatalf("the walk reached %d of %d changes in 2 minutes; missing:\n%s", w.count(), len(want), missing(t, e, w.seen, want))
		}
	}
	close(stopWalk)
	<-walked

	checkWalk(t, "/v1/systems/feed/tenants/t1", w.seen, want)
	walkedAt := time.Now()
	for _, h := range hooks {
		// A projector killed mid-delivery holds the endpoint's lease until it runs out
		// (30 s); a failing endpoint waits 5 s, then 30 s, after its failures.
		eventually(t, 5*time.Minute, h.name+" to get every change", func() (bool, string) {
			return h.delivered() >= len(want), fmt.Sprintf("%d of %d changes", h.delivered(), len(want))
		})
	}
	t.Logf("the endpoints had every change %s after the walk", time.Since(walkedAt).Round(time.Second))
	checkHooks(t, api, path, want, hooks...)
	for _, h := range hooks[1:] {
		if h.requests.Load() <= int64(len(want)) {
			t.Errorf("%s was not retried: %d requests for %d changes", h.name, h.requests.Load(), len(want))
		}
	}
	if n := failedAttempts(deliveriesOf(t, api, path, hooks[1].id)); n == 0 {
		t.Errorf("%s's failed attempts are not listed", hooks[1].name)
	}
	if t.Failed() {
		return
	}

	t.Run("a cursor is bound to its tenant", func(t *testing.T) {
		other := provision(t, api, "feed", "t2")
		r := call(t, "GET", "http://"+query.addr+other+"/events?after="+url.QueryEscape(w.cursor), nil)
		if r.status != 400 || !bytes.Contains(r.body, []byte(`"validation_failed"`)) {
			t.Errorf("t1's cursor on t2: %d %s, want 400 validation_failed", r.status, r.body)
		}
		r = call(t, "GET", "http://"+query.addr+other+"/events?after=not-a-cursor", nil)
		if r.status != 400 {
			t.Errorf("a made-up cursor: %d %s, want 400", r.status, r.body)
		}
	})

	t.Run("wait holds an empty answer until a change comes", func(t *testing.T) {
		for w.page(50, 0) > 0 {
		}
		before := w.count()
		answered := make(chan int, 1)
		go func() { answered <- w.page(50, 20) }()
		time.Sleep(300 * time.Millisecond) // let the wait begin; a late start only makes the test easier
		r := call(t, "POST", base+"/users", map[string]any{"username": "late-comer", "email": "late@example.com"})
		mustStatus(t, r, 201)
		select {
		case n := <-answered:
			if n != 1 || w.seen[before].Type != "io.ssodir.user.created" {
				t.Errorf("the waiting read answered %d changes, want the user.created", n)
			}
		case <-time.After(time.Minute):
			t.Fatal("the waiting read never answered")
		}
	})

	t.Run("a cursor past the retention is 410", func(t *testing.T) {
		short := e.start("query-api", "SSO_EVENTS_RETENTION=2s")
		sw := &feedWalker{t: t, url: "http://" + short.addr + path + "/events"}
		for sw.page(500, 0) > 0 {
		}
		time.Sleep(3 * time.Second) // past the 2 s retention
		r := call(t, "GET", sw.url+"?after="+url.QueryEscape(sw.cursor), nil)
		if r.status != 410 || !bytes.Contains(r.body, []byte(`"cursor_expired"`)) {
			t.Errorf("an expired cursor: %d %s, want 410 cursor_expired", r.status, r.body)
		}
	})
}

// checkWalk compares a walk of the feed with the command log: every change once, each
// aggregate's in version order, the tenant's CloudEvents, no password.
func checkWalk(t *testing.T, source string, seen []feedEvent, want map[string]changefeed.Change) {
	t.Helper()
	last := map[string]int64{}
	ids := map[string]bool{}
	for _, ev := range seen {
		c, ok := want[ev.ID]
		switch {
		case ids[ev.ID]:
			t.Errorf("change %s walked twice", ev.ID)
		case !ok:
			t.Errorf("change %s is in no history record", ev.ID)
		case ev.Data.ID != c.Aggregate || ev.Data.Version != c.Version:
			t.Errorf("change %s is %s v%d, the log says %s v%d", ev.ID, ev.Data.ID, ev.Data.Version, c.Aggregate, c.Version)
		case ev.Data.Version <= last[ev.Data.ID]:
			t.Errorf("%s v%d walked after v%d", ev.Data.ID, ev.Data.Version, last[ev.Data.ID])
		}
		ids[ev.ID] = true
		last[ev.Data.ID] = max(last[ev.Data.ID], ev.Data.Version)
		if ev.SpecVersion != "1.0" || ev.Source != source || !strings.HasPrefix(ev.Type, "io.ssodir.") {
			t.Errorf("change %s is not the tenant's CloudEvent: %s", ev.ID, ev.raw)
		}
		if bytes.Contains(ev.raw, []byte("password")) {
			t.Errorf("change %s shows a password: %s", ev.ID, ev.raw)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("walked %d changes, the command log holds %d", len(seen), len(want))
	}
}

// walkAll walks a tenant's feed from its start to its end.
func walkAll(t *testing.T, url string) []feedEvent {
	t.Helper()
	w := &feedWalker{t: t, url: url}
	for w.page(100, 0) > 0 {
	}
	return w.seen
}

// missing describes the changes of want a walk did not see, and what the feed table holds
// of their aggregates.
func missing(t *testing.T, e *env, seen []feedEvent, want map[string]changefeed.Change) string {
	t.Helper()
	got := map[string]bool{}
	for _, ev := range seen {
		got[ev.ID] = true
	}
	items := scan(t, e.db, changefeed.TableName(dynamo.Names{Prefix: e.prefix}))
	var b strings.Builder
	for id, c := range want {
		if got[id] {
			continue
		}
		fmt.Fprintf(&b, "%s: %s v%d requires %d: %.300s\n", id, c.Aggregate, c.Version, c.Requires, c.Event)
		for _, it := range items {
			if dynamo.StringAttr(it, "aggregate") == c.Aggregate {
				fmt.Fprintf(&b, "  table: %s %s version %v\n", dynamo.StringAttr(it, "pk"), dynamo.StringAttr(it, "sk"), it["version"])
			}
		}
		for _, ev := range seen {
			if ev.Data.ID == c.Aggregate {
				fmt.Fprintf(&b, "  walked: %s v%d %s\n", ev.Type, ev.Data.Version, ev.ID)
			}
		}
	}
	return b.String()
}
