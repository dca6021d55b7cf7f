package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

func TestQueryValidation(t *testing.T) {
	a := startApp(t, options{})
	f := a.tenant(t, tenantA)
	apply(t, f, f.CreateUser(events.User{Username: "jdoe"}), f.CreateGroup("ops", ""))

	long := strings.Repeat("a", 256)
	tests := []struct {
		name  string
		path  string
		query string
		field string
	}{
		{"an unknown parameter on the users list", "/users", "colour=red", "colour"},
		{"a misspelt filter on the users list", "/users", "lastname_prefix=x", "lastname_prefix"},
		{"an unknown parameter on one user", "/users/jdoe", "expand=groups", "expand"},
		{"an unknown parameter on the tenant", "", "x=1", "x"},
		{"an unknown parameter on a user's groups", "/users/jdoe/groups", "order=updated_asc", "order"},
		{"an unknown parameter on the groups list", "/groups", "name_prefix=o", "name_prefix"},
		{"an unknown parameter on one group", "/groups/ops", "x=1", "x"},
		{"an unknown parameter on a group's members", "/groups/ops/members", "x=1", "x"},
		{"an unknown parameter on the activity feed", "/activity", "day=2026-11-21&type=user.created", "type"},
		{"a parameter given twice", "/groups", "limit=1&limit=2", "limit"},
		{"a limit of 0", "/groups", "limit=0", "limit"},
		{"a limit of 501", "/users", "limit=501", "limit"},
		{"a limit that is not a number", "/users/jdoe/groups", "limit=ten", "limit"},
		{"an empty limit", "/groups/ops/members", "limit=", "limit"},
		{"a negative limit", "/activity", "day=2026-11-21&limit=-1", "limit"},
		{"an email of 255 characters", "/users", "email=" + strings.Repeat("a", 243) + "@example.com", "email"},
		{"an empty email", "/users", "email=", "email"},
		{"a last-name prefix of 256 characters", "/users", "last_name_prefix=" + long, "last_name_prefix"},
		{"an empty first-name prefix", "/users", "first_name_prefix=", "first_name_prefix"},
		{"a prefix with a control character", "/users", "last_name_prefix=a%01", "last_name_prefix"},
		{"a username prefix with a space", "/users", "username_prefix=j%20doe", "username_prefix"},
		{"an empty username prefix", "/users", "username_prefix=", "username_prefix"},
		{"a username prefix with a name prefix", "/users", "username_prefix=j&first_name_prefix=j", "email"},
		{"an unknown order", "/users", "order=name", "order"},
		{"an order with a name prefix", "/users", "order=updated_asc&last_name_prefix=a", "order"},
		{"two filters at once", "/users", "email=a@example.com&last_name_prefix=a", "email"},
		{"an activity query without a selector", "/activity", "", "entity"},
		{"an activity query with two selectors", "/activity", "actor=bootstrap&day=2026-11-21", "entity"},
		{"an entity of an unknown kind", "/activity", "entity=role:admin", "entity"},
		{"an entity without a kind", "/activity", "entity=jdoe", "entity"},
		{"an entity with an invalid username", "/activity", "entity=user:j%20doe", "entity"},
		{"an entity with an invalid group name", "/activity", "entity=group:a/b", "entity"},
		{"a day that is not a date", "/activity", "day=2026-02-30", "day"},
		{"a day in another format", "/activity", "day=21.11.2026", "day"},
		{"an actor of 256 characters", "/activity", "actor=" + long, "actor"},
		{"a malformed query string", "/groups", "limit=%zz", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name+" is 400", func(t *testing.T) {
			r := a.get(t, bootstrap, tenantPath(tenantA, tc.path)+"?"+tc.query)
			code, fields := r.problem(t)
			if r.status != http.StatusBadRequest || code != "validation_failed" {
				t.Fatalf("%d %s, want 400 validation_failed", r.status, r.body)
			}
			if tc.field != "" && !slices.Contains(fields, tc.field) {
				t.Errorf("fields %v, want %q among them", fields, tc.field)
			}
		})
	}

	valid := []string{
		"/users?limit=500", "/users?limit=1", "/users?email=" + url.QueryEscape(strings.Repeat("a", 242)+"@example.com"),
		"/users?last_name_prefix=" + url.QueryEscape(strings.Repeat("é", 255)), "/activity?entity=user:JDOE", "/activity?actor=" + url.QueryEscape("f:1b2c/3 x"),
	}
	for _, path := range valid {
		t.Run("the limits themselves are accepted: "+path[:min(len(path), 40)], func(t *testing.T) {
			if r := a.get(t, bootstrap, tenantPath(tenantA, path)); r.status != http.StatusOK {
				t.Errorf("%d %s, want 200", r.status, r.body)
			}
		})
	}
}

func TestDefaultLimit(t *testing.T) {
	a := startApp(t, options{})
	f := a.tenant(t, tenantA)
	var es []events.Envelope
	for i := range 51 {
		es = append(es, f.CreateUser(events.User{Username: fmt.Sprintf("user%02d", i)}))
	}
	apply(t, f, es...)
	p := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), nil)
	if len(p.Items) != 50 || p.NextCursor == nil {
		t.Fatalf("%d users, next_cursor %v; want 50 and a cursor", len(p.Items), p.NextCursor)
	}
	rest := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), url.Values{"cursor": {*p.NextCursor}})
	if got := usernames(rest.Items); !slices.Equal(got, []string{"user00"}) || rest.NextCursor != nil {
		t.Errorf("second page %v, next_cursor %v; want [user00] and null", got, rest.NextCursor)
	}
	all := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), url.Values{"limit": {"500"}})
	if len(all.Items) != 51 || all.NextCursor != nil {
		t.Errorf("limit 500: %d users, next_cursor %v; want 51 and null", len(all.Items), all.NextCursor)
	}
}

func TestNotFound(t *testing.T) {
	a := startApp(t, options{})
	f := a.tenant(t, tenantA)
	apply(t, f, f.CreateUser(events.User{Username: "jdoe"}), f.CreateGroup("ops", ""))

	for _, path := range []string{
		"/v1/systems/acme/tenants/nowhere",
		"/v1/systems/acme/tenants/nowhere/users",
		"/v1/systems/nosys/tenants/eu/users/jdoe",
		"/v1/systems/acme/tenants/Bad_Id/users",
		"/v1/systems/acme/tenants/" + strings.Repeat("a", 33) + "/groups",
		"/v1/systems/-acme/tenants/eu",
		tenantPath(tenantA, "/users/ghost"),
		tenantPath(tenantA, "/users/not%20a%20username"),
		tenantPath(tenantA, "/users/ghost/groups"),
		tenantPath(tenantA, "/groups/ghost"),
		tenantPath(tenantA, "/groups/not%2Fa%2Fname"),
		tenantPath(tenantA, "/groups/ghost/members"),
		tenantPath(tenantA, "/users/jdoe/nothing"),
		tenantPath(tenantA, "/erasures/00000000-0000-0000-0000-000000000001"),
		tenantPath(tenantA, "/erasures/not-an-erasure"),
		"/v1/systems/acme/tenants/nowhere/erasures/00000000-0000-0000-0000-000000000001",
		"/v2/anything",
	} {
		t.Run(path, func(t *testing.T) {
			r := a.get(t, bootstrap, path)
			if code, _ := r.problem(t); r.status != http.StatusNotFound || code != "not_found" {
				t.Errorf("%d %s, want 404 not_found", r.status, r.body)
			}
		})
	}
}

func TestDeletedNeverListed(t *testing.T) {
	a := startApp(t, options{})
	f := a.tenant(t, tenantA)
	apply(t, f,
		f.CreateUser(events.User{Username: "gone", Email: "gone@example.com", FirstName: "Gail", LastName: "Gone"}),
		f.CreateUser(events.User{Username: "kept", Email: "kept@example.com", FirstName: "Gail", LastName: "Gone"}),
		f.CreateGroup("Old", ""), f.CreateGroup("New", ""),
		f.AddMember("Old", "kept"), f.AddMember("New", "gone"), f.AddMember("New", "kept"),
	)
	apply(t, f, f.DeleteUser("gone"), f.DeleteGroup("Old"))

	lists := []struct {
		path  string
		query url.Values
		key   string
		want  []string
	}{
		{"/users", nil, "username", []string{"kept"}},
		{"/users", url.Values{"order": {"updated_asc"}}, "username", []string{"kept"}},
		{"/users", url.Values{"last_name_prefix": {"gone"}}, "username", []string{"kept"}},
		{"/users", url.Values{"first_name_prefix": {"gail"}}, "username", []string{"kept"}},
		{"/users", url.Values{"username_prefix": {"g"}}, "username", []string{}},
		{"/users", url.Values{"username_prefix": {"k"}}, "username", []string{"kept"}},
		{"/users", url.Values{"email": {"gone@example.com"}}, "username", []string{}},
		{"/groups", nil, "name", []string{"New"}},
		{"/groups/new/members", nil, "username", []string{"kept"}},
		{"/users/kept/groups", nil, "name", []string{"New"}},
	}
	for _, l := range lists {
		t.Run("deleted users and groups are not in "+l.path+"?"+l.query.Encode(), func(t *testing.T) {
			p := list[map[string]any](t, a, bootstrap, tenantPath(tenantA, l.path), l.query)
			got := []string{}
			for _, it := range p.Items {
				got = append(got, field(l.key)(it))
			}
			if !slices.Equal(got, l.want) {
				t.Errorf("items %v, want %v", got, l.want)
			}
		})
	}
	for _, path := range []string{"/users/gone", "/groups/old", "/users/gone/groups", "/groups/old/members"} {
		t.Run("a deleted entity is 404 at "+path, func(t *testing.T) {
			if r := a.get(t, bootstrap, tenantPath(tenantA, path)); r.status != http.StatusNotFound {
				t.Errorf("%d %s, want 404", r.status, r.body)
			}
		})
	}
	t.Run("a user created again continues its versions", func(t *testing.T) {
		apply(t, f, f.CreateUser(events.User{Username: "gone", Email: "gone@example.com"}))
		r := a.get(t, bootstrap, tenantPath(tenantA, "/users/gone"))
		var u userJSON
		r.json(t, &u)
		if r.status != http.StatusOK || u.Version != 3 {
			t.Errorf("%d %s, want 200 at version 3", r.status, r.body)
		}
		p := list[groupJSON](t, a, bootstrap, tenantPath(tenantA, "/users/gone/groups"), nil)
		if len(p.Items) != 0 {
			t.Errorf("the new incarnation has the old one's groups: %v", groupNames(p.Items))
		}
	})
}

func TestTenantStates(t *testing.T) {
	a := startApp(t, options{})
	f := a.tenant(t, tenantA)
	apply(t, f, f.CreateUser(events.User{Username: "jdoe"}))

	t.Run("a replay's switch to new tables is followed without a restart", func(t *testing.T) {
		if r := a.get(t, bootstrap, tenantPath(tenantA, "/users/jdoe")); r.status != http.StatusOK {
			t.Fatalf("before the replay: %d %s", r.status, r.body)
		}
		old := f.Tables()
		if _, err := f.Replay(t.Context()); err != nil {
			t.Fatal(err)
		}
		// Only the new tables get this user: seeing it proves the switch was followed.
		apply(t, f, f.CreateUser(events.User{Username: "after"}))
		if err := dynamo.DeleteTable(t.Context(), localDB(t), old.Users); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Second, func() bool {
			return a.get(t, bootstrap, tenantPath(tenantA, "/users/after")).status == http.StatusOK
		})
		if r := a.get(t, bootstrap, tenantPath(tenantA, "/users/jdoe")); r.status != http.StatusOK {
			t.Errorf("after the replay: %d %s", r.status, r.body)
		}
	})
	t.Run("a tenant being provisioned answers 503 with Retry-After", func(t *testing.T) {
		if err := f.SetStatus(t.Context(), dynamo.TenantProvisioning); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Second, func() bool {
			r := a.get(t, bootstrap, tenantPath(tenantA, "/users"))
			return r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") != ""
		})
		r := a.get(t, bootstrap, tenantPath(tenantA, ""))
		var m map[string]any
		r.json(t, &m)
		if r.status != http.StatusOK || m["status"] != dynamo.TenantProvisioning {
			t.Errorf("the tenant itself: %d %s, want 200 with its status", r.status, r.body)
		}
	})
}
