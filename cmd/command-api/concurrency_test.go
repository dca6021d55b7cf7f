package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

const writers = 32

// concurrently sends n requests at once (released together) and returns their replies.
func concurrently(t *testing.T, n int, req func(i int) reply) []reply {
	t.Helper()
	replies := make([]reply, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			replies[i] = req(i)
		})
	}
	close(start)
	wg.Wait()
	return replies
}

// tally counts replies by "status code" (code empty for successes).
func tally(t *testing.T, replies []reply) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range replies {
		key := fmt.Sprint(r.status)
		if r.status >= 400 {
			var p problem
			r.decode(t, &p)
			key += " " + p.Code
		}
		out[key]++
	}
	return out
}

func wantTally(t *testing.T, got map[string]int, want map[string]int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("answers %v, want %v", got, want)
	}
}

// TestConcurrentWrites checks that uniqueness and optimistic concurrency hold when 32
// writers race for the same thing.
func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	a := startApp(t, testEnv(t))
	base := a.newTenant(t)

	t.Run("32 creates with the same email: exactly one is created", func(t *testing.T) {
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "POST", base+"/users", map[string]any{"username": fmt.Sprintf("same-email-%d", i), "email": fmt.Sprintf("Shared@%s", "example.com")})
		})
		wantTally(t, tally(t, replies), map[string]int{"201": 1, "409 email_taken": writers - 1})
		guards := 0
		for _, it := range a.items(t, a.commandsTable(base)) {
			if attrS(it, "id") == "email#shared@example.com" {
				guards++
			}
		}
		if guards != 1 {
			t.Errorf("%d guard items for the email", guards)
		}
	})

	t.Run("32 creates with the same username: exactly one is created", func(t *testing.T) {
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "POST", base+"/users", map[string]any{"username": "SameName", "email": fmt.Sprintf("same-name-%d@example.com", i)})
		})
		wantTally(t, tally(t, replies), map[string]int{"201": 1, "409 username_taken": writers - 1})
	})

	t.Run("32 creates of one group name in different cases: exactly one is created", func(t *testing.T) {
		names := []string{"Team", "team", "TEAM", "tEaM"}
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "POST", base+"/groups", map[string]any{"name": names[i%len(names)]})
		})
		wantTally(t, tally(t, replies), map[string]int{"201": 1, "409 group_exists": writers - 1})
	})

	t.Run("32 PATCHes with the same If-Match: exactly one is applied", func(t *testing.T) {
		a.do(t, "POST", base+"/users", map[string]any{"username": "target"}).want(t, http.StatusCreated)
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "PATCH", base+"/users/target", map[string]any{"first_name": fmt.Sprint("writer-", i)}, "If-Match", `"1"`)
		})
		wantTally(t, tally(t, replies), map[string]int{"200": 1, "412 version_mismatch": writers - 1})
		r := a.do(t, "PATCH", base+"/users/target", map[string]any{}).want(t, http.StatusOK)
		if r.etag() != 2 {
			t.Errorf("target is at version %d, want 2", r.etag())
		}
	})

	t.Run("32 users changing their email to the same address: exactly one gets it", func(t *testing.T) {
		for i := range writers {
			a.do(t, "POST", base+"/users", map[string]any{"username": fmt.Sprint("mover-", i), "email": fmt.Sprintf("mover-%d@example.com", i)}).
				want(t, http.StatusCreated)
		}
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "PATCH", base+fmt.Sprint("/users/mover-", i), map[string]any{"email": "Wanted@example.com"})
		})
		wantTally(t, tally(t, replies), map[string]int{"200": 1, "409 email_taken": writers - 1})
		owner, guards := "", 0
		for _, it := range a.items(t, a.commandsTable(base)) {
			switch attrS(it, "id") {
			case "email#wanted@example.com":
				guards++
				owner = attrS(it, "username")
			}
		}
		for i, r := range replies {
			if r.status == http.StatusOK && owner != fmt.Sprint("mover-", i) {
				t.Errorf("the guard names %q, but mover-%d won", owner, i)
			}
			// Every loser keeps its own email.
			if r.status != http.StatusOK {
				a.do(t, "POST", base+"/users", map[string]any{"username": fmt.Sprint("thief-", i), "email": fmt.Sprintf("mover-%d@example.com", i)}).
					wantProblem(t, http.StatusConflict, "email_taken")
			}
		}
		if guards != 1 {
			t.Errorf("%d guard items for the email", guards)
		}
	})

	t.Run("a create and an email change racing for one address: exactly one gets it", func(t *testing.T) {
		a.do(t, "POST", base+"/users", map[string]any{"username": "changer", "email": "changer@example.com"}).want(t, http.StatusCreated)
		replies := concurrently(t, writers, func(i int) reply {
			if i == 0 {
				return a.do(t, "PATCH", base+"/users/changer", map[string]any{"email": "contested@example.com"})
			}
			return a.do(t, "POST", base+"/users", map[string]any{"username": fmt.Sprint("creator-", i), "email": "contested@example.com"})
		})
		won := 0
		for _, r := range replies {
			switch r.status {
			case http.StatusOK, http.StatusCreated:
				won++
			case http.StatusConflict:
			default:
				t.Errorf("answer %s", r)
			}
		}
		if won != 1 {
			t.Errorf("%d writers got the address, want 1", won)
		}
	})

	t.Run("32 PUTs of members with the group's If-Match: exactly one is applied", func(t *testing.T) {
		a.do(t, "POST", base+"/groups", map[string]any{"name": "crowd"}).want(t, http.StatusCreated)
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "PUT", base+fmt.Sprint("/groups/crowd/members/mover-", i), nil, "If-Match", `"1"`)
		})
		wantTally(t, tally(t, replies), map[string]int{"204": 1, "412 version_mismatch": writers - 1})
	})

	t.Run("32 members changes with the group's If-Match: exactly one is applied", func(t *testing.T) {
		a.do(t, "POST", base+"/groups", map[string]any{"name": "bulk-crowd"}).want(t, http.StatusCreated)
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "POST", base+"/groups/bulk-crowd/members", map[string]any{"add": []string{fmt.Sprint("mover-", i)}}, "If-Match", `"1"`)
		})
		wantTally(t, tally(t, replies), map[string]int{"200": 1, "412 version_mismatch": writers - 1})
	})

	t.Run("32 members changes without If-Match all land, one version each", func(t *testing.T) {
		a.do(t, "POST", base+"/groups", map[string]any{"name": "bulk-open"}).want(t, http.StatusCreated)
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "POST", base+"/groups/bulk-open/members", map[string]any{
				"add": []string{fmt.Sprint("mover-", i), fmt.Sprint("mover-", (i+1)%writers)}})
		})
		wantTally(t, tally(t, replies), map[string]int{"200": writers})
		// Each adds two users, one of which its neighbour may have added first: every user
		// is a member, and every change that added someone took a version of its own.
		members, changes := 0, map[string]bool{}
		for k, it := range snapshot(t, a, a.commandsTable(base)) {
			if strings.HasPrefix(k, "group#bulk-open|member#") {
				members++
			}
			if strings.HasPrefix(k, "group#bulk-open|config#") && attrS(it, "event_type") == "group.members_changed" {
				changes[k] = true
			}
		}
		if members != writers || len(changes) < writers/2 || len(changes) > writers {
			t.Errorf("%d members and %d recorded changes, want %d members from %d to %d changes", members, len(changes), writers, writers/2, writers)
		}
	})

	t.Run("32 member PUTs without If-Match all land, one version each", func(t *testing.T) {
		a.do(t, "POST", base+"/groups", map[string]any{"name": "open"}).want(t, http.StatusCreated)
		replies := concurrently(t, writers, func(i int) reply {
			return a.do(t, "PUT", base+fmt.Sprint("/groups/open/members/mover-", i), nil)
		})
		wantTally(t, tally(t, replies), map[string]int{"204": writers})
		seen := map[int64]bool{}
		for _, r := range replies {
			seen[r.etag()] = true
		}
		if len(seen) != writers {
			t.Errorf("%d distinct versions for %d additions", len(seen), writers)
		}
	})
}
