package main

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/queries/querytest"
)

type tenantJSON struct {
	SystemID string         `json:"system_id"`
	TenantID string         `json:"tenant_id"`
	Status   string         `json:"status"`
	Keycloak map[string]any `json:"keycloak"`
}

func tenantIDs(ts []tenantJSON) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.TenantID)
	}
	return out
}

func TestListTenants(t *testing.T) {
	a := startApp(t, options{oidc: true})
	for _, tenant := range []string{tenantB, tenantA, "zz"} {
		f := a.tenant(t, tenant)
		apply(t, f, f.CreateUser(events.User{Username: "jdoe"}), f.CreateUser(events.User{Username: "jane"}))
		if tenant == "zz" {
			if err := f.SetStatus(t.Context(), dynamo.TenantProvisioning); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := querytest.Setup(t.Context(), localDB(t), a.names, "other", tenantA); err != nil {
		t.Fatal(err)
	}
	// Rows of the Config table that are not tenants: the tenant-list marker, and one under
	// acme's partition with a key no tenant can have.
	for _, key := range [][2]string{{"#ssodir", "#tenants"}, {system, "#marker"}} {
		if _, err := localDB(t).PutItem(t.Context(), &dynamodb.PutItemInput{
			TableName: aws.String(a.names.Config()),
			Item: map[string]types.AttributeValue{
				"system_id": &types.AttributeValueMemberS{Value: key[0]},
				"tenant_id": &types.AttributeValueMemberS{Value: key[1]},
				"version":   &types.AttributeValueMemberN{Value: "3"},
			},
		}); err != nil {
			t.Fatal(err)
		}
	}
	path := "/v1/systems/" + system + "/tenants"

	t.Run("the bootstrap token lists every tenant of the system by id, never a secret or a marker", func(t *testing.T) {
		r := a.get(t, bootstrap, path)
		if r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
		if strings.Contains(string(r.body), querytest.ClientSecret) || strings.Contains(string(r.body), "client_secret") {
			t.Fatalf("the list shows the secret: %s", r.body)
		}
		var p page[tenantJSON]
		r.json(t, &p)
		if got, want := tenantIDs(p.Items), []string{tenantA, tenantB, "zz"}; !slices.Equal(got, want) {
			t.Fatalf("tenants %v, want %v", got, want)
		}
		if p.NextCursor != nil {
			t.Errorf("next_cursor %q on a complete list", *p.NextCursor)
		}
		if p.Items[2].Status != "provisioning" || p.Items[0].Status != "active" || p.Items[0].SystemID != system ||
			p.Items[0].Keycloak["realm"] != querytest.KeycloakRealm {
			t.Errorf("tenants %+v", p.Items)
		}
		// The same objects the single-tenant GET answers, which also says whether the
		// realm takes renames (unknown here: no keycloak-sync has run).
		var one tenantJSON
		a.get(t, bootstrap, tenantPath(tenantA, "")).json(t, &one)
		if one.Keycloak["username_changes"] != "unknown" {
			t.Errorf("GET of the tenant: keycloak %v, want username_changes unknown", one.Keycloak)
		}
		delete(one.Keycloak, "username_changes")
		if !equalTenant(one, p.Items[0]) {
			t.Errorf("listed %+v, GET answers %+v", p.Items[0], one)
		}
	})
	t.Run("pages of one follow the cursor to the end", func(t *testing.T) {
		if got, want := tenantIDs(walk[tenantJSON](t, a, path, nil, 1, nil)), []string{tenantA, tenantB, "zz"}; !slices.Equal(got, want) {
			t.Fatalf("tenants %v, want %v", got, want)
		}
	})
	t.Run("another system lists only its own tenants", func(t *testing.T) {
		if got := tenantIDs(list[tenantJSON](t, a, bootstrap, "/v1/systems/other/tenants", nil).Items); !slices.Equal(got, []string{tenantA}) {
			t.Fatalf("tenants of other %v", got)
		}
	})
	t.Run("a system without tenants, or whose id no system can have, lists nothing", func(t *testing.T) {
		for _, p := range []string{"/v1/systems/nobody/tenants", "/v1/systems/%23ssodir/tenants"} {
			if got := list[tenantJSON](t, a, bootstrap, p, nil).Items; len(got) != 0 {
				t.Errorf("%s lists %+v", p, got)
			}
		}
	})

	readerA := a.iss.token(t, "reader-a", "directory:read", system+"/"+tenantA)
	readerAll := a.iss.token(t, "reader-all", "directory:read", "*")
	writerAll := a.iss.token(t, "writer-all", "directory:write", "*")
	t.Run("a token limited to some tenants lists only those", func(t *testing.T) {
		if got := tenantIDs(list[tenantJSON](t, a, readerA, path, nil).Items); !slices.Equal(got, []string{tenantA}) {
			t.Fatalf("reader of %s lists %v", tenantA, got)
		}
		if got := list[tenantJSON](t, a, readerA, "/v1/systems/other/tenants", nil).Items; len(got) != 0 {
			t.Fatalf("reader of %s/%s lists other's %v", system, tenantA, got)
		}
		if got := tenantIDs(list[tenantJSON](t, a, readerAll, path, nil).Items); !slices.Equal(got, []string{tenantA, tenantB, "zz"}) {
			t.Fatalf("reader of every tenant lists %v", got)
		}
	})
	t.Run("without directory:read or a token the list is refused", func(t *testing.T) {
		for _, tc := range []struct {
			token  string
			status int
		}{{writerAll, http.StatusForbidden}, {"", http.StatusUnauthorized}, {"not-a-jwt", http.StatusUnauthorized}} {
			if r := a.get(t, tc.token, path); r.status != tc.status {
				t.Errorf("token %q: %d %s, want %d", tc.token, r.status, r.body, tc.status)
			}
		}
	})

	first := list[tenantJSON](t, a, bootstrap, path, url.Values{"limit": {"1"}})
	if first.NextCursor == nil {
		t.Fatal("a page of one of three has no next_cursor")
	}
	users := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), url.Values{"limit": {"1"}})
	bad := []struct {
		name  string
		path  string
		query url.Values
	}{
		{"a limit of 0", path, url.Values{"limit": {"0"}}},
		{"a limit over 500", path, url.Values{"limit": {"501"}}},
		{"a malformed cursor", path, url.Values{"cursor": {"not a cursor!"}}},
		{"the cursor of another system's list", "/v1/systems/other/tenants", url.Values{"cursor": {*first.NextCursor}}},
		{"the cursor of the list of users", path, url.Values{"cursor": {cursorOf(t, users.NextCursor)}}},
		{"the tenants cursor on the list of users", tenantPath(tenantA, "/users"), url.Values{"cursor": {*first.NextCursor}}},
		{"an unknown parameter", path, url.Values{"order": {"desc"}}},
	}
	for _, tc := range bad {
		t.Run(tc.name+" is a 400", func(t *testing.T) {
			r := a.get(t, bootstrap, tc.path+"?"+tc.query.Encode())
			if r.status != http.StatusBadRequest {
				t.Fatalf("%d %s, want 400", r.status, r.body)
			}
			if code, _ := r.problem(t); code != "validation_failed" {
				t.Errorf("code %q", code)
			}
		})
	}
}

func cursorOf(t *testing.T, c *string) string {
	t.Helper()
	if c == nil {
		t.Fatal("no next_cursor")
	}
	return *c
}

func equalTenant(a, b tenantJSON) bool {
	if a.SystemID != b.SystemID || a.TenantID != b.TenantID || a.Status != b.Status || len(a.Keycloak) != len(b.Keycloak) {
		return false
	}
	for k, v := range a.Keycloak {
		if b.Keycloak[k] != v {
			return false
		}
	}
	return true
}
