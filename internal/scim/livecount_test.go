package scim_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// total is the totalResults of an index list of path ("/Users" or "/Groups"), and the
// items the COUNT Queries of the list read.
func (s *service) total(t *testing.T, path string) (total, counted int) {
	t.Helper()
	before := s.db.countedSoFar()
	m := s.scim("GET", path+"?startIndex=1&count=1", "").want(t, 200).obj(t)
	n, ok := m["totalResults"].(float64)
	if !ok {
		t.Fatalf("%s: no totalResults in %v", path, m)
	}
	return int(n), s.db.countedSoFar() - before
}

func (s *service) wantTotal(t *testing.T, path string, want int) {
	t.Helper()
	if got, counted := s.total(t, path); got != want || counted != 0 {
		t.Errorf("%s: totalResults %d (COUNT read %d lookups), want %d from the count alone", path, got, counted, want)
	}
}

func (s *service) commandsTable() string {
	tenant := tenantOf(s)
	return s.names.Commands(tenant.System, tenant.ID)
}

// TestTotalResultsReadTheCount: an index list's totalResults is the tenant's count of live
// users (groups), kept by the creates, deletes and erasures that write and remove their id
// lookups: a tenant's first index list counts the lookups once (it has users from before
// any list); from then on no list counts them, and the total follows every change. A tenant
// whose count lost its base counts once again, and has it again.
func TestTotalResultsReadTheCount(t *testing.T) {
	s := newService(t)
	var ids []string
	for i := range 4 {
		ids = append(ids, s.createUser(fmt.Sprintf("lc%d", i), fmt.Sprintf("lc%d@example.com", i)))
	}
	if got, counted := s.total(t, "/Users"); got != 4 || counted != 4 {
		t.Errorf("the first list: totalResults %d after counting %d lookups, want 4 and 4", got, counted)
	}
	s.wantTotal(t, "/Users", 4)
	s.createUser("lc4", "lc4@example.com")
	s.wantTotal(t, "/Users", 5)
	s.scim("DELETE", "/Users/"+ids[0], "").want(t, 204)
	s.wantTotal(t, "/Users", 4)
	// An update, a rename (PUT with a new userName) and a deactivation count nothing.
	s.scim("PATCH", "/Users/"+ids[1], `{"Operations":[{"op":"replace","value":{"active":false,"title":"x"}}]}`).want(t, 200)
	s.scim("PUT", "/Users/"+ids[2], `{"userName":"lc2-renamed","emails":[{"value":"lc2@example.com","primary":true}]}`).want(t, 200)
	s.wantTotal(t, "/Users", 4)
	// A deleted name made again is a new user.
	s.createUser("lc0", "lc0@example.com")
	s.wantTotal(t, "/Users", 5)
	// An erasure deletes the user as a delete does.
	tenant := tenantOf(s)
	s.do(adminToken, "POST", s.url+"/v1/systems/"+tenant.System+"/tenants/"+tenant.ID+"/users/lc3/erase",
		`{"reason":"a request under GDPR article 17"}`, "Content-Type", "application/json").want(t, 202)
	s.wantTotal(t, "/Users", 4)

	// Groups have their own count.
	if got, counted := s.total(t, "/Groups"); got != 0 || counted != 0 {
		t.Errorf("groups: totalResults %d (counted %d), want 0", got, counted)
	}
	g1 := s.scim("POST", "/Groups", `{"displayName":"Count One"}`).want(t, 201).obj(t)["id"].(string)
	s.scim("POST", "/Groups", `{"displayName":"Count Two"}`).want(t, 201)
	s.wantTotal(t, "/Groups", 2)
	s.scim("DELETE", "/Groups/"+g1, "").want(t, 204)
	s.wantTotal(t, "/Groups", 1)
	s.wantTotal(t, "/Users", 4)

	// Without its base (a tenant from before the count) the count is made again, once.
	_, err := s.dynamo.DeleteItem(context.Background(), &dynamodb.DeleteItemInput{TableName: aws.String(s.commandsTable()),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "live#user"}, "sk": &types.AttributeValueMemberS{Value: "base"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, counted := s.total(t, "/Users"); got != 4 || counted != 4 {
		t.Errorf("without a base: totalResults %d after counting %d lookups, want 4 and 4", got, counted)
	}
	s.wantTotal(t, "/Users", 4)
	s.createUser("lc5", "lc5@example.com")
	s.wantTotal(t, "/Users", 5)
}

// TestAnotherProcessContinuesAnIndexWalk: an index walk's bookmarks outlive the process
// that served its page: another process (another Lambda instance, without the first's
// memory) serves the next page at the cost of that page and the bookmark's one item, not
// by reading the lookups before it; and its own next page is continued by the first.
func TestAnotherProcessContinuesAnIndexWalk(t *testing.T) {
	s := newService(t)
	const n, per = 250, 100
	s.createUsers(t, "op", n)
	var order []string
	for cursor := ""; ; {
		m := s.scim("GET", "/Users?count=500&attributes=userName&cursor="+cursor, "").want(t, 200).obj(t)
		for _, r := range m["Resources"].([]any) {
			order = append(order, r.(map[string]any)["id"].(string))
		}
		next, ok := m["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if len(order) != n {
		t.Fatalf("%d users, want %d", len(order), n)
	}
	s.total(t, "/Users") // the tenant's first index list, which counts its users once
	other := strings.Replace(s.base, s.url, s.other, 1)
	bases := []string{s.base, other, s.base}
	for page, base := range bases {
		calls, items := s.db.snapshot()
		start := 1 + page*per
		m := s.do(s.token, "GET", fmt.Sprintf("%s/Users?startIndex=%d&count=%d&attributes=userName", base, start, per), "").want(t, 200).obj(t)
		gotCalls, read := s.db.since(calls, items)
		var got []string
		for _, r := range m["Resources"].([]any) {
			got = append(got, r.(map[string]any)["id"].(string))
		}
		want := order[start-1 : min(start-1+per, n)]
		if strings.Join(got, ",") != strings.Join(want, ",") || m["totalResults"] != float64(n) {
			t.Errorf("page %d: %d users (totalResults %v), want users %d to %d of %d", page+1, len(got), m["totalResults"], start, start+len(want)-1, n)
		}
		// Its lookups, its users, the token's row (this test's second process keeps no
		// token rows), the bookmark; the first page also the count (17 items).
		limit := 2*len(want) + 2
		if page == 0 {
			limit += 17
		}
		if read > limit {
			t.Errorf("page %d (process %d) read %d items in %v, want at most %d", page+1, page%2+1, read, gotCalls, limit)
		}
	}
}
