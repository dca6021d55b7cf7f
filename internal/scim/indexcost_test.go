package scim_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/scim"
)

// createUsers creates n users named prefix0000… through SCIM, by 8 clients at once.
// likeAClient sends a write as an identity provider's SCIM client does (Okta, Entra ID): a
// 503 is sent again after its Retry-After, and after a 503 a 409 (a POST) or a 404 (a
// DELETE) says that the earlier attempt landed. The tests that write from many goroutines
// at once use it: on a loaded machine the command path may answer 503 (a DynamoDB call past
// its deadline), which the contract allows and every client retries.
func (s *service) likeAClient(method, path, body string) error {
	landed := map[string]int{"POST": http.StatusConflict, "DELETE": http.StatusNotFound}[method]
	want := map[string]int{"POST": http.StatusCreated, "DELETE": http.StatusNoContent}[method]
	unavailable := false
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest(method, s.base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.token)
		if body != "" {
			req.Header.Set("Content-Type", scim.MediaType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		switch {
		case res.StatusCode == want, unavailable && res.StatusCode == landed:
			return nil
		case res.StatusCode == http.StatusServiceUnavailable && attempt < 6:
			unavailable = true
			wait, _ := strconv.Atoi(res.Header.Get("Retry-After"))
			time.Sleep(time.Duration(min(max(wait, 1), 5)) * time.Second)
		default:
			return fmt.Errorf("%s %s: %d", method, path, res.StatusCode)
		}
	}
}

func (s *service) createUsers(t *testing.T, prefix string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("%s%04d", prefix, i)
				body := jsonBody(map[string]any{"schemas": []string{scim.URNUser}, "userName": name,
					"emails": []any{map[string]any{"value": name + "@example.com", "primary": true}}})
				err := s.likeAClient("POST", "/Users", body)
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestIndexPagesCostTheirPage: Okta pages GET /Users by startIndex. A walk of a large
// tenant by 100 reads about its page's items on every page — the last no more than the
// first — and its first page reads the tenant's count of live users, not the users (only a
// tenant's very first index list counts them, once); every page says the walk's
// totalResults. Users created during the walk shift nothing: no user that existed is
// repeated or skipped. A page the walk did not lead to (a jump) is still right.
func TestIndexPagesCostTheirPage(t *testing.T) {
	// Its 1,000 users' stream records would slow the later tests' tables on the package's
	// DynamoDB Local (trap 1).
	s := newServiceOn(t, dynamotest.Private(t), scim.Limits{})
	const n, per = 1000, 100
	s.createUsers(t, "ix", n)
	// The tenant's users in id order, by cursor.
	var order []string
	for cursor := ""; ; {
		m := s.scim("GET", "/Users?count=500&cursor="+cursor, "").want(t, 200).obj(t)
		for _, r := range m["Resources"].([]any) {
			order = append(order, r.(map[string]any)["id"].(string))
		}
		next, ok := m["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if len(order) != n || !slices.IsSorted(order) {
		t.Fatalf("the cursor walk found %d users (sorted: %v), want %d", len(order), slices.IsSorted(order), n)
	}

	// The users came before any index list: the tenant's count of live users has no base
	// yet, and the first index list counts their lookups once, which writes it.
	counted := s.db.countedSoFar()
	if m := s.scim("GET", "/Users?startIndex=1&count=1", "").want(t, 200).obj(t); m["totalResults"] != float64(n) {
		t.Fatalf("the first index list says totalResults %v, want %d", m["totalResults"], n)
	}
	if got := s.db.countedSoFar() - counted; got < n {
		t.Errorf("the first index list counted %d lookups, want the tenant's %d (once)", got, n)
	}

	var costs, countedPerPage []int
	seen := map[string]int{}
	for start, page := 1, 0; ; start, page = start+per, page+1 {
		calls, items := s.db.snapshot()
		counted := s.db.countedSoFar()
		m := s.scim("GET", fmt.Sprintf("/Users?startIndex=%d&count=%d", start, per), "").want(t, 200).obj(t)
		_, read := s.db.since(calls, items)
		costs, countedPerPage = append(costs, read), append(countedPerPage, s.db.countedSoFar()-counted)
		if m["totalResults"] != float64(n) || m["startIndex"] != float64(start) {
			t.Fatalf("page at %d: totalResults %v, startIndex %v; want the walk's %d", start, m["totalResults"], m["startIndex"], n)
		}
		res := m["Resources"].([]any)
		for _, r := range res {
			seen[r.(map[string]any)["id"].(string)]++
		}
		// Users created during the walk fall into their places by id, and change nothing
		// of it.
		s.createUsers(t, fmt.Sprintf("new%02d-", page), 1)
		if len(res) < per {
			break
		}
	}
	for _, id := range order {
		if seen[id] != 1 {
			t.Errorf("user %s seen %d times in the walk", id, seen[id])
		}
	}
	first, last := costs[0], costs[len(costs)-2] // the last full page
	for i, c := range costs {
		limit := 2*per + 1
		if i == 0 {
			limit += 17 // the count's items
		}
		if c > limit {
			t.Errorf("page %d read %d items, want at most %d (its lookups, its users, the token, on the first the count)", i+1, c, limit)
		}
	}
	if last > first {
		t.Errorf("items read per page %v: the last full page read more than the first", costs)
	}
	for i, c := range countedPerPage {
		if c != 0 {
			t.Errorf("page %d counted the users (%d read), want the count read instead", i+1, c)
		}
	}

	// A jump: a startIndex no page led to reads its way there, and is right.
	m := s.scim("GET", "/Users?startIndex=251&count=5&attributes=userName", "").want(t, 200).obj(t)
	var got []string
	for _, r := range m["Resources"].([]any) {
		got = append(got, r.(map[string]any)["id"].(string))
	}
	// The users created during the walk have ids anywhere: the jump's page is the 251st
	// to 255th of the tenant as it is now.
	var now []string
	for cursor := ""; ; {
		m := s.scim("GET", "/Users?count=500&attributes=userName&cursor="+cursor, "").want(t, 200).obj(t)
		for _, r := range m["Resources"].([]any) {
			now = append(now, r.(map[string]any)["id"].(string))
		}
		next, ok := m["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, now[250:255]) || m["totalResults"] != float64(len(now)) {
		t.Errorf("the jump to 251: %v of %v, want %v of %d", got, m["totalResults"], now[250:255], len(now))
	}
	// Past the end: no users, and the total.
	m = s.scim("GET", fmt.Sprintf("/Users?startIndex=%d&count=5", len(now)+3), "").want(t, 200).obj(t)
	if len(m["Resources"].([]any)) != 0 || m["totalResults"] != float64(len(now)) {
		t.Errorf("past the end: %v", m)
	}
}
