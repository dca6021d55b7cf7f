package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/auth/authtest"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// errorCase is one request that must be answered with one of API.md's error codes.
type errorCase struct {
	name   string
	method string
	// path is relative to the fixture tenant unless it starts with /v1/systems or /.
	path   string
	body   any
	header []string
	// before runs first (a request that makes the error possible).
	before func(t *testing.T, a *app, base string)
	status int
	code   string
	fields []string
}

// TestErrors sends, for every error code of API.md, requests that must get it, to one app
// with a tenant holding user jdoe (version 2, email jdoe@example.com) and group Admins.
func TestErrors(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	env := testEnv(t)
	env["SSO_OIDC_ISSUER"], env["SSO_OIDC_AUDIENCE"] = iss.URL, authtest.Audience
	a := startApp(t, env)
	base := a.newTenant(t)
	system, tenant := tenantOf(base)
	a.do(t, "POST", base+"/users", map[string]any{"username": "jdoe", "email": "jdoe@example.com"}).want(t, http.StatusCreated)
	a.do(t, "PATCH", base+"/users/jdoe", map[string]any{"last_name": "Doe"}).want(t, http.StatusOK)
	a.do(t, "POST", base+"/groups", map[string]any{"name": "Admins"}).want(t, http.StatusCreated)
	kcTenant := dynamotest.UniqueName("kc")
	a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": kcTenant, "keycloak": map[string]any{
		"url": "https://kc.example.com", "realm": "r", "client_id": "c", "client_secret": "s"}}).want(t, http.StatusCreated)

	bearer := func(token string) []string { return []string{"Authorization", "Bearer " + token} }
	jwt := func(claims map[string]any) []string { return bearer(iss.Token(t, claims)) }
	ours := []string{system + "/" + tenant}
	validUser := map[string]any{"username": "newbie"}
	big := `{"username":"x","first_name":"` + strings.Repeat("a", 70<<10) + `"}`

	cases := []errorCase{
		// 401
		{name: "a request without a token is unauthorized", method: "POST", path: "/users", body: validUser,
			header: []string{"Authorization", ""}, status: 401, code: "unauthorized"},
		{name: "a request with an unknown token is unauthorized", method: "POST", path: "/users", body: validUser,
			header: bearer("not-the-bootstrap-token"), status: 401, code: "unauthorized"},
		{name: "a request with another scheme is unauthorized", method: "POST", path: "/users", body: validUser,
			header: []string{"Authorization", "Basic " + a.token()}, status: 401, code: "unauthorized"},
		{name: "a JWT signed by another key is unauthorized", method: "POST", path: "/users", body: validUser,
			header: bearer(authtest.Sign(t, "RS256", authtest.NewRSAKey(t), authtest.RSAKeyID,
				iss.Claims(map[string]any{"scope": "directory:write", "sso_tenants": "*"}))),
			status: 401, code: "unauthorized"},
		{name: "an expired JWT is unauthorized", method: "POST", path: "/users", body: validUser,
			header: jwt(map[string]any{"scope": "directory:write", "sso_tenants": "*", "exp": time.Now().Add(-time.Hour).Unix()}),
			status: 401, code: "unauthorized"},
		{name: "a JWT for another audience is unauthorized", method: "POST", path: "/users", body: validUser,
			header: jwt(map[string]any{"scope": "directory:write", "sso_tenants": "*", "aud": "someone-else"}),
			status: 401, code: "unauthorized"},
		{name: "an unsigned JWT is unauthorized", method: "POST", path: "/users", body: validUser,
			header: bearer(authtest.Unsigned(t, iss.Claims(map[string]any{"scope": "directory:write", "sso_tenants": "*"}))),
			status: 401, code: "unauthorized"},
		{name: "a tenant provisioning without a token is unauthorized", method: "POST", path: "/v1/systems/acme/tenants",
			body: map[string]any{"tenant_id": "x"}, header: []string{"Authorization", ""}, status: 401, code: "unauthorized"},

		// 403
		{name: "a JWT without the write scope is forbidden", method: "POST", path: "/users", body: validUser,
			header: jwt(map[string]any{"scope": "directory:read", "sso_tenants": ours}), status: 403, code: "forbidden"},
		{name: "a JWT for another tenant is forbidden", method: "PATCH", path: "/users/jdoe", body: map[string]any{"first_name": "x"},
			header: jwt(map[string]any{"scope": "directory:write", "sso_tenants": []string{"acme/other"}}), status: 403, code: "forbidden"},
		{name: "a JWT for the same tenant id of another system is forbidden", method: "DELETE", path: "/users/jdoe",
			header: jwt(map[string]any{"scope": "directory:write", "sso_tenants": []string{"other/" + tenant}}), status: 403, code: "forbidden"},
		{name: "provisioning a tenant without tenants:admin is forbidden", method: "POST", path: "/v1/systems/acme/tenants",
			body:   map[string]any{"tenant_id": "x"},
			header: jwt(map[string]any{"scope": "directory:write", "sso_tenants": "*"}), status: 403, code: "forbidden"},
		{name: "provisioning a tenant the token does not name is forbidden", method: "POST", path: "/v1/systems/acme/tenants",
			body:   map[string]any{"tenant_id": "x"},
			header: jwt(map[string]any{"scope": "tenants:admin", "sso_tenants": []string{"acme/y"}}), status: 403, code: "forbidden"},
		{name: "Keycloak settings without tenants:admin are forbidden", method: "PUT", path: "/keycloak",
			body:   map[string]any{"url": "https://kc.example.com", "realm": "r", "client_id": "c", "client_secret": "s"},
			header: jwt(map[string]any{"scope": "directory:write", "sso_tenants": ours}), status: 403, code: "forbidden"},

		// 404
		{name: "an unknown tenant is not found", method: "POST", path: "/v1/systems/acme/tenants/nosuchtenant/users",
			body: validUser, status: 404, code: "not_found"},
		{name: "a malformed tenant id is not found", method: "POST", path: "/v1/systems/acme/tenants/No_Such!/users",
			body: validUser, status: 404, code: "not_found"},
		{name: "Keycloak settings of an unknown tenant are not found", method: "PUT", path: "/v1/systems/acme/tenants/nosuchtenant/keycloak",
			body: map[string]any{"url": "https://kc.example.com", "realm": "r", "client_id": "c", "client_secret": "s"}, status: 404, code: "not_found"},
		{name: "an unknown user is not found", method: "PATCH", path: "/users/nobody", body: map[string]any{"first_name": "x"},
			status: 404, code: "not_found"},
		{name: "an impossible username is not found", method: "POST", path: "/users/No%20Body/deactivate", status: 404, code: "not_found"},
		{name: "the password of an unknown user is not found", method: "PUT", path: "/users/nobody/password",
			body: map[string]any{"password": "long enough"}, status: 404, code: "not_found"},
		{name: "an unknown group is not found", method: "PATCH", path: "/groups/nobody", body: map[string]any{"description": "x"},
			status: 404, code: "not_found"},
		{name: "a member of an unknown group is not found", method: "PUT", path: "/groups/nobody/members/jdoe", status: 404, code: "not_found"},
		{name: "an unknown user as a member is not found", method: "PUT", path: "/groups/admins/members/nobody", status: 404, code: "not_found"},
		{name: "a members change naming unknown users is not found, each named", method: "POST", path: "/groups/admins/members",
			body: map[string]any{"add": []string{"jdoe", "nobody"}, "remove": []string{"ghost"}}, status: 404, code: "not_found",
			fields: []string{"add", "remove"}},
		{name: "a members change of an unknown group is not found", method: "POST", path: "/groups/nobody/members",
			body: map[string]any{"add": []string{"jdoe"}}, status: 404, code: "not_found"},
		{name: "an unknown route is not found", method: "GET", path: "/v1/nothing/here", status: 404, code: "not_found"},
		{name: "an unknown route under a tenant is not found", method: "POST", path: "/widgets", body: map[string]any{}, status: 404, code: "not_found"},

		// 405
		{name: "GET on the users collection is not allowed", method: "GET", path: "/users", status: 405, code: "method_not_allowed"},
		{name: "DELETE on the tenants collection is not allowed", method: "DELETE", path: "/v1/systems/acme/tenants", status: 405, code: "method_not_allowed"},
		{name: "PUT on a user is not allowed", method: "PUT", path: "/users/jdoe", body: map[string]any{}, status: 405, code: "method_not_allowed"},

		// 409
		{name: "a taken username conflicts", method: "POST", path: "/users", body: map[string]any{"username": "JDOE"},
			status: 409, code: "username_taken"},
		{name: "a taken email conflicts, whatever its case", method: "POST", path: "/users",
			body: map[string]any{"username": "other", "email": "JDoe@Example.COM"}, status: 409, code: "email_taken"},
		{name: "an email change to a taken email conflicts", method: "PATCH", path: "/users/other2",
			before: func(t *testing.T, a *app, base string) {
				a.do(t, "POST", base+"/users", map[string]any{"username": "other2"}).want(t, http.StatusCreated)
			},
			body: map[string]any{"email": "jdoe@EXAMPLE.com"}, status: 409, code: "email_taken"},
		{name: "a taken group name conflicts, whatever its case", method: "POST", path: "/groups",
			body: map[string]any{"name": "ADMINS"}, status: 409, code: "group_exists"},
		{name: "a tenant that exists with other settings conflicts", method: "POST", path: "/v1/systems/acme/tenants",
			body: map[string]any{"tenant_id": kcTenant, "keycloak": map[string]any{
				"url": "https://kc.example.com", "realm": "r", "client_id": "c", "client_secret": "other"}},
			status: 409, code: "tenant_exists"},

		// 412
		{name: "a stale If-Match on a user fails", method: "PATCH", path: "/users/jdoe", body: map[string]any{"first_name": "x"},
			header: []string{"If-Match", `"1"`}, status: 412, code: "version_mismatch"},
		{name: "a stale If-Match on a delete fails", method: "DELETE", path: "/users/jdoe",
			header: []string{"If-Match", `"7"`}, status: 412, code: "version_mismatch"},
		{name: "a stale If-Match of the group on a member fails", method: "PUT", path: "/groups/admins/members/jdoe",
			header: []string{"If-Match", `"2"`}, status: 412, code: "version_mismatch"},
		{name: "a stale If-Match of the group on a members change fails", method: "POST", path: "/groups/admins/members",
			body: map[string]any{"add": []string{"jdoe"}}, header: []string{"If-Match", `"2"`}, status: 412, code: "version_mismatch"},
		{name: "a stale If-Match on a password fails", method: "PUT", path: "/users/jdoe/password",
			body: map[string]any{"password": "long enough"}, header: []string{"If-Match", `W/"1"`}, status: 412, code: "version_mismatch"},

		// 413
		{name: "a body over 64 KiB is too large", method: "POST", path: "/users", body: big, status: 413, code: "payload_too_large"},
		{name: "a chunked body over 64 KiB is too large", method: "PATCH", path: "/users/jdoe",
			body: io.MultiReader(strings.NewReader(big)), status: 413, code: "payload_too_large"},

		// 415
		{name: "a body that is not JSON is unsupported", method: "POST", path: "/users", body: "username=x",
			header: []string{"Content-Type", "application/x-www-form-urlencoded"}, status: 415, code: "unsupported_media_type"},
		{name: "a body without a Content-Type is unsupported", method: "POST", path: "/groups", body: `{"name":"x"}`,
			header: []string{"Content-Type", ""}, status: 415, code: "unsupported_media_type"},

		// 400
		{name: "an unknown field is invalid, by name", method: "POST", path: "/users", body: map[string]any{"username": "x", "nickname": "y"},
			status: 400, code: "validation_failed", fields: []string{"nickname"}},
		{name: "an unknown field in a PATCH is invalid", method: "PATCH", path: "/users/jdoe", body: map[string]any{"username": "x"},
			status: 400, code: "validation_failed", fields: []string{"username"}},
		{name: "malformed JSON is invalid", method: "POST", path: "/users", body: `{"username": "x",`, status: 400, code: "validation_failed"},
		{name: "a JSON array is invalid", method: "POST", path: "/groups", body: `[{"name":"x"}]`, status: 400, code: "validation_failed"},
		{name: "a wrong JSON type is invalid, by field", method: "POST", path: "/users", body: map[string]any{"username": 7},
			status: 400, code: "validation_failed", fields: []string{"username"}},
		{name: "invalid fields are reported by name", method: "POST", path: "/users",
			body:   map[string]any{"username": "bad name", "email": "nope", "password": "short"},
			status: 400, code: "validation_failed", fields: []string{"email", "password", "username"}},
		{name: "an invalid tenant id is reported by field", method: "POST", path: "/v1/systems/acme/tenants",
			body: map[string]any{"tenant_id": "Bad_Id"}, status: 400, code: "validation_failed", fields: []string{"tenant_id"}},
		{name: "invalid Keycloak settings are reported by field", method: "PUT", path: "/keycloak",
			body:   map[string]any{"url": "ftp://kc", "realm": "a/b", "client_id": "", "client_secret": "", "on_delete": "never"},
			status: 400, code: "validation_failed",
			fields: []string{"keycloak.client_id", "keycloak.client_secret", "keycloak.on_delete", "keycloak.realm", "keycloak.url"}},
		{name: "a members change of more than 1,000 usernames is invalid", method: "POST", path: "/groups/admins/members",
			body: map[string]any{"add": manyNames(600, "a"), "remove": manyNames(401, "r")}, status: 400, code: "validation_failed",
			fields: []string{"add"}},
		{name: "a members change's malformed usernames and a user both added and removed are invalid, each named",
			method: "POST", path: "/groups/admins/members", body: map[string]any{"add": []string{"jdoe", "no body"}, "remove": []string{"JDOE"}},
			status: 400, code: "validation_failed", fields: []string{"add[1]", "remove[0]"}},
		{name: "a members change with an unknown field is invalid", method: "POST", path: "/groups/admins/members",
			body: map[string]any{"add": []string{"jdoe"}, "replace": true}, status: 400, code: "validation_failed", fields: []string{"replace"}},
		{name: "a body on a route that takes none must be JSON", method: "POST", path: "/users/jdoe/deactivate", body: "nonsense",
			status: 400, code: "validation_failed"},
		{name: "a malformed If-Match is invalid", method: "PATCH", path: "/users/jdoe", body: map[string]any{"first_name": "x"},
			header: []string{"If-Match", "version-two"}, status: 400, code: "validation_failed", fields: []string{"If-Match"}},
		{name: "an empty Idempotency-Key is invalid", method: "POST", path: "/groups", body: map[string]any{"name": "idem-empty"},
			header: []string{"Idempotency-Key", ""}, status: 400, code: "validation_failed", fields: []string{"Idempotency-Key"}},
		{name: "an Idempotency-Key over 128 characters is invalid", method: "POST", path: "/groups", body: map[string]any{"name": "idem-long"},
			header: []string{"Idempotency-Key", strings.Repeat("k", 129)}, status: 400, code: "validation_failed", fields: []string{"Idempotency-Key"}},
		{name: "an Idempotency-Key with a tab is invalid", method: "POST", path: "/groups", body: map[string]any{"name": "idem-tab"},
			header: []string{"Idempotency-Key", "a\tb"}, status: 400, code: "validation_failed", fields: []string{"Idempotency-Key"}},
		{name: "an Idempotency-Key that is not ASCII is invalid", method: "DELETE", path: "/groups/admins",
			header: []string{"Idempotency-Key", "ключ"}, status: 400, code: "validation_failed", fields: []string{"Idempotency-Key"}},
		{name: "an invalid Idempotency-Key on a tenant provisioning is invalid", method: "POST", path: "/v1/systems/acme/tenants",
			body: map[string]any{"tenant_id": "idem"}, header: []string{"Idempotency-Key", ""}, status: 400, code: "validation_failed",
			fields: []string{"Idempotency-Key"}},

		// 422
		{name: "an Idempotency-Key reused with another body is unprocessable", method: "POST", path: "/groups",
			before: func(t *testing.T, a *app, base string) {
				a.do(t, "POST", base+"/groups", map[string]any{"name": "first"}, "Idempotency-Key", "key-422").want(t, http.StatusCreated)
			},
			body: map[string]any{"name": "second"}, header: []string{"Idempotency-Key", "key-422"}, status: 422, code: "idempotency_key_reused"},
		{name: "an Idempotency-Key reused on another route is unprocessable", method: "POST", path: "/users/jdoe/deactivate",
			before: func(t *testing.T, a *app, base string) {
				a.do(t, "POST", base+"/groups", map[string]any{"name": "third"}, "Idempotency-Key", "key-422b").want(t, http.StatusCreated)
			},
			header: []string{"Idempotency-Key", "key-422b"}, status: 422, code: "idempotency_key_reused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t, a, base)
			}
			path := tc.path
			if !strings.HasPrefix(path, "/v1/systems") && !strings.HasPrefix(path, "/v1/nothing") {
				path = base + path
			}
			r := a.do(t, tc.method, path, tc.body, tc.header...)
			p := r.wantProblem(t, tc.status, tc.code)
			if len(tc.fields) > 0 {
				var got []string
				for _, f := range p.Errors {
					got = append(got, f.Field)
				}
				slices.Sort(got)
				got = slices.Compact(got)
				if !slices.Equal(got, tc.fields) {
					t.Errorf("fields at fault %v, want %v", got, tc.fields)
				}
			}
			switch tc.status {
			case 401:
				if r.header.Get("WWW-Authenticate") != "Bearer" {
					t.Errorf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
			case 500:
				t.Error("500")
			}
		})
	}

	t.Run("nothing was changed by the refused requests", func(t *testing.T) {
		r := a.do(t, "PATCH", base+"/users/jdoe", map[string]any{"last_name": "Doe"}).want(t, http.StatusOK)
		if r.etag() != 2 {
			t.Errorf("jdoe is at version %d, want 2", r.etag())
		}
		g := a.do(t, "PATCH", base+"/groups/admins", map[string]any{}).want(t, http.StatusOK)
		if g.etag() != 1 {
			t.Errorf("Admins is at version %d, want 1: a refused members change changed it", g.etag())
		}
	})
}

// manyNames are n valid usernames with prefix.
func manyNames(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}
