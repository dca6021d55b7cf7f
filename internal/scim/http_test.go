package scim_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/openapi"
	"github.com/ssodir/ssodir/internal/scim"
)

func q(filter string) string { return url.QueryEscape(filter) }

// ids are the ids of a list answer's resources, and its totalResults.
func ids(t *testing.T, r response) ([]string, float64) {
	t.Helper()
	m := r.want(t, 200).obj(t)
	var out []string
	for _, res := range m["Resources"].([]any) {
		out = append(out, res.(map[string]any)["id"].(string))
	}
	total, _ := m["totalResults"].(float64)
	return out, total
}

func TestFilters(t *testing.T) {
	s := newService(t)
	ann := s.createUser("ann", "ann@example.com")
	bob := s.createUser("bob", "bob@example.com")
	s.scim("PATCH", "/Users/"+bob, `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":[{"op":"add","path":"externalId","value":"ext-bob"},{"op":"replace","path":"name.familyName","value":"Builder"}]}`).want(t, 200)
	cases := []struct {
		filter string
		want   []string
	}{
		{`userName eq "ann"`, []string{ann}},
		{`USERNAME Eq "ANN"`, []string{ann}},
		{`userName eq "nobody"`, nil},
		{`userName eq "Not A Valid+Name"`, nil},
		{`externalId eq "ext-bob"`, []string{bob}},
		{`externalId eq "EXT-BOB"`, nil},
		{`emails[type eq "work"].value eq "BOB@example.com"`, []string{bob}},
		{`emails.value eq "ann@example.com"`, []string{ann}},
		{`emails[value eq "ann@example.com"]`, []string{ann}},
		{`id eq "` + ann + `"`, []string{ann}},
		{`userName eq "bob" and externalId eq "ext-bob"`, []string{bob}},
		{`userName eq "bob" and externalId eq "other"`, nil},
		{`userName eq "ann" or userName eq "bob"`, sorted(ann, bob)},
		{`name.familyName eq "builder"`, []string{bob}},
		{`active eq true`, sorted(ann, bob)},
		{`userName sw "a"`, []string{ann}},
	}
	for _, c := range cases {
		got, total := ids(t, s.scim("GET", "/Users?filter="+q(c.filter), ""))
		if !slices.Equal(got, c.want) || int(total) != len(c.want) {
			t.Errorf("%s: %v (total %v), want %v", c.filter, got, total, c.want)
		}
	}
	for _, bad := range []string{`userName eq`, `userName xx "a"`, `emails[type eq "work"`, `(userName eq "a"`} {
		s.scim("GET", "/Users?filter="+q(bad), "").wantError(t, 400, "invalidFilter")
	}
	// An empty result is a 200 with integer paging fields.
	m := s.scim("GET", "/Users?filter="+q(`userName eq "nobody"`)+"&startIndex=1&count=100", "").want(t, 200).obj(t)
	if m["totalResults"] != 0.0 || m["itemsPerPage"] != 0.0 || m["startIndex"] != 1.0 || len(m["Resources"].([]any)) != 0 {
		t.Errorf("empty list: %v", m)
	}
}

func sorted(xs ...string) []string { return slices.Sorted(slices.Values(xs)) }

func TestPaging(t *testing.T) {
	s := newService(t)
	var all []string
	for i := range 7 {
		all = append(all, s.createUser(fmt.Sprintf("u%d", i), fmt.Sprintf("u%d@example.com", i)))
	}
	slices.Sort(all)
	// Index paging: pages of 3, stable order by id.
	var walked []string
	for start := 1; start <= 7; start += 3 {
		m := s.scim("GET", fmt.Sprintf("/Users?startIndex=%d&count=3", start), "").want(t, 200).obj(t)
		if m["startIndex"] != float64(start) || m["totalResults"] != 7.0 {
			t.Fatalf("page at %d: %v", start, m)
		}
		got, _ := ids(t, s.scim("GET", fmt.Sprintf("/Users?startIndex=%d&count=3", start), ""))
		walked = append(walked, got...)
	}
	if !slices.Equal(walked, all) {
		t.Errorf("index pages %v, want %v", walked, all)
	}
	if got, total := ids(t, s.scim("GET", "/Users?count=0", "")); len(got) != 0 || total != 7 {
		t.Errorf("count=0: %v, total %v", got, total)
	}
	if got, _ := ids(t, s.scim("GET", "/Users?startIndex=100", "")); len(got) != 0 {
		t.Errorf("past the end: %v", got)
	}
	// Cursor paging (RFC 9865): an empty cursor starts, nextCursor continues, the last
	// page has none.
	walked = nil
	cursor := ""
	for range 10 {
		m := s.scim("GET", "/Users?count=3&filter="+q(`active eq true`)+"&cursor="+cursor, "").want(t, 200).obj(t)
		for _, r := range m["Resources"].([]any) {
			walked = append(walked, r.(map[string]any)["id"].(string))
		}
		next, ok := m["nextCursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if !slices.Equal(walked, all) {
		t.Errorf("cursor pages %v, want %v", walked, all)
	}
	s.scim("GET", "/Users?cursor=not-a-cursor", "").wantError(t, 400, "invalidCursor")
	m := s.scim("GET", "/Users?count=2&cursor=", "").want(t, 200).obj(t)
	other := m["nextCursor"].(string)
	s.scim("GET", "/Users?count=2&filter="+q(`active eq true`)+"&cursor="+other, "").wantError(t, 400, "invalidCursor")
	s.scim("GET", "/Users?count=many", "").wantError(t, 400, "invalidValue")
}

const patchOp = `"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"]`

func TestPatchUserAsProvidersSendIt(t *testing.T) {
	s := newService(t)
	id := s.createUser("jane@contoso.com", "jane@contoso.com")
	user := func() map[string]any { return s.scim("GET", "/Users/"+id, "").want(t, 200).obj(t) }
	// Entra, older shape: capitalised ops, booleans as strings, a value-path filter.
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[
		{"op":"Replace","path":"emails[type eq \"work\"].value","value":"jane.doe@contoso.com"},
		{"op":"Replace","path":"name.familyName","value":"Doe"},
		{"op":"Replace","path":"active","value":"False"}]}`).want(t, 200)
	u := user()
	if u["active"] != false || u["name"].(map[string]any)["familyName"] != "Doe" || u["emails"].([]any)[0].(map[string]any)["value"] != "jane.doe@contoso.com" {
		t.Fatalf("after Entra's old PATCH: %v", u)
	}
	// Entra, newer shape: lowercase ops, booleans, pathless values with dotted keys.
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"replace","value":{"active":true,"name.givenName":"Jane",
		"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department":"Finance","externalId":"e-1"}}]}`).want(t, 200)
	u = user()
	if u["active"] != true || u["name"].(map[string]any)["givenName"] != "Jane" || u["externalId"] != "e-1" ||
		u[scim.URNEnterpriseUser].(map[string]any)["department"] != "Finance" {
		t.Fatalf("after Entra's new PATCH: %v", u)
	}
	// Okta: a pathless replace.
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"replace","value":{"active":false}}]}`).want(t, 200)
	if user()["active"] != false {
		t.Fatal("Okta's deactivation did not take")
	}
	// add on a value path that matches nothing creates the entry.
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"Add","path":"phoneNumbers[type eq \"mobile\"].value","value":"+1 555 0100"},
		{"op":"add","path":"addresses[type eq \"work\"].locality","value":"Redmond"}]}`).want(t, 200)
	u = user()
	if fmt.Sprint(u["phoneNumbers"]) != "[map[type:mobile value:+1 555 0100]]" || fmt.Sprint(u["addresses"]) != "[map[locality:Redmond type:work]]" {
		t.Fatalf("add did not create the entries: %v %v", u["phoneNumbers"], u["addresses"])
	}
	// remove with a value-path filter.
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"remove","path":"phoneNumbers[type eq \"mobile\"]"}]}`).want(t, 200)
	if _, ok := user()["phoneNumbers"]; ok {
		t.Fatal("the phone number was not removed")
	}
	// userName: the same name in another case changes nothing; another name renames the
	// user (Entra changes a UPN): the same resource, a name taken by another user is 409.
	v := user()["meta"].(map[string]any)["version"]
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"Replace","path":"userName","value":"JANE@contoso.com"}]}`).want(t, 200)
	if user()["meta"].(map[string]any)["version"] != v {
		t.Error("a userName in another case made a new version")
	}
	s.createUser("taken@contoso.com", "taken@contoso.com")
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"Replace","path":"userName","value":"taken@contoso.com"}]}`).wantError(t, 409, "uniqueness")
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"Replace","path":"userName","value":"janet@contoso.com"},
		{"op":"Replace","path":"name.givenName","value":"Janet"}]}`).want(t, 200)
	if u := user(); u["userName"] != "janet@contoso.com" || u["id"] != id || u["name"].(map[string]any)["givenName"] != "Janet" {
		t.Fatalf("after Entra's rename: %v", u)
	}
	v = user()["meta"].(map[string]any)["version"]
	// If-Match is honoured; a password change is a version but never shows.
	s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"replace","value":{"password":"new-secret-1"}}]}`, "If-Match", `W/"1"`).wantError(t, 412, "")
	r := s.scim("PATCH", "/Users/"+id, `{`+patchOp+`,"Operations":[{"op":"replace","value":{"password":"new-secret-1"}}]}`, "If-Match", v.(string)).want(t, 200)
	if strings.Contains(string(r.body), "new-secret") {
		t.Error("the password shows")
	}
	// Malformed PATCHes change nothing.
	for _, bad := range []struct{ body, scimType string }{
		{`{"Operations":[{"op":"move","path":"title","value":"x"}]}`, "invalidSyntax"},
		{`{"Operations":[]}`, "invalidSyntax"},
		{`{"Operations":[{"op":"remove"}]}`, "noTarget"},
		{`{"Operations":[{"op":"add","path":"emails[type eq","value":"x"}]}`, "invalidPath"},
		{`{"Operations":[{"op":"replace","path":"emails[type eq \"work\" or type eq \"home\"].value","value":"x@y.z"},{"op":"replace","path":"phoneNumbers[value sw \"+\"]","value":"1"}]}`, "noTarget"},
		{`{"Operations":[{"op":"replace","path":"active","value":"maybe"}]}`, "invalidValue"},
		{`{"Operations":[{"op":"replace","path":"emails[type eq \"work\"].value","value":"not an email"}]}`, "invalidValue"},
		{`[1]`, "invalidSyntax"},
	} {
		s.scim("PATCH", "/Users/"+id, bad.body).wantError(t, 400, bad.scimType)
	}
	if user()["meta"].(map[string]any)["version"] == v {
		t.Error("the password change made no version")
	}
}

func TestPutUserAsOktaSendsIt(t *testing.T) {
	s := newService(t)
	id := s.createUser("okta.user@example.com", "okta.user@example.com")
	// Another client's attribute survives SCIM's writes.
	tenant := tenantOf(s)
	s.do(adminToken, "PATCH", s.url+"/v1/systems/"+tenant.System+"/tenants/"+tenant.ID+"/users/okta.user@example.com",
		`{"attributes":{"dept":["eng"]}}`, "Content-Type", "application/json").want(t, 200)
	u := s.scim("GET", "/Users/"+id, "").want(t, 200).obj(t)
	u["name"] = map[string]any{"givenName": "Okta", "familyName": "User"}
	u["title"] = "Boss"
	u["groups"] = []any{}
	s.scim("PUT", "/Users/"+id, jsonBody(u)).want(t, 200)
	delete(u, "title")
	u["active"] = false
	r := s.scim("PUT", "/Users/"+id, jsonBody(u)).want(t, 200).obj(t)
	if r["title"] != nil || r["active"] != false || r["name"].(map[string]any)["familyName"] != "User" {
		t.Fatalf("after the PUTs: %v", r)
	}
	agg, err := s.store.LoadUser(t.Context(), tenant, "okta.user@example.com")
	if err != nil || fmt.Sprint(agg.State.Attributes) != "map[dept:[eng]]" {
		t.Errorf("attributes %v (%v): another client's attribute must stay, SCIM's removed one must go", agg.State.Attributes, err)
	}
	// Okta pushes a new userName: a rename, the same resource.
	u["userName"] = "someone.else@example.com"
	if r := s.scim("PUT", "/Users/"+id, jsonBody(u)).want(t, 200).obj(t); r["userName"] != "someone.else@example.com" || r["id"] != id {
		t.Fatalf("after Okta's rename: %v", r)
	}
	if _, err := s.store.LoadUser(t.Context(), tenant, "someone.else@example.com"); err != nil {
		t.Fatal(err)
	}
	if agg, _ := s.store.LoadUser(t.Context(), tenant, "okta.user@example.com"); agg.Live() {
		t.Error("the old name is still a live user")
	}
	s.scim("PUT", "/Users/not-an-id", jsonBody(u)).wantError(t, 404, "")
}

func TestGroups(t *testing.T) {
	s := newService(t)
	ann := s.createUser("ann", "ann@example.com")
	bob := s.createUser("bob", "bob@example.com")
	cid := s.createUser("cid", "cid@example.com")
	r := s.scim("POST", "/Groups", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:Group","http://schemas.microsoft.com/2006/11/ResourceManagement/ADSCIM/2.0/Group"],
		"externalId":"g-1","displayName":"Sales Team","members":[{"value":"`+ann+`"}],"meta":{"resourceType":"Group"}}`).want(t, 201)
	g := r.obj(t)
	gid := g["id"].(string)
	if g["displayName"] != "Sales Team" || g["externalId"] != "g-1" || len(g["members"].([]any)) != 1 {
		t.Fatalf("created %s", r.body)
	}
	members := func() []string {
		var out []string
		for _, m := range s.scim("GET", "/Groups/"+gid, "").want(t, 200).obj(t)["members"].([]any) {
			out = append(out, m.(map[string]any)["display"].(string))
		}
		return out
	}
	// Several membership changes in one PATCH, in both of Entra's shapes; 204 without a body.
	r = s.scim("PATCH", "/Groups/"+gid, `{`+patchOp+`,"Operations":[
		{"op":"Add","path":"members","value":[{"$ref":null,"value":"`+bob+`"},{"$ref":null,"value":"`+cid+`"}]},
		{"op":"Remove","path":"members","value":[{"$ref":null,"value":"`+ann+`"}]}]}`).want(t, 204)
	if len(r.body) != 0 || !slices.Equal(members(), []string{"bob", "cid"}) {
		t.Fatalf("members %v", members())
	}
	s.scim("PATCH", "/Groups/"+gid, `{`+patchOp+`,"Operations":[{"op":"remove","path":"members[value eq \"`+bob+`\"]"},
		{"op":"add","value":{"members":[{"value":"`+ann+`"}]}}]}`).want(t, 204)
	if !slices.Equal(members(), []string{"ann", "cid"}) {
		t.Fatalf("members %v", members())
	}
	// A body when asked for one; excludedAttributes leaves the members out.
	body := s.scim("PATCH", "/Groups/"+gid+"?excludedAttributes=members", `{`+patchOp+`,"Operations":[{"op":"replace","path":"members","value":[{"value":"`+bob+`"}]}]}`).want(t, 200).obj(t)
	if _, ok := body["members"]; ok || body["id"] != gid {
		t.Errorf("PATCH with excludedAttributes answered %v", body)
	}
	if !slices.Equal(members(), []string{"bob"}) {
		t.Fatalf("after replace: %v", members())
	}
	// A new displayName renames the group: the same resource and members. The same name is
	// no change; Entra's replace of the path, and Okta's replace of the value, rename; a
	// name another group holds is 409, a name breaking the rule 400, and neither changes
	// anything.
	version := func() any {
		return s.scim("GET", "/Groups/"+gid, "").want(t, 200).obj(t)["meta"].(map[string]any)["version"]
	}
	v := version()
	s.scim("PATCH", "/Groups/"+gid, `{`+patchOp+`,"Operations":[{"op":"replace","value":{"id":"`+gid+`","displayName":"Sales Team"}}]}`).want(t, 204)
	if version() != v {
		t.Error("the same displayName made a new version")
	}
	s.scim("PATCH", "/Groups/"+gid, `{`+patchOp+`,"Operations":[{"op":"Replace","path":"displayName","value":"Sales EMEA"}]}`).want(t, 204)
	if g := s.scim("GET", "/Groups/"+gid, "").want(t, 200).obj(t); g["displayName"] != "Sales EMEA" || g["id"] != gid || !slices.Equal(members(), []string{"bob"}) {
		t.Fatalf("after Entra's rename: %v", g)
	}
	s.scim("POST", "/Groups", `{"displayName":"Taken"}`).want(t, 201)
	s.scim("PATCH", "/Groups/"+gid, `{`+patchOp+`,"Operations":[{"op":"replace","value":{"id":"`+gid+`","displayName":"TAKEN"}}]}`).wantError(t, 409, "uniqueness")
	s.scim("PATCH", "/Groups/"+gid, `{`+patchOp+`,"Operations":[{"op":"replace","path":"displayName","value":"a/b"}]}`).wantError(t, 400, "invalidValue")
	s.scim("PATCH", "/Groups/"+gid, `{`+patchOp+`,"Operations":[{"op":"replace","value":{"id":"`+gid+`","displayName":"Sales Team"}}]}`).want(t, 204)
	if got, _ := ids(t, s.scim("GET", "/Groups?excludedAttributes=members&filter="+q(`displayName eq "Sales EMEA"`), "")); len(got) != 0 {
		t.Errorf("the old displayName still finds %v", got)
	}
	// An unknown member changes nothing.
	s.scim("PATCH", "/Groups/"+gid, `{`+patchOp+`,"Operations":[{"op":"add","path":"members","value":[{"value":"`+ann+`"},{"value":"nobody"}]}]}`).wantError(t, 400, "invalidValue")
	if !slices.Equal(members(), []string{"bob"}) {
		t.Fatalf("a refused PATCH changed members: %v", members())
	}
	// Filters Entra sends.
	if got, _ := ids(t, s.scim("GET", "/Groups?excludedAttributes=members&filter="+q(`displayName eq "sales team"`), "")); !slices.Equal(got, []string{gid}) {
		t.Errorf("by displayName: %v", got)
	}
	if got, _ := ids(t, s.scim("GET", "/Groups?excludedAttributes=members&filter="+q(`id eq "`+gid+`" and members[value eq "`+bob+`"]`), "")); !slices.Equal(got, []string{gid}) {
		t.Errorf("by member: %v", got)
	}
	if got, _ := ids(t, s.scim("GET", "/Groups?filter="+q(`id eq "`+gid+`" and members[value eq "`+ann+`"]`), "")); len(got) != 0 {
		t.Errorf("by non-member: %v", got)
	}
	m := s.scim("GET", "/Groups/"+gid+"?excludedAttributes=members", "").want(t, 200).obj(t)
	if _, ok := m["members"]; ok {
		t.Error("excludedAttributes=members")
	}
	// PUT replaces the members, and a new displayName in it renames the group (Okta).
	m["members"] = []any{map[string]any{"value": ann}, map[string]any{"value": cid}}
	m["displayName"] = "Sales Force"
	if r := s.scim("PUT", "/Groups/"+gid, jsonBody(m)).want(t, 200).obj(t); r["displayName"] != "Sales Force" || r["id"] != gid {
		t.Fatalf("after Okta's PUT: %v", r)
	}
	if !slices.Equal(members(), []string{"ann", "cid"}) {
		t.Fatalf("after PUT: %v", members())
	}
	s.scim("POST", "/Groups", `{"displayName":"SALES FORCE"}`).wantError(t, 409, "uniqueness")
	s.scim("POST", "/Groups", `{"displayName":"Sales Team"}`).want(t, 201)
	s.scim("DELETE", "/Groups/"+gid, "").want(t, 204)
	s.scim("GET", "/Groups/"+gid, "").wantError(t, 404, "")
}

func TestAuthentication(t *testing.T) {
	s := newService(t)
	tenant := tenantOf(s)
	admin := s.url + "/v1/systems/" + tenant.System + "/tenants/" + tenant.ID + "/scim-tokens"
	// A SCIM token is for its tenant's SCIM endpoints only.
	other := newService(t)
	s.do(other.token, "GET", s.base+"/Users", "").wantError(t, 401, "")
	s.do(s.token, "GET", admin, "").want(t, 401)
	s.do(s.token, "PATCH", s.url+"/v1/systems/"+tenant.System+"/tenants/"+tenant.ID+"/users/x", `{"first_name":"x"}`, "Content-Type", "application/json").want(t, 401)
	s.do("", "GET", s.base+"/Users", "").wantError(t, 401, "")
	// A JWT needs both directory scopes and the tenant.
	both := s.iss.Token(t, map[string]any{"scope": "directory:write directory:read", "sso_tenants": []string{tenant.System + "/" + tenant.ID}})
	s.do(both, "GET", s.base+"/Users", "").want(t, 200)
	readOnly := s.iss.Token(t, map[string]any{"scope": "directory:read", "sso_tenants": []string{"*"}})
	s.do(readOnly, "GET", s.base+"/Users", "").wantError(t, 403, "")
	elsewhere := s.iss.Token(t, map[string]any{"scope": "directory:write directory:read", "sso_tenants": []string{"acme/other"}})
	s.do(elsewhere, "GET", s.base+"/Users", "").wantError(t, 403, "")
	// Tokens are listed without secrets and revoked at once.
	list := s.do(adminToken, "GET", admin, "").want(t, 200)
	if strings.Contains(string(list.body), s.token) || !strings.Contains(string(list.body), `"name":"okta"`) {
		t.Errorf("list: %s", list.body)
	}
	id := list.obj(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	s.do(adminToken, "DELETE", admin+"/"+id, "").want(t, 204)
	s.scim("GET", "/Users", "").wantError(t, 401, "")
	s.do(adminToken, "DELETE", admin+"/"+id, "").want(t, 404)
	// An expired token fails; a token with an expiry in the past is refused.
	soon := time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	r := s.do(adminToken, "POST", admin, `{"name":"short","expires_at":"`+soon+`"}`, "Content-Type", "application/json").want(t, 201)
	short := r.obj(t)["token"].(string)
	s.do(short, "GET", s.base+"/Users", "").want(t, 200)
	time.Sleep(time.Until(time.Now().Add(1600 * time.Millisecond)))
	s.do(short, "GET", s.base+"/Users", "").wantError(t, 401, "")
	s.do(adminToken, "POST", admin, `{"name":"past","expires_at":"2020-01-01T00:00:00Z"}`, "Content-Type", "application/json").want(t, 400)
	s.do(adminToken, "POST", admin, `{"name":""}`, "Content-Type", "application/json").want(t, 400)
	s.do(adminToken, "POST", s.url+"/v1/systems/acme/tenants/nosuchtenant/scim-tokens", `{"name":"x"}`, "Content-Type", "application/json").want(t, 404)
	// A forged token for a known id fails.
	forged := "ssodir_scim." + id + ".AAAA"
	s.do(forged, "GET", s.base+"/Users", "").wantError(t, 401, "")
}

func TestDiscoveryAndMethods(t *testing.T) {
	s := newService(t)
	for _, p := range []string{"/ServiceProviderConfig", "/ResourceTypes", "/ResourceTypes/User", "/Schemas", "/Schemas/" + scim.URNEnterpriseUser} {
		r := s.scim("GET", p, "").want(t, 200)
		if r.header.Get("Content-Type") != scim.MediaType {
			t.Errorf("%s: Content-Type %q", p, r.header.Get("Content-Type"))
		}
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			s.scim(m, p, `{}`).wantError(t, 405, "")
		}
	}
	cfg := s.scim("GET", "/ServiceProviderConfig", "").obj(t)
	if cfg["patch"].(map[string]any)["supported"] != true || cfg["pagination"].(map[string]any)["cursor"] != true {
		t.Errorf("config: %v", cfg)
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	for path, methods := range map[string][]string{
		"/Users": {"get", "post"}, "/Users/{id}": {"get", "put", "patch", "delete", "post"},
		"/Groups": {"get", "post"}, "/Groups/{id}": {"get", "put", "patch", "delete", "post"},
		"/ServiceProviderConfig": {"get"}, "/ResourceTypes": {"get"}, "/ResourceTypes/{name}": {"get"},
		"/Schemas": {"get"}, "/Schemas/{uri}": {"get"},
	} {
		for _, m := range methods {
			if _, ok := doc.Paths["/scim/v2/{system}/{tenant}"+path][m]; !ok {
				t.Errorf("openapi.json does not describe %s %s", m, path)
			}
		}
	}
	s.scim("DELETE", "/Users", "").wantError(t, 405, "")
	s.scim("POST", "/Users/some-id", `{}`).wantError(t, 405, "")
	s.scim("GET", "/Nope", "").wantError(t, 404, "")
	s.scim("GET", "/Schemas/urn:nope", "").wantError(t, 404, "")

	// A new userName renames the user and a new displayName the group: both are
	// writable, as a provider reading the schema must learn.
	for uri, name := range map[string]string{scim.URNUser: "userName", scim.URNGroup: "displayName"} {
		attrs, _ := s.scim("GET", "/Schemas/"+uri, "").obj(t)["attributes"].([]any)
		found := false
		for _, a := range attrs {
			a, _ := a.(map[string]any)
			if a["name"] == name {
				found = true
				if a["mutability"] != "readWrite" {
					t.Errorf("%s %s: mutability %v, want readWrite (a change renames)", uri, name, a["mutability"])
				}
			}
		}
		if !found {
			t.Errorf("%s has no %s", uri, name)
		}
	}
}

func TestMediaTypes(t *testing.T) {
	s := newService(t)
	body := `{"userName":"a1"}`
	s.scim("POST", "/Users", body, "Content-Type", "application/json").want(t, 201)
	s.scim("POST", "/Users", `{"userName":"a2"}`, "Content-Type", "").want(t, 201)
	s.scim("POST", "/Users", `{"userName":"a3"}`, "Content-Type", "application/scim+json; charset=utf-8").want(t, 201)
	s.scim("POST", "/Users", `{"userName":"a4"}`, "Content-Type", "text/plain").wantError(t, 415, "")
	s.scim("POST", "/Users", `not json`).wantError(t, 400, "invalidSyntax")
	s.scim("POST", "/Users", `{"userName":"bad name!"}`).wantError(t, 400, "invalidValue")
	s.scim("POST", "/Users", `{"name":{"givenName":"x"}}`).wantError(t, 400, "invalidValue")
	s.scim("POST", "/Users", `{"userName":"a5","password":"short"}`).wantError(t, 400, "invalidValue")
	r := s.scim("POST", "/Users", `{"userName":"a6","emails":[{"value":"nope"}]}`).wantError(t, 400, "invalidValue")
	if !strings.Contains(r["detail"].(string), "emails") {
		t.Errorf("the detail does not name emails: %v", r["detail"])
	}
	if got, _ := ids(t, s.scim("GET", "/Users?attributes=userName", "")); len(got) != 3 {
		t.Errorf("users %v", got)
	}
	one := s.scim("GET", "/Users?attributes=userName,name.givenName&filter="+q(`userName eq "a1"`), "").obj(t)["Resources"].([]any)[0].(map[string]any)
	if _, ok := one["meta"]; ok || one["userName"] != "a1" || one["id"] == nil {
		t.Errorf("attributes=userName gave %v", one)
	}
}

// TestBackfillLookups: users and groups made before the lookups existed (their lookup
// items removed here) are not found by SCIM until the backfill writes their lookups.
func TestBackfillLookups(t *testing.T) {
	s := newService(t)
	tenant := tenantOf(s)
	uid := s.createUser("old.user", "old.user@example.com")
	s.scim("PATCH", "/Users/"+uid, `{`+patchOp+`,"Operations":[{"op":"add","path":"externalId","value":"ext-old"}]}`).want(t, 200)
	gid := s.scim("POST", "/Groups", `{"displayName":"Old Group","externalId":"g-old"}`).want(t, 201).obj(t)["id"].(string)
	table := s.names.Commands(tenant.System, tenant.ID)
	for _, k := range [][2]string{{"ids#user", uid}, {"externalid#user#ext-old", uid}, {"ids#group", gid}, {"externalid#group#g-old", gid}} {
		deleteItem(t, s, table, k[0], k[1])
	}
	s.scim("GET", "/Users/"+uid, "").wantError(t, 404, "")
	if got, _ := ids(t, s.scim("GET", "/Users", "")); len(got) != 0 {
		t.Fatalf("listed without lookups: %v", got)
	}
	rep, err := s.store.BackfillLookups(t.Context(), tenant)
	if err != nil || rep.Users != 1 || rep.Groups != 1 || rep.Written != 4 {
		t.Fatalf("backfill: %+v %v", rep, err)
	}
	s.scim("GET", "/Users/"+uid, "").want(t, 200)
	s.scim("GET", "/Groups/"+gid, "").want(t, 200)
	if got, _ := ids(t, s.scim("GET", "/Users?filter="+q(`externalId eq "ext-old"`), "")); !slices.Equal(got, []string{uid}) {
		t.Errorf("by external id after the backfill: %v", got)
	}
	if got, _ := ids(t, s.scim("GET", "/Groups?filter="+q(`externalId eq "g-old"`), "")); !slices.Equal(got, []string{gid}) {
		t.Errorf("group by external id after the backfill: %v", got)
	}
	if rep, err := s.store.BackfillLookups(t.Context(), tenant); err != nil || rep.Written != 0 {
		t.Errorf("a second backfill: %+v %v", rep, err)
	}
}

// TestABadTokenWritesNothing: the token is checked before anything else happens: a
// revoked or forged token changes nothing and learns nothing but 401.
func TestABadTokenWritesNothing(t *testing.T) {
	s := newService(t)
	id := s.createUser("kept", "kept@example.com")
	gid := s.scim("POST", "/Groups", `{"displayName":"Kept"}`).want(t, 201).obj(t)["id"].(string)
	tenant := tenantOf(s)
	admin := s.url + "/v1/systems/" + tenant.System + "/tenants/" + tenant.ID + "/scim-tokens"
	tokenID := s.do(adminToken, "GET", admin, "").want(t, 200).obj(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	forged := "ssodir_scim." + tokenID + ".forged"
	for _, bearer := range []string{forged, s.token} {
		if bearer == s.token {
			s.do(adminToken, "DELETE", admin+"/"+tokenID, "").want(t, 204)
		}
		for _, r := range []struct{ method, path, body string }{
			{"POST", "/Users", `{"userName":"intruder"}`},
			{"PATCH", "/Users/" + id, `{"Operations":[{"op":"replace","value":{"active":false}}]}`},
			{"PUT", "/Users/" + id, `{"userName":"kept","active":false}`},
			{"DELETE", "/Users/" + id, ``},
			{"PATCH", "/Groups/" + gid, `{"Operations":[{"op":"add","path":"members","value":[{"value":"` + id + `"}]}]}`},
			{"DELETE", "/Groups/" + gid, ``},
			{"GET", "/Users/" + id, ``},
			{"GET", "/Users/no-such-id", ``},
			{"POST", "/Users/no-such-id", `{}`},
			{"GET", "/Nope", ``},
			{"POST", "/Users", `not json`},
		} {
			got := s.do(bearer, r.method, s.base+r.path, r.body)
			got.wantError(t, 401, "")
			if strings.Contains(string(got.body), "kept") || got.header.Get("ETag") != "" || got.header.Get("Location") != "" {
				t.Errorf("%s %s told a bad token %s %v", r.method, r.path, got.body, got.header)
			}
		}
	}
	agg, err := s.store.LoadUser(t.Context(), tenant, "kept")
	if err != nil || !agg.Live() || agg.State.Version != 1 || !agg.State.IsActive {
		t.Errorf("the user after the bad tokens: %+v %v", agg.State, err)
	}
	if u, _ := s.store.LoadUser(t.Context(), tenant, "intruder"); u.Exists {
		t.Error("a bad token created a user")
	}
	if g, _ := s.store.LoadGroup(t.Context(), tenant, "kept"); !g.Live() || g.State.Version != 1 {
		t.Errorf("the group after the bad tokens: %+v", g.State)
	}
}
