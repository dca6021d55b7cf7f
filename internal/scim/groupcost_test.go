package scim_test

import (
	"fmt"
	"testing"

	"github.com/ssodir/ssodir/internal/scim"
)

// TestAGroupReadsNoMoreMembersThanItAnswers: GET /Groups/{id} reads a group's members only
// when it answers with them: none with excludedAttributes=members, and for a group past
// the answer's member budget no more than the budget (and one) before leaving them out.
// A list of such groups costs the budget, not the groups' sizes.
func TestAGroupReadsNoMoreMembersThanItAnswers(t *testing.T) {
	const budget, size = 5, 30
	s := newServiceWith(t, scim.Limits{InlineMembers: budget})
	var members []any
	for i := range size {
		members = append(members, map[string]any{"value": s.createUser(fmt.Sprintf("m%02d", i), fmt.Sprintf("m%02d@example.com", i))})
	}
	big := s.scim("POST", "/Groups", jsonBody(map[string]any{"displayName": "Big"})).want(t, 201).obj(t)["id"].(string)
	for i := 0; i < size; i += 10 {
		s.scim("PATCH", "/Groups/"+big, jsonBody(map[string]any{"schemas": []string{"urn:ietf:params:scim:api:messages:2.0:PatchOp"},
			"Operations": []any{map[string]any{"op": "add", "path": "members", "value": members[i : i+10]}}})).want(t, 204)
	}
	small := s.scim("POST", "/Groups", jsonBody(map[string]any{"displayName": "Small", "members": members[:2]})).want(t, 201).obj(t)["id"].(string)

	// The token's row, the id lookup and the group: what any GET of a group reads.
	const fixed = 3
	cost := func(path string) (map[string]any, int) {
		calls, items := s.db.snapshot()
		m := s.scim("GET", path, "").want(t, 200).obj(t)
		_, read := s.db.since(calls, items)
		return m, read
	}
	if m, read := cost("/Groups/" + big + "?excludedAttributes=members"); read > fixed {
		t.Errorf("GET a group of %d with excludedAttributes=members read %d items, want at most %d (no member)", size, read, fixed)
	} else if _, has := m["members"]; has {
		t.Errorf("excludedAttributes=members answered members")
	}
	if m, read := cost("/Groups/" + big); read > fixed+budget+1 {
		t.Errorf("GET a group of %d past a member budget of %d read %d items, want at most %d", size, budget, read, fixed+budget+1)
	} else if _, has := m["members"]; has {
		t.Errorf("a group past the member budget answered with its members")
	}
	if m, read := cost("/Groups/" + small); read > fixed+2+1 {
		t.Errorf("GET a group of 2 read %d items", read)
	} else if ms, _ := m["members"].([]any); len(ms) != 2 {
		t.Errorf("a group within the budget answered members %v", m["members"])
	}
	// A page of both groups: the big one costs at most what is left of the budget, and one;
	// an index page also the count of groups (17 items at most; the tenant's first list
	// makes it, once, beforehand).
	s.total(t, "/Groups")
	for path, count := range map[string]int{"/Groups": 17, "/Groups?cursor=": 0} {
		m, read := cost(path)
		if len(m["Resources"].([]any)) != 2 || read > 1+2+2+2+(budget+1)+count {
			t.Errorf("GET %s: %d groups for %d items read", path, len(m["Resources"].([]any)), read)
		}
	}
}
