package scim_test

import (
	"fmt"
	"slices"
	"testing"
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
	sp := s.scim("GET", "/ServiceProviderConfig", "").want(t, 200).obj(t)
	if sp["etag"].(map[string]any)["supported"] != true {
		t.Errorf("etag %v", sp["etag"])
	}
}
