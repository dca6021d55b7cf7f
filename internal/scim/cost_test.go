package scim_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/scim"
)

// TestCursorPagesCostTheirPage: a cursor page of an unfiltered list reads one page of
// lookups and the users on it, the last page no more than the first; users created during
// the walk shift nothing (no user that existed is repeated or skipped); a cursor is good
// only for its own tenant and query.
func TestCursorPagesCostTheirPage(t *testing.T) {
	s := newService(t)
	const n, per = 24, 5
	var all []string
	for i := range n {
		all = append(all, s.createUser(fmt.Sprintf("c%02d", i), fmt.Sprintf("c%02d@example.com", i)))
	}
	slices.Sort(all)
	var costs []int
	seen := map[string]int{}
	cursor := ""
	for page := 0; ; page++ {
		calls, items := s.db.snapshot()
		m := s.scim("GET", fmt.Sprintf("/Users?count=%d&cursor=%s", per, cursor), "").want(t, 200).obj(t)
		_, read := s.db.since(calls, items)
		costs = append(costs, read)
		if _, ok := m["totalResults"]; ok {
			t.Errorf("a cursor page of an unfiltered list says totalResults %v, which it cannot know without reading the tenant", m["totalResults"])
		}
		for _, r := range m["Resources"].([]any) {
			seen[r.(map[string]any)["id"].(string)]++
		}
		// Users created during the walk fall into their places by id.
		s.createUser(fmt.Sprintf("new%02d", page), fmt.Sprintf("new%02d@example.com", page))
		next, ok := m["nextCursor"].(string)
		if !ok {
			break
		}
		if page == 2 {
			other := newService(t)
			other.scim("GET", fmt.Sprintf("/Users?count=%d&cursor=%s", per, next), "").wantError(t, 400, "invalidCursor")
			s.scim("GET", "/Groups?count=5&cursor="+next, "").wantError(t, 400, "invalidCursor")
		}
		cursor = next
	}
	for _, id := range all {
		if seen[id] != 1 {
			t.Errorf("user %s seen %d times in the walk", id, seen[id])
		}
	}
	for id, times := range seen {
		if times != 1 {
			t.Errorf("user %s seen %d times", id, times)
		}
	}
	first, last := costs[0], costs[len(costs)-2] // the last full page
	if first > 2*per+2 || last > first {
		t.Errorf("items read per page %v: a page of %d should read about %d (its lookups and users), the later ones no more than the first", costs, per, 2*per+1)
	}
}

// TestIfNoneMatch: a GET with the resource's current ETag in If-None-Match is 304, as
// ServiceProviderConfig's etag.supported promises; another version gets the resource.
func TestIfNoneMatch(t *testing.T) {
	s := newService(t)
	id := s.createUser("etag", "etag@example.com")
	r := s.scim("GET", "/Users/"+id, "").want(t, 200)
	tag := r.header.Get("ETag")
	if tag != `W/"1"` {
		t.Fatalf("ETag %q", tag)
	}
	if got := s.scim("GET", "/Users/"+id, "", "If-None-Match", tag); got.status != 304 || len(got.body) != 0 {
		t.Errorf("If-None-Match the current version: %s, want 304", got)
	}
	s.scim("GET", "/Users/"+id, "", "If-None-Match", `W/"7", "1"`).want(t, 304)
	s.scim("GET", "/Users/"+id, "", "If-None-Match", `W/"2"`).want(t, 200)
	g := s.scim("POST", "/Groups", `{"displayName":"Tagged"}`).want(t, 201)
	gid := g.obj(t)["id"].(string)
	s.scim("GET", "/Groups/"+gid, "", "If-None-Match", g.header.Get("ETag")).want(t, 304)
	s.scim("GET", "/Groups/"+gid, "", "If-None-Match", `W/"9"`).want(t, 200)
	sp := s.scim("GET", "/ServiceProviderConfig", "").want(t, 200).obj(t)
	if sp["etag"].(map[string]any)["supported"] != true {
		t.Errorf("etag %v", sp["etag"])
	}
}

// TestAFilterThatScansIsBounded: a filter the lookups cannot answer reads at most the
// limit's users, keeps only its page (by index with totalResults, or by cursor), and past
// the limit answers 400 tooMany.
func TestAFilterThatScansIsBounded(t *testing.T) {
	s := newServiceWith(t, scim.Limits{FilterScan: 12, InlineMembers: 3})
	var made []string
	for i := range 10 {
		made = append(made, s.createUser(fmt.Sprintf("s%02d", i), fmt.Sprintf("s%02d@example.com", i)))
	}
	slices.Sort(made)
	active := "/Users?filter=" + q(`active eq true`)
	got, total := ids(t, s.scim("GET", active+"&startIndex=4&count=3", "").want(t, 200))
	if total != 10 || !slices.Equal(got, made[3:6]) {
		t.Errorf("index page: %v of %v, want %v of 10", got, total, made[3:6])
	}
	var walked []string
	cursor := ""
	for range 10 {
		m := s.scim("GET", active+"&count=4&cursor="+cursor, "").want(t, 200).obj(t)
		for _, r := range m["Resources"].([]any) {
			walked = append(walked, r.(map[string]any)["id"].(string))
		}
		next, ok := m["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if !slices.Equal(walked, made) {
		t.Errorf("cursor walk %v, want %v", walked, made)
	}
	for i := 10; i < 13; i++ {
		s.createUser(fmt.Sprintf("s%02d", i), fmt.Sprintf("s%02d@example.com", i))
	}
	calls, items := s.db.snapshot()
	s.scim("GET", active, "").wantError(t, 400, "tooMany")
	if _, read := s.db.since(calls, items); read > 12+12+1 {
		t.Errorf("the refused filter read %d items, want at most the limit's lookups and users", read)
	}
	// A filter the lookups answer is not bounded by it.
	s.scim("GET", "/Users?filter="+q(`userName eq "s12"`), "").want(t, 200)

	// Members: a group is inlined with its members only while they fit the answer's
	// budget; excludedAttributes=members leaves them out of every group.
	small := s.scim("POST", "/Groups", jsonBody(map[string]any{"displayName": "Small", "members": []any{map[string]any{"value": made[0]}}})).want(t, 201).obj(t)
	if ms, ok := small["members"].([]any); !ok || len(ms) != 1 {
		t.Errorf("a small group's members: %v", small["members"])
	}
	var four []any
	for _, id := range made[:4] {
		four = append(four, map[string]any{"value": id})
	}
	big := s.scim("POST", "/Groups", jsonBody(map[string]any{"displayName": "Big", "members": four})).want(t, 201).obj(t)
	if _, ok := big["members"]; ok {
		t.Errorf("a group of 4 members answered with them past a budget of 3: %v", big["members"])
	}
	for _, path := range []string{"/Groups", "/Groups?cursor=", "/Groups?filter=" + q(`displayName sw "B"`)} {
		for _, r := range s.scim("GET", path, "").want(t, 200).obj(t)["Resources"].([]any) {
			g := r.(map[string]any)
			if _, has := g["members"]; has != (g["displayName"] == "Small") {
				t.Errorf("GET %s: group %v with members %v", path, g["displayName"], g["members"])
			}
		}
		for _, r := range s.scim("GET", path+sep(path)+"excludedAttributes=members", "").want(t, 200).obj(t)["Resources"].([]any) {
			if _, has := r.(map[string]any)["members"]; has {
				t.Errorf("GET %s with excludedAttributes=members: %v", path, r)
			}
		}
	}
}

func sep(path string) string {
	if strings.Contains(path, "?") {
		return "&"
	}
	return "?"
}
