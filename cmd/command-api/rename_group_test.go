package main

import (
	"net/http"
	"testing"
)

// TestRenameGroupRoute: POST /groups/{name}/rename answers the group under its new name
// with its ETag; the old name is 404 at once; a name another group holds is 409
// group_exists, a stale If-Match 412, and bad bodies 4xx, none of which changes anything.
func TestRenameGroupRoute(t *testing.T) {
	t.Parallel()
	a := startApp(t, testEnv(t))
	base := a.newTenant(t)
	a.do(t, "POST", base+"/groups", map[string]any{"name": "Staff", "description": "all"}).want(t, http.StatusCreated)
	a.do(t, "POST", base+"/groups", map[string]any{"name": "Ops"}).want(t, http.StatusCreated)

	a.do(t, "POST", base+"/groups/staff/rename", map[string]any{"name": "OPS"}).wantProblem(t, http.StatusConflict, "group_exists")
	a.do(t, "POST", base+"/groups/staff/rename", map[string]any{"name": "Crew"}, "If-Match", `"7"`).wantProblem(t, http.StatusPreconditionFailed, "version_mismatch")
	a.do(t, "POST", base+"/groups/nobody/rename", map[string]any{"name": "Crew"}).wantProblem(t, http.StatusNotFound, "not_found")
	a.do(t, "POST", base+"/groups/staff/rename", map[string]any{"name": "a/b"}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	a.do(t, "POST", base+"/groups/staff/rename", map[string]any{}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	a.do(t, "POST", base+"/groups/staff/rename", map[string]any{"name": "Crew", "colour": "red"}).want(t, http.StatusBadRequest)
	a.do(t, "POST", base+"/groups/staff/rename", "not an object").want(t, http.StatusBadRequest)

	r := a.do(t, "POST", base+"/groups/staff/rename", map[string]any{"name": "Crew"}, "If-Match", `"1"`).want(t, http.StatusOK)
	var g group
	r.decode(t, &g)
	if g.Name != "Crew" || g.Version != 2 || g.Description != "all" || r.etag() != 2 {
		t.Fatalf("renamed group %+v (ETag %d), want Crew v2 with its description", g, r.etag())
	}
	a.do(t, "PATCH", base+"/groups/staff", map[string]any{"description": "x"}).wantProblem(t, http.StatusNotFound, "not_found")
	a.do(t, "PATCH", base+"/groups/CREW", map[string]any{"description": "x"}, "If-Match", `"2"`).want(t, http.StatusOK)
	a.do(t, "POST", base+"/groups", map[string]any{"name": "staff"}).want(t, http.StatusCreated)
}
