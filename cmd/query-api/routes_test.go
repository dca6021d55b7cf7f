package main

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/queries/querytest"
)

var timestampRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestEveryRoute(t *testing.T) {
	a := startApp(t, options{})
	f := a.tenant(t, tenantA)
	apply(t, f,
		f.CreateUser(events.User{Username: "jdoe", Email: "JDoe@Example.com", FirstName: "Jane", LastName: "Doe",
			Attributes: map[string][]string{"dept": {"eng"}}}),
		f.CreateUser(events.User{Username: "asmith", Email: "asmith@example.com", FirstName: "Alice", LastName: "Smith"}),
		f.CreateGroup("Site Admins", "people who run the site"),
		f.AddMember("Site Admins", "jdoe"),
	)
	userKeys := []string{"attributes", "created_at", "email", "first_name", "id", "is_active", "last_name", "updated_at", "username", "version"}
	groupKeys := []string{"attributes", "created_at", "description", "id", "name", "updated_at", "version"}

	tests := []struct {
		name   string
		path   string
		token  string
		status int
		check  func(t *testing.T, r response)
	}{
		{
			name: "the tenant shows its public settings and never the client secret",
			path: tenantPath(tenantA, ""), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var m map[string]any
				r.json(t, &m)
				if got, want := keysOf(m), []string{"created_at", "keycloak", "status", "system_id", "tenant_id", "updated_at"}; !slices.Equal(got, want) {
					t.Errorf("tenant keys %v, want %v", got, want)
				}
				kc, _ := m["keycloak"].(map[string]any)
				if got, want := keysOf(kc), []string{"client_id", "on_delete", "realm", "url", "username_changes"}; !slices.Equal(got, want) {
					t.Errorf("keycloak keys %v, want %v", got, want)
				}
				if m["system_id"] != system || m["tenant_id"] != tenantA || m["status"] != "active" ||
					kc["url"] != querytest.KeycloakURL || kc["realm"] != querytest.KeycloakRealm ||
					kc["client_id"] != querytest.ClientID || kc["on_delete"] != "disable" || kc["username_changes"] != "unknown" {
					t.Errorf("tenant %s", r.body)
				}
				if strings.Contains(string(r.body), querytest.ClientSecret) || strings.Contains(string(r.body), "secret") {
					t.Errorf("the tenant answer holds the secret: %s", r.body)
				}
				for _, k := range []string{"created_at", "updated_at"} {
					if s, _ := m[k].(string); !timestampRE.MatchString(s) {
						t.Errorf("%s = %q, want RFC 3339 UTC with milliseconds", k, s)
					}
				}
			},
		},
		{
			name: "a user has exactly the fields of API.md, its ETag and no internal attributes",
			path: tenantPath(tenantA, "/users/jdoe"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var m map[string]any
				r.json(t, &m)
				if got := keysOf(m); !slices.Equal(got, userKeys) {
					t.Errorf("user keys %v, want %v", got, userKeys)
				}
				var u userJSON
				r.json(t, &u)
				if u.Username != "jdoe" || u.Email != "jdoe@example.com" || u.FirstName != "Jane" || u.LastName != "Doe" ||
					!u.IsActive || u.Version != 1 || !slices.Equal(u.Attributes["dept"], []string{"eng"}) {
					t.Errorf("user %s", r.body)
				}
				if !timestampRE.MatchString(u.CreatedAt) || !timestampRE.MatchString(u.UpdatedAt) {
					t.Errorf("timestamps %q %q, want RFC 3339 UTC with milliseconds", u.CreatedAt, u.UpdatedAt)
				}
				if got := r.header.Get("ETag"); got != `"1"` {
					t.Errorf("ETag %q, want \"1\"", got)
				}
			},
		},
		{
			name: "a username is found in any case",
			path: tenantPath(tenantA, "/users/JDoe"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var u userJSON
				r.json(t, &u)
				if u.Username != "jdoe" {
					t.Errorf("got %s", r.body)
				}
			},
		},
		{
			name: "all users are listed with a null next_cursor at the end",
			path: tenantPath(tenantA, "/users"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var m map[string]any
				r.json(t, &m)
				if got := keysOf(m); !slices.Equal(got, []string{"items", "next_cursor"}) {
					t.Errorf("page keys %v", got)
				}
				if m["next_cursor"] != nil {
					t.Errorf("next_cursor %v, want null", m["next_cursor"])
				}
				var p page[userJSON]
				r.json(t, &p)
				if got := usernames(p.Items); !slices.Equal(got, []string{"asmith", "jdoe"}) {
					t.Errorf("users %v", got)
				}
			},
		},
		{
			name: "a user's groups are listed",
			path: tenantPath(tenantA, "/users/jdoe/groups"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var p page[map[string]any]
				r.json(t, &p)
				if len(p.Items) != 1 || p.Items[0]["name"] != "Site Admins" || !slices.Equal(keysOf(p.Items[0]), groupKeys) {
					t.Errorf("groups %s", r.body)
				}
			},
		},
		{
			name: "groups are listed",
			path: tenantPath(tenantA, "/groups"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var p page[groupJSON]
				r.json(t, &p)
				if len(p.Items) != 1 || p.Items[0].Name != "Site Admins" || p.Items[0].Version != 2 {
					t.Errorf("groups %s", r.body)
				}
			},
		},
		{
			name: "a group is found by its name in any case, with its space URL-encoded",
			path: tenantPath(tenantA, "/groups/site%20ADMINS"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var m map[string]any
				r.json(t, &m)
				if got := keysOf(m); !slices.Equal(got, groupKeys) {
					t.Errorf("group keys %v, want %v", got, groupKeys)
				}
				if m["name"] != "Site Admins" || m["description"] != "people who run the site" {
					t.Errorf("group %s", r.body)
				}
				if got := r.header.Get("ETag"); got != `"2"` {
					t.Errorf("ETag %q, want \"2\"", got)
				}
			},
		},
		{
			name: "a group's members are listed as users",
			path: tenantPath(tenantA, "/groups/Site%20Admins/members"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var p page[map[string]any]
				r.json(t, &p)
				if len(p.Items) != 1 || p.Items[0]["username"] != "jdoe" || !slices.Equal(keysOf(p.Items[0]), userKeys) {
					t.Errorf("members %s", r.body)
				}
			},
		},
		{
			name: "the activity of a user is listed with exactly the fields of API.md",
			path: tenantPath(tenantA, "/activity?entity=user:jdoe"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var p page[map[string]any]
				r.json(t, &p)
				// Newest first: jdoe's joining Site Admins (a group's change, in their feed
				// too), then their creation.
				if len(p.Items) != 2 {
					t.Fatalf("activity %s", r.body)
				}
				for _, it := range p.Items {
					if got, want := keysOf(it), []string{"actor", "changes", "entity", "event_id", "occurred_at", "type", "version"}; !slices.Equal(got, want) {
						t.Errorf("activity keys %v, want %v", got, want)
					}
				}
				joined, _ := p.Items[0]["changes"].(map[string]any)
				if g, _ := joined["group"].(map[string]any); p.Items[0]["type"] != "group.member_added" || p.Items[0]["entity"] != "group:site admins" ||
					g["new"] != "Site Admins" || len(joined) != 1 {
					t.Errorf("jdoe's membership in their feed: %v", p.Items[0])
				}
				it := p.Items[1]
				ch, _ := it["changes"].(map[string]any)
				email, _ := ch["email"].(map[string]any)
				if it["type"] != "user.created" || it["entity"] != "user:jdoe" || it["actor"] != "bootstrap" ||
					it["version"] != float64(1) || email["new"] != "JDoe@Example.com" {
					t.Errorf("activity %s", r.body)
				}
				if s, _ := it["occurred_at"].(string); !timestampRE.MatchString(s) {
					t.Errorf("occurred_at %q", s)
				}
			},
		},
		{
			name: "the activity of a group is found by its name in any case",
			path: tenantPath(tenantA, "/activity?"+url.Values{"entity": {"group:SITE admins"}}.Encode()), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var p page[activityJSON]
				r.json(t, &p)
				if got := activityTypes(p.Items); !slices.Equal(got, []string{"group.member_added", "group.created"}) {
					t.Errorf("activity %v", got)
				}
			},
		},
		{
			name: "the activity of an actor is listed newest first",
			path: tenantPath(tenantA, "/activity?actor=bootstrap"), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var p page[activityJSON]
				r.json(t, &p)
				if got := activityTypes(p.Items); !slices.Equal(got, []string{"group.member_added", "group.created", "user.created", "user.created"}) {
					t.Errorf("activity %v", got)
				}
			},
		},
		{
			name: "the activity of a day is listed newest first",
			path: tenantPath(tenantA, "/activity?day="+querytest.Day), token: bootstrap, status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var p page[activityJSON]
				r.json(t, &p)
				if len(p.Items) != 4 || p.Items[0].Type != "group.member_added" || p.Items[3].Entity != "user:jdoe" {
					t.Errorf("activity %s", r.body)
				}
			},
		},
		{name: "healthz is open", path: "/healthz", status: http.StatusOK},
		{name: "readyz is open and reports DynamoDB reachable", path: "/readyz", status: http.StatusOK},
		{
			name: "metrics are open and count the requests by route", path: "/metrics", status: http.StatusOK,
			check: func(t *testing.T, r response) {
				if !strings.Contains(string(r.body), `route="/v1/systems/:system/tenants/:tenant/users/:username"`) {
					t.Errorf("metrics do not count the user route:\n%.2000s", r.body)
				}
			},
		},
		{
			name: "the OpenAPI document is open and describes every query route", path: "/openapi.json", status: http.StatusOK,
			check: func(t *testing.T, r response) {
				var doc struct {
					OpenAPI string                    `json:"openapi"`
					Paths   map[string]map[string]any `json:"paths"`
				}
				r.json(t, &doc)
				if !strings.HasPrefix(doc.OpenAPI, "3.1") {
					t.Errorf("openapi %q", doc.OpenAPI)
				}
				for _, p := range []string{"", "/users", "/users/{username}", "/users/{username}/groups", "/groups",
					"/groups/{name}", "/groups/{name}/members", "/activity", "/events"} {
					if _, ok := doc.Paths["/v1/systems/{system}/tenants/{tenant}"+p]["get"]; !ok {
						t.Errorf("no GET %q in the OpenAPI document", p)
					}
				}
				if _, ok := doc.Paths["/v1/systems/{system}/tenants"]["get"]; !ok {
					t.Error("no GET of the tenant list in the OpenAPI document")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := a.get(t, tc.token, tc.path)
			if r.status != tc.status {
				t.Fatalf("GET %s: %d %s, want %d", tc.path, r.status, r.body, tc.status)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func usernames(us []userJSON) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.Username
	}
	return out
}

func groupNames(gs []groupJSON) []string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Name
	}
	return out
}

func activityTypes(as []activityJSON) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Type
	}
	return out
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	a := startApp(t, options{})
	a.tenant(t, tenantA)
	r := a.get(t, bootstrap, "/v1/systems/acme/tenants/eu/nothing")
	if code, _ := r.problem(t); r.status != http.StatusNotFound || code != "not_found" {
		t.Errorf("unknown route: %d %s, want 404 not_found", r.status, r.body)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.url+tenantPath(tenantA, "/users"), strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bootstrap)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to the query API: %d, want 405", res.StatusCode)
	}
}
