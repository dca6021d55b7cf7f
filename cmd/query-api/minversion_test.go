package main

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/events"
)

// minVersionWait is the X-Min-Version wait of these tests; production waits 5 s.
const minVersionWait = 2 * time.Second

func TestMinVersion(t *testing.T) {
	a := startApp(t, options{minVersionWait: minVersionWait})
	f := a.tenant(t, tenantA)
	apply(t, f, f.CreateUser(events.User{Username: "jdoe", FirstName: "Jane"}), f.CreateGroup("Ops", ""))

	// later applies es after 300 ms, as a projector that lags behind the command API would.
	later := func(t *testing.T, es ...events.Envelope) {
		done := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			done <- f.Apply(context.WithoutCancel(t.Context()), es...)
		}()
		t.Cleanup(func() {
			if err := <-done; err != nil {
				t.Errorf("late apply: %v", err)
			}
		})
	}
	version := func(t *testing.T, r response) int64 {
		var v struct {
			Version int64 `json:"version"`
		}
		r.json(t, &v)
		if etag := r.header.Get("ETag"); etag != `"`+strconv.FormatInt(v.Version, 10)+`"` {
			t.Errorf("ETag %q for version %d", etag, v.Version)
		}
		return v.Version
	}

	t.Run("a user read waits for a version written 300 ms later", func(t *testing.T) {
		later(t, f.UpdateUser("jdoe", func(u *events.User) { u.FirstName = "Janet" }))
		r := a.get(t, bootstrap, tenantPath(tenantA, "/users/jdoe"), "X-Min-Version", "2")
		if r.status != http.StatusOK || version(t, r) != 2 {
			t.Fatalf("%d %s, want 200 at version 2", r.status, r.body)
		}
	})
	t.Run("a user read waits for a user that is not in the view yet", func(t *testing.T) {
		later(t, f.CreateUser(events.User{Username: "newbie"}))
		r := a.get(t, bootstrap, tenantPath(tenantA, "/users/newbie"), "X-Min-Version", "1")
		if r.status != http.StatusOK || version(t, r) != 1 {
			t.Fatalf("%d %s, want 200 at version 1", r.status, r.body)
		}
	})
	t.Run("a group read waits for a version written 300 ms later", func(t *testing.T) {
		later(t, f.UpdateGroup("Ops", func(g *events.Group) { g.Description = "on call" }))
		r := a.get(t, bootstrap, tenantPath(tenantA, "/groups/ops"), "X-Min-Version", "2")
		if r.status != http.StatusOK || version(t, r) != 2 {
			t.Fatalf("%d %s, want 200 at version 2", r.status, r.body)
		}
	})
	t.Run("a group read waits for a group that is not in the view yet", func(t *testing.T) {
		later(t, f.CreateGroup("Later Group", ""))
		r := a.get(t, bootstrap, tenantPath(tenantA, "/groups/later%20group"), "X-Min-Version", "1")
		if r.status != http.StatusOK || version(t, r) != 1 {
			t.Fatalf("%d %s, want 200 at version 1", r.status, r.body)
		}
	})
	t.Run("a version the view already passed answers at once", func(t *testing.T) {
		r := a.get(t, bootstrap, tenantPath(tenantA, "/users/jdoe"), "X-Min-Version", "1")
		if r.status != http.StatusOK || version(t, r) != 2 {
			t.Fatalf("%d %s, want 200 at version 2", r.status, r.body)
		}
	})
	for _, path := range []string{"/users/jdoe", "/groups/Ops", "/users/ghost", "/groups/ghost"} {
		t.Run("a version never reached gives 503 with Retry-After on "+path, func(t *testing.T) {
			start := time.Now()
			r := a.get(t, bootstrap, tenantPath(tenantA, path), "X-Min-Version", "99")
			if code, _ := r.problem(t); r.status != http.StatusServiceUnavailable || code != "unavailable" {
				t.Fatalf("%d %s, want 503 unavailable", r.status, r.body)
			}
			if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
				t.Errorf("Retry-After %q, want a positive number of seconds", r.header.Get("Retry-After"))
			}
			if waited := time.Since(start); waited < minVersionWait {
				t.Errorf("answered after %v, before the wait of %v was over", waited, minVersionWait)
			}
		})
	}
	t.Run("a deleted user whose deletion reached the version is 404", func(t *testing.T) {
		apply(t, f, f.DeleteUser("newbie"))
		r := a.get(t, bootstrap, tenantPath(tenantA, "/users/newbie"), "X-Min-Version", "2")
		if code, _ := r.problem(t); r.status != http.StatusNotFound || code != "not_found" {
			t.Fatalf("%d %s, want 404", r.status, r.body)
		}
	})
	t.Run("a user created again after its deletion is waited for past the tombstone", func(t *testing.T) {
		later(t, f.CreateUser(events.User{Username: "newbie"}))
		r := a.get(t, bootstrap, tenantPath(tenantA, "/users/newbie"), "X-Min-Version", "3")
		if r.status != http.StatusOK || version(t, r) != 3 {
			t.Fatalf("%d %s, want 200 at version 3", r.status, r.body)
		}
	})
	for _, bad := range [][]string{{"0"}, {"-1"}, {"abc"}, {"1.5"}, {""}, {"+1"}, {"99999999999999999999"}, {"1", "2"}} {
		t.Run("X-Min-Version "+strconv.Quote(bad[0])+" of "+strconv.Itoa(len(bad))+" values is 400", func(t *testing.T) {
			var h []string
			for _, v := range bad {
				h = append(h, "X-Min-Version", v)
			}
			for _, path := range []string{"/users/jdoe", "/groups/Ops"} {
				r := a.get(t, bootstrap, tenantPath(tenantA, path), h...)
				if code, _ := r.problem(t); r.status != http.StatusBadRequest || code != "validation_failed" {
					t.Errorf("GET %s: %d %s, want 400 validation_failed", path, r.status, r.body)
				}
			}
		})
	}
}
