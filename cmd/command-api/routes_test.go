package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/auth/authtest"
	"github.com/ssodir/ssodir/internal/events"
)

// wantWrite checks the headers every successful write answers with.
func wantWrite(t *testing.T, r reply, status int, version int64) {
	t.Helper()
	r.want(t, status)
	if got := r.etag(); got != version {
		t.Errorf("ETag %q, want \"%d\"", r.header.Get("ETag"), version)
	}
	if r.header.Get("X-Command-Id") == "" {
		t.Error("no X-Command-Id")
	}
	if status == http.StatusNoContent && len(r.body) != 0 {
		t.Errorf("204 with body %q", r.body)
	}
}

func wantUser(t *testing.T, r reply, want user) user {
	t.Helper()
	var got user
	r.decode(t, &got)
	var raw map[string]any
	r.decode(t, &raw)
	for _, secret := range []string{"password", "password_ciphertext"} {
		if _, ok := raw[secret]; ok {
			t.Errorf("user body carries %q", secret)
		}
	}
	if !timestampRE.MatchString(got.CreatedAt) || !timestampRE.MatchString(got.UpdatedAt) {
		t.Errorf("timestamps %q, %q are not RFC 3339 UTC with milliseconds", got.CreatedAt, got.UpdatedAt)
	}
	got.CreatedAt, got.UpdatedAt = "", ""
	if got.Attributes == nil {
		t.Error("attributes is null, want an object")
	}
	if want.Attributes == nil {
		want.Attributes = map[string][]string{}
	}
	if !jsonEqual(got, want) {
		t.Errorf("user %+v, want %+v", got, want)
	}
	return got
}

func wantGroup(t *testing.T, r reply, want group) {
	t.Helper()
	var got group
	r.decode(t, &got)
	if !timestampRE.MatchString(got.CreatedAt) || !timestampRE.MatchString(got.UpdatedAt) {
		t.Errorf("timestamps %q, %q are not RFC 3339 UTC with milliseconds", got.CreatedAt, got.UpdatedAt)
	}
	got.CreatedAt, got.UpdatedAt = "", ""
	if want.Attributes == nil {
		want.Attributes = map[string][]string{}
	}
	if !jsonEqual(got, want) {
		t.Errorf("group %+v, want %+v", got, want)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestRoutes walks every route of API.md's command table once, in a plausible order, and
// checks status, headers and body of each.
func TestRoutes(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	env["SSO_CORS_ORIGINS"] = "https://ui.example.com"
	a := startApp(t, env)
	id := "routes"
	tenants := "/v1/systems/acme/tenants"
	base := tenants + "/" + id
	kc := map[string]any{"url": "https://kc.example.com/", "realm": "acme", "client_id": "ssodir", "client_secret": "s3cr3t-value"}

	t.Run("POST tenants provisions a tenant: 201, then 200 with the same settings, 409 with others", func(t *testing.T) {
		r := a.do(t, "POST", tenants, map[string]any{"tenant_id": id, "keycloak": kc}).want(t, http.StatusCreated)
		if loc := r.header.Get("Location"); loc != base {
			t.Errorf("Location %q, want %q", loc, base)
		}
		var body map[string]any
		r.decode(t, &body)
		if body["system_id"] != "acme" || body["tenant_id"] != id || body["status"] != "active" {
			t.Errorf("tenant %v", body)
		}
		k, _ := body["keycloak"].(map[string]any)
		if k["url"] != "https://kc.example.com" || k["realm"] != "acme" || k["client_id"] != "ssodir" || k["on_delete"] != "delete" {
			t.Errorf("keycloak settings %v", k)
		}
		if bytes.Contains(r.body, []byte("client_secret")) || bytes.Contains(r.body, []byte("s3cr3t-value")) {
			t.Errorf("the answer carries the secret: %s", r.body)
		}
		a.do(t, "POST", tenants, map[string]any{"tenant_id": id, "keycloak": kc}).want(t, http.StatusOK)
		other := map[string]any{"url": "https://kc.example.com", "realm": "acme", "client_id": "ssodir", "client_secret": "another"}
		a.do(t, "POST", tenants, map[string]any{"tenant_id": id, "keycloak": other}).wantProblem(t, http.StatusConflict, "tenant_exists")
		a.do(t, "POST", tenants, map[string]any{"tenant_id": id}).wantProblem(t, http.StatusConflict, "tenant_exists")
		for _, table := range []string{a.names.Commands("acme", id), a.names.Users("acme", id, 0), a.names.Activities("acme", id, 0)} {
			a.items(t, table) // fails the test if the table is missing
		}
	})

	t.Run("PUT keycloak replaces the tenant's Keycloak settings", func(t *testing.T) {
		r := a.do(t, "PUT", base+"/keycloak", map[string]any{
			"url": "https://sso.example.com", "realm": "acme2", "client_id": "dir", "client_secret": "n3w-s3cr3t", "on_delete": "disable",
		}).want(t, http.StatusOK)
		var body struct {
			Keycloak map[string]any `json:"keycloak"`
		}
		r.decode(t, &body)
		if body.Keycloak["url"] != "https://sso.example.com" || body.Keycloak["on_delete"] != "disable" || body.Keycloak["realm"] != "acme2" {
			t.Errorf("keycloak settings %v", body.Keycloak)
		}
		if bytes.Contains(r.body, []byte("n3w-s3cr3t")) || bytes.Contains(r.body, []byte("client_secret")) {
			t.Errorf("the answer carries the secret: %s", r.body)
		}
	})

	t.Run("POST users creates a user: 201, the user, its Location", func(t *testing.T) {
		r := a.do(t, "POST", base+"/users", map[string]any{
			"username": "JDoe", "email": "JDoe@Example.com", "first_name": "Jane", "last_name": "Doe",
			"attributes": map[string][]string{"dept": {"eng"}}, "password": "correct horse battery",
		})
		wantWrite(t, r, http.StatusCreated, 1)
		if loc := r.header.Get("Location"); loc != base+"/users/jdoe" {
			t.Errorf("Location %q", loc)
		}
		wantUser(t, r, user{Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", LastName: "Doe", IsActive: true,
			Attributes: map[string][]string{"dept": {"eng"}}, Version: 1})
	})

	t.Run("PATCH users/{username} changes the given fields", func(t *testing.T) {
		r := a.do(t, "PATCH", base+"/users/jdoe", map[string]any{"last_name": "Roe", "attributes": nil}, "If-Match", `"1"`)
		wantWrite(t, r, http.StatusOK, 2)
		wantUser(t, r, user{Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", LastName: "Roe", IsActive: true, Version: 2})
	})

	t.Run("POST deactivate deactivates, and again changes nothing", func(t *testing.T) {
		r := a.do(t, "POST", base+"/users/jdoe/deactivate", nil)
		wantWrite(t, r, http.StatusOK, 3)
		wantUser(t, r, user{Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", LastName: "Roe", IsActive: false, Version: 3})
		r = a.do(t, "POST", base+"/users/jdoe/deactivate", nil, "If-Match", `"3"`)
		wantWrite(t, r, http.StatusOK, 3)
	})

	t.Run("POST activate activates", func(t *testing.T) {
		r := a.do(t, "POST", base+"/users/jdoe/activate", nil)
		wantWrite(t, r, http.StatusOK, 4)
		wantUser(t, r, user{Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", LastName: "Roe", IsActive: true, Version: 4})
	})

	t.Run("PUT password sets a password: 204", func(t *testing.T) {
		wantWrite(t, a.do(t, "PUT", base+"/users/jdoe/password", map[string]any{"password": "another secret pw"}), http.StatusNoContent, 5)
		if e := a.record(t, base, events.KindUser, "jdoe", 5); e.Type != events.UserPasswordChangedType {
			t.Errorf("v5 is %s", e.Type)
		}
	})

	t.Run("POST groups creates a group: 201, the group, its Location", func(t *testing.T) {
		r := a.do(t, "POST", base+"/groups", map[string]any{"name": "Team Alpha", "description": "first"})
		wantWrite(t, r, http.StatusCreated, 1)
		if loc := r.header.Get("Location"); loc != base+"/groups/Team%20Alpha" {
			t.Errorf("Location %q", loc)
		}
		wantGroup(t, r, group{Name: "Team Alpha", Description: "first", Version: 1})
	})

	t.Run("PATCH groups/{name} finds the group in any case", func(t *testing.T) {
		r := a.do(t, "PATCH", base+"/groups/team%20ALPHA", map[string]any{"description": "second", "attributes": map[string][]string{"k": {"v"}}})
		wantWrite(t, r, http.StatusOK, 2)
		wantGroup(t, r, group{Name: "Team Alpha", Description: "second", Attributes: map[string][]string{"k": {"v"}}, Version: 2})
	})

	t.Run("PUT groups/{name}/members/{username} adds a member: 204 with the group's version, also when already there", func(t *testing.T) {
		wantWrite(t, a.do(t, "PUT", base+"/groups/Team%20Alpha/members/jdoe", nil, "If-Match", `"2"`), http.StatusNoContent, 3)
		wantWrite(t, a.do(t, "PUT", base+"/groups/Team%20Alpha/members/jdoe", nil), http.StatusNoContent, 3)
	})

	t.Run("DELETE groups/{name}/members/{username} removes a member: 204, also when not there", func(t *testing.T) {
		wantWrite(t, a.do(t, "DELETE", base+"/groups/Team%20Alpha/members/jdoe", nil, "If-Match", `"3"`), http.StatusNoContent, 4)
		wantWrite(t, a.do(t, "DELETE", base+"/groups/Team%20Alpha/members/jdoe", nil), http.StatusNoContent, 4)
	})

	t.Run("DELETE users/{username} deletes the user and frees its username and email", func(t *testing.T) {
		wantWrite(t, a.do(t, "PUT", base+"/groups/Team%20Alpha/members/jdoe", nil), http.StatusNoContent, 5)
		wantWrite(t, a.do(t, "DELETE", base+"/users/jdoe", nil, "If-Match", `"5"`), http.StatusNoContent, 6)
		e := a.record(t, base, events.KindUser, "jdoe", 6)
		if d, ok := e.Payload.(*events.UserDeleted); !ok || len(d.Groups) != 1 || d.Groups[0] != "team alpha" {
			t.Errorf("v6 is %s %+v, want user.deleted from team alpha", e.Type, e.Payload)
		}
		a.do(t, "DELETE", base+"/users/jdoe", nil).wantProblem(t, http.StatusNotFound, "not_found")
		r := a.do(t, "POST", base+"/users", map[string]any{"username": "jdoe", "email": "jdoe@example.com"})
		wantWrite(t, r, http.StatusCreated, 7)
	})

	t.Run("DELETE groups/{name} deletes the group", func(t *testing.T) {
		wantWrite(t, a.do(t, "DELETE", base+"/groups/TEAM%20alpha", nil), http.StatusNoContent, 6)
		a.do(t, "PATCH", base+"/groups/Team%20Alpha", map[string]any{"description": "x"}).wantProblem(t, http.StatusNotFound, "not_found")
	})

	t.Run("the actor of the bootstrap token is recorded as bootstrap", func(t *testing.T) {
		if e := a.record(t, base, events.KindUser, "jdoe", 1); e.Actor != "bootstrap" {
			t.Errorf("actor %q", e.Actor)
		}
	})

	t.Run("healthz, readyz and openapi.json are open", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
			a.do(t, "GET", path, nil, "Authorization", "").want(t, http.StatusOK)
		}
		var doc struct {
			OpenAPI string                    `json:"openapi"`
			Paths   map[string]map[string]any `json:"paths"`
		}
		a.do(t, "GET", "/openapi.json", nil, "Authorization", "").decode(t, &doc)
		if !strings.HasPrefix(doc.OpenAPI, "3.") {
			t.Errorf("openapi %q", doc.OpenAPI)
		}
		for path, methods := range map[string][]string{
			"/v1/systems/{system}/tenants":                                           {"post"},
			"/v1/systems/{system}/tenants/{tenant}/keycloak":                         {"put"},
			"/v1/systems/{system}/tenants/{tenant}/scim-tokens":                      {"post", "get"},
			"/v1/systems/{system}/tenants/{tenant}/scim-tokens/{id}":                 {"delete"},
			"/v1/systems/{system}/tenants/{tenant}/users":                            {"post"},
			"/v1/systems/{system}/tenants/{tenant}/users/{username}":                 {"patch", "delete"},
			"/v1/systems/{system}/tenants/{tenant}/users/{username}/deactivate":      {"post"},
			"/v1/systems/{system}/tenants/{tenant}/users/{username}/activate":        {"post"},
			"/v1/systems/{system}/tenants/{tenant}/users/{username}/password":        {"put"},
			"/v1/systems/{system}/tenants/{tenant}/groups":                           {"post"},
			"/v1/systems/{system}/tenants/{tenant}/groups/{name}":                    {"patch", "delete"},
			"/v1/systems/{system}/tenants/{tenant}/groups/{name}/members/{username}": {"put", "delete"},
		} {
			for _, m := range methods {
				if _, ok := doc.Paths[path][m]; !ok {
					t.Errorf("openapi.json does not describe %s %s", m, path)
				}
			}
		}
	})

	t.Run("a browser UI of an allowed origin gets its preflight answered and the write headers exposed", func(t *testing.T) {
		r := a.do(t, "OPTIONS", base+"/users", nil, "Authorization", "", "Origin", "https://ui.example.com",
			"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type,if-match,idempotency-key")
		if r.status >= 300 || r.header.Get("Access-Control-Allow-Origin") != "https://ui.example.com" {
			t.Errorf("preflight: %s %v", r, r.header)
		}
		allowed := strings.ToLower(r.header.Get("Access-Control-Allow-Headers"))
		for _, h := range []string{"authorization", "if-match", "idempotency-key"} {
			if !strings.Contains(allowed, h) {
				t.Errorf("Access-Control-Allow-Headers %q lacks %s", allowed, h)
			}
		}
		r = a.do(t, "POST", base+"/groups", map[string]any{"name": "cors"}, "Origin", "https://ui.example.com").want(t, http.StatusCreated)
		exposed := strings.ToLower(r.header.Get("Access-Control-Expose-Headers"))
		for _, h := range []string{"etag", "location", "x-command-id"} {
			if !strings.Contains(exposed, h) {
				t.Errorf("Access-Control-Expose-Headers %q lacks %s", exposed, h)
			}
		}
		r = a.do(t, "OPTIONS", base+"/users", nil, "Authorization", "", "Origin", "https://evil.example.com",
			"Access-Control-Request-Method", "POST")
		if r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("another origin was allowed: %v", r.header)
		}
	})

	t.Run("metrics count requests per route and status", func(t *testing.T) {
		a.do(t, "GET", "/no/such/route", nil).want(t, http.StatusNotFound)
		counts := metrics(t, a)
		for key, want := range map[string]float64{
			"POST /v1/systems/:system/tenants 201":                                          1,
			"POST /v1/systems/:system/tenants 200":                                          1,
			"POST /v1/systems/:system/tenants 409":                                          2,
			"POST /v1/systems/:system/tenants/:tenant/users 201":                            2,
			"POST /v1/systems/:system/tenants/:tenant/users/:username/deactivate 200":       2,
			"DELETE /v1/systems/:system/tenants/:tenant/groups/:name/members/:username 204": 2,
			"DELETE /v1/systems/:system/tenants/:tenant/users/:username 404":                1,
			"PATCH /v1/systems/:system/tenants/:tenant/groups/:name 404":                    1,
			"GET unmatched 404": 1,
		} {
			if counts[key] != want {
				t.Errorf("http_requests_total for %s = %v, want %v", key, counts[key], want)
			}
		}
	})
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// metrics reads http_requests_total of the command API as "METHOD route status" → count.
func metrics(t *testing.T, a *app) map[string]float64 {
	t.Helper()
	r := a.do(t, "GET", "/metrics", nil, "Authorization", "").want(t, http.StatusOK)
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "http_requests_total{") {
			continue
		}
		labels := map[string]string{}
		end := strings.LastIndexByte(line, '}')
		for _, m := range labelRE.FindAllStringSubmatch(line[:end], -1) {
			labels[m[1]] = m[2]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		if labels["service"] != "command-api" {
			t.Errorf("metric line %q: service label", line)
		}
		out[labels["method"]+" "+labels["route"]+" "+labels["status"]] += v
	}
	return out
}

// TestJWTCaller checks that a token of the OIDC issuer is accepted with its scopes and
// tenants, and that its subject is the recorded actor.
func TestJWTCaller(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	env := testEnv(t)
	env["SSO_OIDC_ISSUER"], env["SSO_OIDC_AUDIENCE"] = iss.URL, authtest.Audience
	a := startApp(t, env)
	admin := iss.Token(t, map[string]any{"sub": "ops-admin", "scope": "tenants:admin", "sso_tenants": []string{"acme/jwt"}})
	send(t, a.url, admin, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": "jwt"}).want(t, http.StatusCreated)

	writer := iss.Token(t, map[string]any{"sub": "kc-user-7", "realm_access": map[string]any{"roles": []string{"directory:write"}},
		"sso_tenants": []string{"acme/jwt"}})
	send(t, a.url, writer, "POST", "/v1/systems/acme/tenants/jwt/users", map[string]any{"username": "jdoe"}).want(t, http.StatusCreated)
	if e := a.record(t, "/v1/systems/acme/tenants/jwt", events.KindUser, "jdoe", 1); e.Actor != "kc-user-7" {
		t.Errorf("actor %q, want the token's subject", e.Actor)
	}
	es := authtest.Sign(t, "ES256", iss.EC, authtest.ECKeyID, iss.Claims(map[string]any{
		"sub": "ec-user", "scope": "directory:read directory:write", "sso_tenants": "*",
	}))
	send(t, a.url, es, "POST", "/v1/systems/acme/tenants/jwt/groups", map[string]any{"name": "g"}).want(t, http.StatusCreated)
}
