package main

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// encodeAll percent-encodes every byte of s, letters too: a parameter that arrives so is
// found only if the service decodes it, and decodes it exactly once.
func encodeAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

var routeParamRE = regexp.MustCompile(`:[a-z_]+`)

// fill puts the values of params into a route template, each encoded by enc.
func fill(route string, params map[string]string, enc func(string) string) string {
	return routeParamRE.ReplaceAllStringFunc(route, func(p string) string {
		v, ok := params[p[1:]]
		if !ok {
			panic("no value for " + p + " in " + route)
		}
		return enc(v)
	})
}

// TestPathParametersAreDecoded walks every route of the command API and its SCIM port that
// takes a path parameter, with usernames and group names as identity providers send them
// (an email address, a plus, a space, a letter beyond ASCII), each parameter sent fully
// percent-encoded and as url.PathEscape (the Go client) sends it: every route finds what its
// parameters name.
func TestPathParametersAreDecoded(t *testing.T) {
	t.Parallel()
	a := startApp(t, testEnv(t))
	base := a.newTenant(t)
	system, tenant := tenantOf(base)
	const (
		prefix = "/v1/systems/:system/tenants/:tenant"
		scimP  = "/scim/v2/:system/:tenant"
	)

	type step struct {
		method, route string
		body          any
		status        int
		// check looks at the answer, beyond its status.
		check func(t *testing.T, r reply)
	}
	walked := map[string]bool{}
	walk := func(t *testing.T, params map[string]string, steps []step) {
		t.Helper()
		for i, s := range steps {
			enc := encodeAll
			if i%2 == 1 {
				enc = url.PathEscape
			}
			path := fill(s.route, params, enc)
			r := a.do(t, s.method, path, s.body)
			if r.status != s.status {
				t.Fatalf("%s %s: got %s, want %d", s.method, path, r, s.status)
			}
			if s.check != nil {
				s.check(t, r)
			}
			walked[s.method+" "+s.route] = true
		}
	}
	isUser := func(username string) func(t *testing.T, r reply) {
		return func(t *testing.T, r reply) {
			t.Helper()
			var u user
			r.decode(t, &u)
			if u.Username != username {
				t.Errorf("answer names user %q, want %q", u.Username, username)
			}
		}
	}
	isGroup := func(name string) func(t *testing.T, r reply) {
		return func(t *testing.T, r reply) {
			t.Helper()
			var g group
			r.decode(t, &g)
			if g.Name != name {
				t.Errorf("answer names group %q, want %q", g.Name, name)
			}
		}
	}

	cases := []struct{ username, email, group string }{
		{"ann@example.com", "ann@example.com", "Sales EU"},
		{"ann+eu@example.com", "ann.eu@example.com", "Ventes Île-de-France"},
		{"jörg", "joerg@example.com", "Sales-Marketing"},
	}
	for _, c := range cases {
		t.Run(c.username+" in "+c.group, func(t *testing.T) {
			p := map[string]string{"system": system, "tenant": tenant, "username": c.username, "name": c.group}
			a.do(t, "POST", base+"/users", map[string]any{"username": c.username, "email": c.email}).want(t, http.StatusCreated)
			a.do(t, "POST", base+"/groups", map[string]any{"name": c.group}).want(t, http.StatusCreated)
			walk(t, p, []step{
				{method: "PATCH", route: prefix + "/users/:username", body: map[string]any{"first_name": "Ann"}, status: http.StatusOK, check: isUser(c.username)},
				{method: "PATCH", route: prefix + "/users/:username", body: map[string]any{"last_name": "Smith"}, status: http.StatusOK, check: isUser(c.username)},
				{method: "POST", route: prefix + "/users/:username/deactivate", status: http.StatusOK, check: isUser(c.username)},
				{method: "POST", route: prefix + "/users/:username/activate", status: http.StatusOK, check: isUser(c.username)},
				{method: "PUT", route: prefix + "/users/:username/password", body: map[string]any{"password": "correct horse"}, status: http.StatusNoContent},
			})
			// A rename there and back: both names are encoded as the others are.
			renamed := "r." + c.username
			walk(t, p, []step{{method: "POST", route: prefix + "/users/:username/rename", body: map[string]any{"username": renamed}, status: http.StatusOK, check: isUser(renamed)}})
			back := map[string]string{"system": system, "tenant": tenant, "username": renamed, "name": c.group}
			walk(t, back, []step{{method: "POST", route: prefix + "/users/:username/rename", body: map[string]any{"username": c.username}, status: http.StatusOK, check: isUser(c.username)}})
			renamedGroup := "R " + c.group
			walk(t, p, []step{{method: "POST", route: prefix + "/groups/:name/rename", body: map[string]any{"name": renamedGroup}, status: http.StatusOK, check: isGroup(renamedGroup)}})
			groupBack := map[string]string{"system": system, "tenant": tenant, "username": c.username, "name": renamedGroup}
			walk(t, groupBack, []step{{method: "POST", route: prefix + "/groups/:name/rename", body: map[string]any{"name": c.group}, status: http.StatusOK, check: isGroup(c.group)}})
			walk(t, p, []step{
				{method: "PATCH", route: prefix + "/groups/:name", body: map[string]any{"description": "d"}, status: http.StatusOK, check: isGroup(c.group)},
				{method: "PUT", route: prefix + "/groups/:name/members/:username", status: http.StatusNoContent},
				{method: "DELETE", route: prefix + "/groups/:name/members/:username", status: http.StatusNoContent},
				{method: "POST", route: prefix + "/groups/:name/members", body: map[string]any{"add": []string{c.username}}, status: http.StatusOK, check: isGroup(c.group)},
				{method: "DELETE", route: prefix + "/groups/:name", status: http.StatusNoContent},
				{method: "DELETE", route: prefix + "/users/:username", status: http.StatusNoContent},
				{method: "POST", route: prefix + "/users/:username/erase", body: map[string]any{"reason": "test"}, status: http.StatusAccepted},
			})
		})
	}

	t.Run("the same Idempotency-Key on the same path, encoded otherwise, is the same request", func(t *testing.T) {
		const username = "idem@example.com"
		a.do(t, "POST", base+"/users", map[string]any{"username": username, "email": username}).want(t, http.StatusCreated)
		body := map[string]any{"first_name": "Idem"}
		first := a.do(t, "PATCH", base+"/users/"+encodeAll(username), body, "Idempotency-Key", "k1").want(t, http.StatusOK)
		again := a.do(t, "PATCH", base+"/users/"+url.PathEscape(username), body, "Idempotency-Key", "k1").want(t, http.StatusOK)
		if first.etag() != again.etag() || first.header.Get("X-Command-Id") != again.header.Get("X-Command-Id") {
			t.Errorf("the retry is a new command: %v then %v", first.header, again.header)
		}
	})

	t.Run("tenant routes", func(t *testing.T) {
		p := map[string]string{"system": system, "tenant": tenant}
		walk(t, p, []step{{method: "POST", route: "/v1/systems/:system/tenants", body: map[string]any{"tenant_id": tenant}, status: http.StatusOK}})
		walk(t, p, []step{{method: "PUT", route: prefix + "/keycloak", status: http.StatusOK,
			body: map[string]any{"url": "https://kc.example.com", "realm": "acme", "client_id": "ssodir", "client_secret": "s"}}})
		var tok struct {
			ID    string `json:"id"`
			Token string `json:"token"`
		}
		a.do(t, "POST", base+"/scim-tokens", map[string]any{"name": "okta"}).want(t, http.StatusCreated).decode(t, &tok)
		p["id"] = tok.ID
		walk(t, p, []step{{method: "DELETE", route: prefix + "/scim-tokens/:id", status: http.StatusNoContent}})
		a.do(t, "DELETE", base+"/scim-tokens/"+tok.ID, nil).wantProblem(t, http.StatusNotFound, "not_found") // revoked already
		var hook struct {
			ID string `json:"id"`
		}
		a.do(t, "POST", base+"/webhooks", map[string]any{"url": "https://93.184.215.14/hook"}).want(t, http.StatusCreated).decode(t, &hook)
		p["id"] = hook.ID
		walk(t, p, []step{
			{method: "GET", route: prefix + "/webhooks/:id", status: http.StatusOK},
			{method: "GET", route: prefix + "/webhooks/:id/deliveries", status: http.StatusOK},
			{method: "POST", route: prefix + "/webhooks/:id/replay", body: map[string]any{}, status: http.StatusOK},
			{method: "POST", route: prefix + "/webhooks/:id/rotate-secret", status: http.StatusOK},
			{method: "DELETE", route: prefix + "/webhooks/:id", status: http.StatusNoContent},
		})
	})

	t.Run("SCIM resources by id", func(t *testing.T) {
		const scimType = "application/scim+json"
		var u, g struct {
			ID string `json:"id"`
		}
		scimBase := "/scim/v2/" + system + "/" + tenant
		userBody := map[string]any{"schemas": []string{"urn:ietf:params:scim:schemas:core:2.0:User"}, "userName": "Björn+Okta@example.com"}
		send(t, a.url, a.token(), "POST", scimBase+"/Users", userBody, "Content-Type", scimType).want(t, http.StatusCreated).decode(t, &u)
		groupBody := map[string]any{"schemas": []string{"urn:ietf:params:scim:schemas:core:2.0:Group"}, "displayName": "Ops Team"}
		send(t, a.url, a.token(), "POST", scimBase+"/Groups", groupBody, "Content-Type", scimType).want(t, http.StatusCreated).decode(t, &g)
		patch := map[string]any{"schemas": []string{"urn:ietf:params:scim:api:messages:2.0:PatchOp"},
			"Operations": []map[string]any{{"op": "replace", "path": "active", "value": false}}}
		groupPatch := map[string]any{"schemas": []string{"urn:ietf:params:scim:api:messages:2.0:PatchOp"},
			"Operations": []map[string]any{{"op": "add", "path": "members", "value": []map[string]any{{"value": u.ID}}}}}
		search := map[string]any{"schemas": []string{"urn:ietf:params:scim:api:messages:2.0:SearchRequest"}}
		hasID := func(id string) func(t *testing.T, r reply) {
			return func(t *testing.T, r reply) {
				t.Helper()
				var got struct {
					ID string `json:"id"`
				}
				r.decode(t, &got)
				if got.ID != id {
					t.Errorf("answer has id %q, want %q", got.ID, id)
				}
			}
		}
		steps := []step{
			{method: "GET", route: scimP + "/Users/:id", status: http.StatusOK, check: hasID(u.ID)},
			{method: "PUT", route: scimP + "/Users/:id", body: userBody, status: http.StatusOK, check: hasID(u.ID)},
			{method: "PATCH", route: scimP + "/Users/:id", body: patch, status: http.StatusOK, check: hasID(u.ID)},
			{method: "GET", route: scimP + "/Groups/:id", status: http.StatusOK, check: hasID(g.ID)},
			{method: "PUT", route: scimP + "/Groups/:id", body: groupBody, status: http.StatusOK, check: hasID(g.ID)},
			{method: "PATCH", route: scimP + "/Groups/:id", body: groupPatch, status: http.StatusNoContent},
		}
		for i, s := range steps {
			id := u.ID
			if strings.Contains(s.route, "/Groups/") {
				id = g.ID
			}
			walk(t, map[string]string{"system": system, "tenant": tenant, "id": id}, steps[i:i+1])
		}
		walk(t, map[string]string{"system": system, "tenant": tenant, "id": ".search"}, []step{
			{method: "POST", route: scimP + "/Users/:id", body: search, status: http.StatusOK},
			{method: "POST", route: scimP + "/Groups/:id", body: search, status: http.StatusOK},
		})
		walk(t, map[string]string{"system": system, "tenant": tenant, "id": g.ID}, []step{
			{method: "DELETE", route: scimP + "/Groups/:id", status: http.StatusNoContent}})
		walk(t, map[string]string{"system": system, "tenant": tenant, "id": u.ID}, []step{
			{method: "DELETE", route: scimP + "/Users/:id", status: http.StatusNoContent}})
		walk(t, map[string]string{"system": system, "tenant": tenant, "id": "User"}, []step{
			{method: "GET", route: scimP + "/ResourceTypes/:id", status: http.StatusOK, check: hasID("User")}})
		const schema = "urn:ietf:params:scim:schemas:core:2.0:User"
		walk(t, map[string]string{"system": system, "tenant": tenant, "id": schema}, []step{
			{method: "GET", route: scimP + "/Schemas/:id", status: http.StatusOK, check: hasID(schema)}})
	})

	t.Run("every route that takes a path parameter beyond the tenant was walked", func(t *testing.T) {
		for _, r := range a.routes {
			// Every walked route has :system and :tenant encoded too.
			rest := strings.NewReplacer(":system", "", ":tenant", "").Replace(r.Path)
			if !strings.Contains(rest, ":") || strings.HasSuffix(r.Name, ".notFound") ||
				!slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, r.Method) || walked[r.Method+" "+r.Path] {
				continue
			}
			// SCIM routes every method, to answer those it does not serve with its 405.
			if strings.HasPrefix(r.Path, "/scim/") {
				path := fill(r.Path, map[string]string{"system": system, "tenant": tenant, "id": "x"}, encodeAll)
				if got := a.do(t, r.Method, path, nil); got.status == http.StatusMethodNotAllowed {
					continue
				}
			}
			t.Errorf("%s %s was not walked", r.Method, r.Path)
		}
	})
}
