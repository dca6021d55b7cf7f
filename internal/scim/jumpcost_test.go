package scim_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/scim"
)

// seedUsers writes n users named prefix0000… straight into the tenant's command table, as
// a tenant from before the SCIM port's counts has them: each user's config item and its
// lookups, no count.
func (s *service) seedUsers(t *testing.T, prefix string, n int) {
	t.Helper()
	at := time.Now().UTC().Truncate(time.Millisecond)
	var reqs []types.WriteRequest
	for i := range n {
		name := fmt.Sprintf("%s%05d", prefix, i)
		u := events.User{ID: uuid.NewString(), Username: name, Email: name + "@example.com", IsActive: true,
			Version: 1, CreatedAt: at, UpdatedAt: at}
		it, err := dynamo.UserConfigItem(u, "", false)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
		for _, l := range commands.UserLookups(u) {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: dynamo.LookupItem(l)}})
		}
	}
	var g errgroup.Group
	g.SetLimit(8)
	for chunk := range slices.Chunk(reqs, 25) {
		g.Go(func() error { return dynamo.BatchWrite(t.Context(), s.dynamo, s.commandsTable(), chunk) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// order is the ids of the tenant's users (path "/Users") or groups ("/Groups"), in the
// order of their ids, by a cursor walk.
func (s *service) order(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for cursor := ""; ; {
		m := s.scim("GET", path+"?count=500&attributes=id&cursor="+cursor, "").want(t, 200).obj(t)
		for _, r := range m["Resources"].([]any) {
			out = append(out, r.(map[string]any)["id"].(string))
		}
		next, ok := m["nextCursor"].(string)
		if !ok {
			return out
		}
		cursor = next
	}
}

// jump is the ids of an index page of path at start (of count), from the SCIM base base,
// its totalResults, and the items DynamoDB returned to serve it.
func (s *service) jump(t *testing.T, base, path string, start, count int) (ids []string, total, read int) {
	t.Helper()
	calls, items := s.db.snapshot()
	m := s.do(s.token, "GET", fmt.Sprintf("%s%s?startIndex=%d&count=%d&attributes=id", base, path, start, count), "").want(t, 200).obj(t)
	_, read = s.db.since(calls, items)
	for _, r := range m["Resources"].([]any) {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	n, _ := m["totalResults"].(float64)
	return ids, int(n), read
}

// TestAJumpCostsItsPage: an index page no walk led to (Okta jumps by startIndex, another
// process has no bookmark) reads the tenant's block counts, the lookups from the start
// of the block the page starts in and its users: near the end of a tenant of thousands
// as at its start, whatever the startIndex; and it is the page a walk by id finds. Only
// the tenant's first jump, whose blocks have no base yet, reads every lookup, once.
func TestAJumpCostsItsPage(t *testing.T) {
	// Its 4,000 users' stream records would slow the later tests' tables on the package's
	// DynamoDB Local (trap 1).
	s := newServiceOn(t, dynamotest.Private(t), scim.Limits{})
	const seeded, per = 4000, 100
	s.seedUsers(t, "jc", seeded)
	s.createUsers(t, "jcn", 16) // counted by the shards, not by a base
	order := s.order(t, "/Users")
	if len(order) != seeded+16 {
		t.Fatalf("%d users, want %d", len(order), seeded+16)
	}
	// The first jump counts the lookups by block, once, and writes the blocks' base.
	got, total, _ := s.jump(t, s.base, "/Users", 2001, 10)
	if !slices.Equal(got, order[2000:2010]) || total != len(order) {
		t.Fatalf("the first jump to 2001: %v of %d, want %v of %d", got, total, order[2000:2010], len(order))
	}
	// Changes after the base move the blocks' counts in the shards.
	for _, id := range []string{order[0], order[1500], order[len(order)-1]} {
		s.scim("DELETE", "/Users/"+id, "").want(t, 204)
	}
	s.createUsers(t, "jcm", 9)
	order = s.order(t, "/Users")

	other := strings.Replace(s.base, s.url, s.other, 1)
	// Jumps no page led to (no start is another's start+count), by either process.
	for i, start := range []int{len(order) - per - 2, 3, len(order)/2 + 3, len(order) - 2*per + 7, len(order) - 4} {
		base := []string{s.base, other}[i%2]
		got, total, read := s.jump(t, base, "/Users", start, per)
		want := order[start-1 : min(start-1+per, len(order))]
		if !slices.Equal(got, want) || total != len(order) {
			t.Errorf("the jump to %d: %d users of %d, want users %d to %d of %d", start, len(got), total, start, start+len(want)-1, len(order))
		}
		// The block counts (18 items: the shards, the count's base, the blocks' base), the
		// lookups of the page and of its block before it (a block of this tenant holds a
		// handful: 4,000 ids over 4,096 blocks), the page's users, the token's row.
		t.Logf("the jump to %d of %d (count %d) read %d items", start, len(order), per, read)
		if limit := 18 + 12 + 2*len(want) + 1; read > limit {
			t.Errorf("the jump to %d of %d read %d items, want at most %d", start, len(order), read, limit)
		}
	}
	// Past the end: no users, and the total.
	if got, total, _ := s.jump(t, s.base, "/Users", len(order)+5, 5); len(got) != 0 || total != len(order) {
		t.Errorf("past the end: %v of %d, want none of %d", got, total, len(order))
	}
}

// TestJumpCountsUnderConcurrentWrites: the blocks' counts stay right while users are
// created and deleted at once, by many clients (the counts' shards meet in transactions),
// and a base written while groups are being created is right or not written: afterwards
// every jump is the page of the ordered list, and says its total.
func TestJumpCountsUnderConcurrentWrites(t *testing.T) {
	s := newService(t)
	s.createUsers(t, "cw", 60)
	before := s.order(t, "/Users")
	s.jump(t, s.base, "/Users", 5, 3) // the users' blocks get their base

	var g errgroup.Group
	for w := range 4 {
		g.Go(func() error {
			s.createUsers(t, fmt.Sprintf("cw%d-", w), 40)
			return nil
		})
	}
	g.Go(func() error {
		for _, id := range before[:30] {
			if err := s.likeAClient("DELETE", "/Users/"+id, ""); err != nil {
				return err
			}
		}
		return nil
	})
	var groups sync.WaitGroup
	for w := range 4 {
		groups.Add(1)
		g.Go(func() error {
			defer groups.Done()
			for i := range 25 {
				if err := s.likeAClient("POST", "/Groups", fmt.Sprintf(`{"displayName":"cw group %d-%d"}`, w, i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	// Jumps meanwhile: the groups' first counts their lookups while they are being made.
	g.Go(func() error {
		for k := 1; k <= 15; k++ {
			// Starts 7k+1 of 6 leave bookmarks at 7(k+1), which the checks below avoid.
			for _, path := range []string{"/Users", "/Groups"} {
				if r := s.scim("GET", fmt.Sprintf("%s?startIndex=%d&count=6", path, 7*k+1), ""); r.status != 200 {
					return fmt.Errorf("jump: %v", r)
				}
			}
		}
		groups.Wait()
		return nil
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{"/Users", "/Groups"} {
		order := s.order(t, path)
		want := map[string]int{"/Users": 60 + 4*40 - 30, "/Groups": 100}[path]
		if len(order) != want {
			t.Fatalf("%s: %d, want %d", path, len(order), want)
		}
		for start := 2; start <= len(order)+7; start += 7 {
			got, total, _ := s.jump(t, s.base, path, start, 5)
			w := order[min(start-1, len(order)):min(start-1+5, len(order))]
			if !slices.Equal(got, w) || total != len(order) {
				t.Errorf("%s: the jump to %d: %v of %d, want %v of %d", path, start, got, total, w, len(order))
			}
		}
	}
}
