package main

import (
	"net/http"
	"testing"
)

// TestAccessReportNeedsDirectoryRead: GET /access-report is a read like the others: a
// reader of the tenant reaches it (here refused as history not kept: the test's tenant
// has no as-of index), a token without directory:read or for another tenant is 403.
func TestAccessReportNeedsDirectoryRead(t *testing.T) {
	a := startApp(t, options{oidc: true})
	a.tenant(t, tenantA)
	a.tenant(t, tenantB)
	readerA := a.iss.token(t, "reader-a", "directory:read", system+"/"+tenantA)
	writerA := a.iss.token(t, "writer-a", "directory:write", system+"/"+tenantA)
	const q = "/access-report?from=2026-01-01T00:00:00Z&to=2026-02-01T00:00:00Z"
	for _, tc := range []struct {
		name, token, tenant string
		status              int
		code                string
	}{
		{"a reader of the tenant", readerA, tenantA, http.StatusBadRequest, "history_not_kept"},
		{"a reader of another tenant", readerA, tenantB, http.StatusForbidden, "forbidden"},
		{"a token without directory:read", writerA, tenantA, http.StatusForbidden, "forbidden"},
		{"no token", "", tenantA, http.StatusUnauthorized, "unauthorized"},
	} {
		r := a.get(t, tc.token, tenantPath(tc.tenant, q))
		if code, _ := r.problem(t); r.status != tc.status || code != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
}
