package e2e

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type userJSON struct {
	Username  string `json:"username"`
	Email     string `json:"email"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	IsActive  bool   `json:"is_active"`
	Version   int64  `json:"version"`
	UpdatedAt string `json:"updated_at"`
}

type page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func getPage[T any](t *testing.T, u string) page[T] {
	t.Helper()
	r := call(t, "GET", u, nil)
	if r.status != 200 {
		t.Fatalf("GET %s: %d %s", u, r.status, r.body)
	}
	var p page[T]
	r.json(t, &p)
	return p
}

// walk pages through a list with the given page size and returns every item.
func walk[T any](t *testing.T, u string, limit int, between func()) []T {
	t.Helper()
	var all []T
	sep := "?"
	if slices.Contains([]byte(u), '?') {
		sep = "&"
	}
	next := u + sep + "limit=" + strconv.Itoa(limit)
	for {
		p := getPage[T](t, next)
		all = append(all, p.Items...)
		if p.NextCursor == nil {
			return all
		}
		if between != nil {
			between()
		}
		next = u + sep + "limit=" + strconv.Itoa(limit) + "&cursor=" + url.QueryEscape(*p.NextCursor)
	}
}

// TestQueriesEndToEnd sends commands to the command API and reads them back through the
// projector and the query API: read-your-writes, every list and its order, pagination
// while writes go on, tenant isolation of cursors, activity feeds. It runs in both modes:
// the long-running services, and the Lambda functions (the APIs behind their HTTP API
// gateways, the projector fed by an ESM player over the tenant's stream).
func TestQueriesEndToEnd(t *testing.T) {
	t.Parallel()
	t.Run("long-running", func(t *testing.T) {
		e := newEnv(t)
		api := e.start("command-api")
		e.start("projector")
		q := e.start("query-api") // it finds the projector's feed in its heartbeat row
		queriesEndToEnd(t, api, q, nil)
	})
	t.Run("lambda", func(t *testing.T) {
		s := newLambdaStage(t)
		queriesEndToEnd(t, s.command, s.query, func(system, tenant string) { s.play(t, system, tenant) })
	})
}

// queriesEndToEnd is TestQueriesEndToEnd against the APIs api and q. play, in Lambda mode,
// starts the ESM of a tenant's stream (nil: a long-running projector follows the feeds,
// which the query API then follows too).
func queriesEndToEnd(t *testing.T, api, q *service, play func(system, tenant string)) {
	path := provision(t, api, "qe", "t1")
	other := provision(t, api, "qe", "t2")
	if play != nil {
		play("qe", "t1")
	}
	cmd, read := "http://"+api.addr+path, "http://"+q.addr+path

	names := [][2]string{{"ann", "Smith"}, {"bob", "smythe"}, {"cy", "Jones"}, {"dee", "SMITH"}, {"eve", "Brown"}}
	for _, n := range names {
		mustStatus(t, call(t, "POST", cmd+"/users", map[string]any{"username": n[0], "email": n[0] + "@Example.com",
			"first_name": "F" + n[0], "last_name": n[1]}), 201)
	}
	mustStatus(t, call(t, "POST", cmd+"/groups", map[string]any{"name": "Beta"}), 201)
	mustStatus(t, call(t, "POST", cmd+"/groups", map[string]any{"name": "alpha"}), 201)
	for _, m := range [][2]string{{"beta", "ann"}, {"alpha", "ann"}, {"beta", "cy"}} {
		mustStatus(t, call(t, "PUT", cmd+"/groups/"+m[0]+"/members/"+m[1], nil), 204)
	}
	r := call(t, "PATCH", cmd+"/users/eve", map[string]any{"last_name": "Smithers"})
	mustStatus(t, r, 200)
	etag := r.header.Get("ETag")

	// The projector picks a new tenant's stream up within a few seconds.
	eventually(t, 30*time.Second, "the new tenant to be projected", func() (bool, string) {
		r := call(t, "GET", read+"/users/ann", nil)
		return r.status == 200, fmt.Sprintf("%d %s", r.status, r.body)
	})
	// Read-your-writes: X-Min-Version waits for the projector.
	r = call(t, "GET", read+"/users/eve", nil, "X-Min-Version", "2")
	if r.status != 200 || r.header.Get("ETag") != etag {
		t.Fatalf("read-your-writes: %d ETag %s (want %s): %s", r.status, r.header.Get("ETag"), etag, r.body)
	}
	var eve userJSON
	r.json(t, &eve)
	if eve.LastName != "Smithers" || eve.Email != "eve@example.com" {
		t.Fatalf("eve: %+v", eve)
	}
	mustStatus(t, call(t, "GET", read+"/groups/BETA", nil, "X-Min-Version", "3"), 200)
	mustStatus(t, call(t, "GET", read+"/groups/alpha", nil, "X-Min-Version", "2"), 200)
	mustStatus(t, call(t, "DELETE", cmd+"/users/dee", nil), 204)
	mustStatus(t, call(t, "GET", read+"/users/dee", nil, "X-Min-Version", "2"), 404)
	if play == nil {
		// Those reads waited on the projector's progress feed, not on the table alone
		// (in Lambda mode there is no feed: they polled).
		metrics := string(call(t, "GET", "http://"+q.addr+"/metrics", nil).body)
		for _, want := range []string{"ssodir_projector_feeds_connected 1", "ssodir_min_version_refused_total 0"} {
			if !strings.Contains(metrics, want) {
				t.Errorf("the query API's metrics lack %q", want)
			}
		}
		if strings.Contains(metrics, "ssodir_projector_notices_total 0\n") || !strings.Contains(metrics, "ssodir_projector_notices_total ") {
			t.Error("the query API heard no notice from the projector's feed")
		}
	}

	usernames := func(us []userJSON) []string {
		var out []string
		for _, u := range us {
			out = append(out, u.Username)
		}
		return out
	}
	cases := []struct {
		name, query string
		want        []string
	}{
		{"email lookup is case-insensitive", "/users?email=ANN%40example.COM", []string{"ann"}},
		{"last-name prefix ignores case and orders by name then username", "/users?last_name_prefix=sm", []string{"ann", "eve", "bob"}},
		{"first-name prefix", "/users?first_name_prefix=fc", []string{"cy"}},
		{"username prefix ignores case and orders by username", "/users?username_prefix=B", []string{"bob"}},
		{"all users, newest first", "/users", []string{"eve", "cy", "bob", "ann"}},
		{"all users, oldest first", "/users?order=updated_asc", []string{"ann", "bob", "cy", "eve"}},
		{"a group's members as users, by username", "/groups/Beta/members", []string{"ann", "cy"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := usernames(walk[userJSON](t, read+c.query, 2, nil)); !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	var groups []struct {
		Name string `json:"name"`
	}
	groups = walk[struct {
		Name string `json:"name"`
	}](t, read+"/users/ann/groups", 1, nil)
	if len(groups) != 2 || groups[0].Name != "alpha" || groups[1].Name != "Beta" {
		t.Errorf("ann's groups by name: %+v", groups)
	}

	// Activity feeds: per entity, per actor, per day, newest first.
	type activity struct {
		Type    string `json:"type"`
		Entity  string `json:"entity"`
		Actor   string `json:"actor"`
		Version int64  `json:"version"`
	}
	acts := walk[activity](t, read+"/activity?entity=user:eve", 10, nil)
	if len(acts) != 2 || acts[0].Type != "user.updated" || acts[1].Type != "user.created" || acts[0].Actor != "bootstrap" {
		t.Errorf("eve's activity: %+v", acts)
	}
	if n := len(walk[activity](t, read+"/activity?actor=bootstrap", 50, nil)); n < 12 {
		t.Errorf("the bootstrap actor's feed has %d items", n)
	}
	if n := len(walk[activity](t, read+"/activity?day="+time.Now().UTC().Format("2006-01-02"), 50, nil)); n < 12 {
		t.Errorf("today's feed has %d items", n)
	}

	// Paging while writes go on: every user that exists unchanged for the whole walk is
	// seen exactly once.
	for i := 0; i < 30; i++ {
		mustStatus(t, call(t, "POST", cmd+"/users", map[string]any{"username": fmt.Sprintf("s%02d", i), "email": fmt.Sprintf("s%02d@example.com", i)}), 201)
	}
	mustStatus(t, call(t, "GET", read+"/users/s29", nil, "X-Min-Version", "1"), 200)
	var n atomic.Int64
	var wg sync.WaitGroup
	seen := map[string]int{}
	got := walk[userJSON](t, read+"/users?order=updated_asc", 4, func() {
		i := n.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(t, "POST", cmd+"/users", map[string]any{"username": fmt.Sprintf("w%02d", i)})
			call(t, "PATCH", cmd+"/users/cy", map[string]any{"first_name": fmt.Sprintf("Fcy%d", i)})
		}()
	})
	wg.Wait()
	for _, u := range got {
		seen[u.Username]++
	}
	for _, u := range append([]string{"ann", "bob", "eve"}, func() []string {
		var s []string
		for i := 0; i < 30; i++ {
			s = append(s, fmt.Sprintf("s%02d", i))
		}
		return s
	}()...) {
		if seen[u] != 1 {
			t.Errorf("%s seen %d times in a walk during writes", u, seen[u])
		}
	}

	// A cursor of one tenant's list does not open another tenant's.
	p := getPage[userJSON](t, read+"/users?limit=1")
	if p.NextCursor == nil {
		t.Fatal("no cursor")
	}
	r = call(t, "GET", "http://"+q.addr+other+"/users?limit=1&cursor="+url.QueryEscape(*p.NextCursor), nil)
	if r.status != 400 {
		t.Errorf("another tenant's cursor: %d %s", r.status, r.body)
	}
	r = call(t, "GET", read+"/users?last_name_prefix=s&limit=1&cursor="+url.QueryEscape(*p.NextCursor), nil)
	if r.status != 400 {
		t.Errorf("another list's cursor: %d %s", r.status, r.body)
	}
}
