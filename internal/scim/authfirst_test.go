package scim_test

import (
	"maps"
	"net/url"
	"testing"
)

// TestABadTokenReadsOnlyItsOwnRow: a SCIM token is checked before anything else is read.
// A forged, unknown or revoked token makes one DynamoDB call, the GetItem of its own row,
// whatever it asks for, and gets 401.
func TestABadTokenReadsOnlyItsOwnRow(t *testing.T) {
	s := newService(t)
	var ids []string
	for _, n := range []string{"a1", "a2", "a3", "a4", "a5"} {
		ids = append(ids, s.createUser(n, n+"@example.com"))
	}
	gid := s.scim("POST", "/Groups", `{"displayName":"Readers","members":[{"value":"`+ids[0]+`"}]}`).want(t, 201).obj(t)["id"].(string)
	tenant := tenantOf(s)
	admin := s.url + "/v1/systems/" + tenant.System + "/tenants/" + tenant.ID + "/scim-tokens"
	tokenID := s.do(adminToken, "GET", admin, "").want(t, 200).obj(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	revoked := s.token
	s.do(adminToken, "DELETE", admin+"/"+tokenID, "").want(t, 204)
	bearers := map[string]string{
		"forged":  "ssodir_scim." + tokenID + ".forged",
		"unknown": "ssodir_scim.00000000-0000-0000-0000-000000000000.forged",
		"revoked": revoked,
	}
	requests := []struct{ method, path, body string }{
		{"GET", "/Users", ``},
		{"GET", "/Users?count=500", ``},
		{"GET", "/Users?filter=" + url.QueryEscape(`name.familyName co "a"`), ``},
		{"GET", "/Users?filter=" + url.QueryEscape(`userName eq "a1"`), ``},
		{"GET", "/Users/" + ids[1], ``},
		{"POST", "/Users/.search", `{"schemas":["urn:ietf:params:scim:api:messages:2.0:SearchRequest"]}`},
		{"GET", "/Groups", ``},
		{"GET", "/Groups/" + gid, ``},
		{"PATCH", "/Users/" + ids[2], `{"Operations":[{"op":"replace","value":{"active":false}}]}`},
		{"PUT", "/Groups/" + gid, `{"displayName":"Readers"}`},
		{"DELETE", "/Users/" + ids[3], ``},
		{"POST", "/Users", `{"userName":"intruder"}`},
		{"GET", "/ServiceProviderConfig", ``},
		{"GET", "/Nope", ``},
	}
	for name, bearer := range bearers {
		for _, r := range requests {
			calls, items := s.db.snapshot()
			s.do(bearer, r.method, s.base+r.path, r.body).wantError(t, 401, "")
			gotCalls, gotItems := s.db.since(calls, items)
			if want := map[string]int{"GetItem": 1}; !maps.Equal(gotCalls, want) || gotItems > 1 {
				t.Errorf("%s token, %s %s: DynamoDB calls %v reading %d items, want only the token's GetItem", name, r.method, r.path, gotCalls, gotItems)
			}
		}
	}
}
