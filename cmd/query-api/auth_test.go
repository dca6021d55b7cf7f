package main

import (
	"net/http"
	"testing"

	"github.com/ssodir/ssodir/internal/events"
)

func TestTenantIsolation(t *testing.T) {
	a := startApp(t, options{oidc: true})
	for _, tenant := range []string{tenantA, tenantB} {
		f := a.tenant(t, tenant)
		apply(t, f, f.CreateUser(events.User{Username: "jdoe"}))
	}
	readerA := a.iss.token(t, "reader-a", "directory:read", system+"/"+tenantA)
	writerA := a.iss.token(t, "writer-a", "directory:write", system+"/"+tenantA)
	readerAll := a.iss.token(t, "reader-all", "openid directory:read", "*")

	tests := []struct {
		name   string
		token  string
		tenant string
		status int
		code   string
	}{
		{"a reader of tenant A reads tenant A", readerA, tenantA, http.StatusOK, ""},
		{"a reader of tenant A is forbidden tenant B", readerA, tenantB, http.StatusForbidden, "forbidden"},
		{"a reader of tenant A is forbidden an unknown tenant", readerA, "zz", http.StatusForbidden, "forbidden"},
		{"a token without directory:read is forbidden", writerA, tenantA, http.StatusForbidden, "forbidden"},
		{"a reader of every tenant reads tenant B", readerAll, tenantB, http.StatusOK, ""},
		{"the bootstrap token reads tenant A", bootstrap, tenantA, http.StatusOK, ""},
		{"the bootstrap token reads tenant B", bootstrap, tenantB, http.StatusOK, ""},
		{"the bootstrap token gets 404 for an unknown tenant", bootstrap, "zz", http.StatusNotFound, "not_found"},
		{"no token is unauthorized", "", tenantA, http.StatusUnauthorized, "unauthorized"},
		{"a malformed token is unauthorized", "not-a-jwt", tenantA, http.StatusUnauthorized, "unauthorized"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"", "/users/jdoe", "/users", "/groups", "/activity?actor=bootstrap"} {
				r := a.get(t, tc.token, tenantPath(tc.tenant, path))
				if r.status != tc.status {
					t.Errorf("GET %s: %d %s, want %d", path, r.status, r.body, tc.status)
					continue
				}
				if tc.code != "" {
					if code, _ := r.problem(t); code != tc.code {
						t.Errorf("GET %s: code %q, want %q", path, code, tc.code)
					}
				}
				if tc.status == http.StatusUnauthorized && r.header.Get("WWW-Authenticate") == "" {
					t.Errorf("GET %s: 401 without WWW-Authenticate", path)
				}
			}
		})
	}
}
