package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/events"
)

// TestMemberExpiryRoutes: PUT /groups/{name}/members/{username} takes an optional
// expires_at (set, moved, cleared with null), POST /groups/{name}/members takes
// {"username","expires_at"} elements in add, and bad expiries are 400s that change nothing.
func TestMemberExpiryRoutes(t *testing.T) {
	t.Parallel()
	a := startApp(t, testEnv(t))
	base := a.newTenant(t)
	for _, u := range []string{"ann", "bob", "cid"} {
		a.do(t, "POST", base+"/users", map[string]any{"username": u}).want(t, http.StatusCreated)
	}
	a.do(t, "POST", base+"/groups", map[string]any{"name": "Ops"}).want(t, http.StatusCreated)
	future := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	member := base + "/groups/ops/members/ann"

	a.do(t, "PUT", member, map[string]any{"expires_at": time.Now().Add(-time.Minute).Format(time.RFC3339)}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	a.do(t, "PUT", member, map[string]any{"expires_at": "tomorrow"}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	a.do(t, "PUT", member, map[string]any{"expires_at": 12}).want(t, http.StatusBadRequest)
	a.do(t, "PUT", member, map[string]any{"until": future.Format(time.RFC3339)}).want(t, http.StatusBadRequest)
	a.do(t, "POST", base+"/groups/ops/members", map[string]any{"add": []any{map[string]any{"username": "bob", "expires_at": "soon"}}}).
		wantProblem(t, http.StatusBadRequest, "validation_failed")
	a.do(t, "POST", base+"/groups/ops/members", map[string]any{"add": []any{map[string]any{"username": "bob", "expires_at": time.Now().Add(-time.Hour).Format(time.RFC3339)}}}).
		wantProblem(t, http.StatusBadRequest, "validation_failed")
	a.do(t, "POST", base+"/groups/ops/members", map[string]any{"add": []any{map[string]any{"username": "bob", "role": "x"}}}).want(t, http.StatusBadRequest)
	if r := a.do(t, "PUT", member, nil, "If-Match", `"1"`).want(t, http.StatusNoContent); r.etag() != 2 {
		t.Fatalf("a plain add answered ETag %d, want 2 (nothing before it changed the group)", r.etag())
	}
	a.do(t, "DELETE", member, nil).want(t, http.StatusNoContent)

	a.do(t, "PUT", member, map[string]any{"expires_at": future.Format(time.RFC3339)}).want(t, http.StatusNoContent)
	if p, ok := a.record(t, base, events.KindGroup, "ops", 4).Payload.(*events.GroupMemberAdded); !ok || p.ExpiresAt == nil || !p.ExpiresAt.Equal(future) {
		t.Fatalf("v4 = %+v, want ann added until %v", a.record(t, base, events.KindGroup, "ops", 4).Payload, future)
	}
	a.do(t, "PUT", member, map[string]any{"expires_at": future.Format(time.RFC3339)}).want(t, http.StatusNoContent) // same: nothing
	moved := future.Add(time.Hour)
	if r := a.do(t, "PUT", member, map[string]any{"expires_at": moved.Format(time.RFC3339)}).want(t, http.StatusNoContent); r.etag() != 5 {
		t.Fatalf("renewal answered ETag %d, want 5", r.etag())
	}
	if p, ok := a.record(t, base, events.KindGroup, "ops", 5).Payload.(*events.GroupMemberExpirySet); !ok || !p.ExpiresAt.Equal(moved) {
		t.Fatalf("v5 = %+v, want ann's expiry moved to %v", a.record(t, base, events.KindGroup, "ops", 5).Payload, moved)
	}
	a.do(t, "PUT", member, map[string]any{"expires_at": nil}).want(t, http.StatusNoContent)
	if p, ok := a.record(t, base, events.KindGroup, "ops", 6).Payload.(*events.GroupMemberExpirySet); !ok || p.ExpiresAt != nil {
		t.Fatalf("v6 = %+v, want ann's expiry cleared", a.record(t, base, events.KindGroup, "ops", 6).Payload)
	}

	a.do(t, "POST", base+"/groups/ops/members", map[string]any{"add": []any{"cid", map[string]any{"username": "BOB", "expires_at": future.Format(time.RFC3339)}}}).
		want(t, http.StatusOK)
	p, ok := a.record(t, base, events.KindGroup, "ops", 7).Payload.(*events.GroupMembersChanged)
	if !ok || len(p.Added) != 2 || p.Added[0].Username != "bob" || p.Added[0].ExpiresAt == nil || !p.Added[0].ExpiresAt.Equal(future) || p.Added[1].ExpiresAt != nil {
		t.Fatalf("v7 = %+v, want bob added until %v and cid for good", a.record(t, base, events.KindGroup, "ops", 7).Payload, future)
	}
}
