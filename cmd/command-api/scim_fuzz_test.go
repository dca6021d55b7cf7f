package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/config"
)

// fuzzSCIM is the SCIM base URL of the fuzzed tenant.
const fuzzSCIM = "/scim/v2/fz/t1"

// FuzzSCIM sends arbitrary requests to the SCIM endpoints of the real command API (in
// process, on DynamoDB Local) and fails on any 5xx, a panic, or an error that is not in
// SCIM's Error schema. Its seeds are what Okta and Entra send, and their near misses; it
// runs as a normal test with the seeds only.
func FuzzSCIM(f *testing.F) {
	env := testEnv(f)
	cfg, err := config.LoadCommandAPI(config.Map(env))
	if err != nil {
		f.Fatal(err)
	}
	e, err := newServer(f.Context(), cfg, zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	token := env["SSO_BOOTSTRAP_TOKEN"]
	serve := func(path, method, headers string, body []byte) (*httptest.ResponseRecorder, bool) {
		req, ok := fuzzRequest(path, method, headers, body, token)
		if !ok {
			return nil, false
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec, true
	}
	const ct = "Content-Type: application/scim+json"
	var userID, groupID string
	for _, setup := range []struct{ path, method, body string }{
		{fuzzTenants, "POST", `{"tenant_id":"t1"}`},
		{fuzzSCIM + "/Users", "POST", `{"userName":"jdoe","emails":[{"value":"jdoe@example.com","primary":true}],"externalId":"e1"}`},
		{fuzzSCIM + "/Groups", "POST", `{"displayName":"Admins"}`},
	} {
		h := ct
		if setup.path == fuzzTenants {
			h = "Content-Type: application/json"
		}
		rec, _ := serve(setup.path, setup.method, h, []byte(setup.body))
		if rec.Code >= 300 {
			f.Fatalf("setup %s %s: %d %s", setup.method, setup.path, rec.Code, rec.Body)
		}
		var res struct{ ID string }
		_ = json.Unmarshal(rec.Body.Bytes(), &res)
		if strings.HasSuffix(setup.path, "/Users") {
			userID = res.ID
		} else if strings.HasSuffix(setup.path, "/Groups") {
			groupID = res.ID
		}
	}
	patch := `{"schemas":["urn:ietf:params:scim:api:messages:2.0:PatchOp"],"Operations":`
	for _, s := range []struct{ path, method, headers, body string }{
		{"/Users?filter=userName%20eq%20%22jdoe%22&startIndex=1&count=100", "GET", "", ``},
		{"/Users?filter=emails%5Btype%20eq%20%22work%22%5D.value%20eq%20%22x%22", "GET", "", ``},
		{"/Users?filter=userName%20eq", "GET", "", ``},
		{"/Users?cursor=&count=1&attributes=userName,name.givenName", "GET", "", ``},
		{"/Users?cursor=eyJhIjoiIn0&startIndex=-5&count=99999", "GET", "", ``},
		{"/Users", "POST", ct, `{"userName":"Neo","active":"True","password":"12345678","urn:ietf:params:scim:schemas:extension:enterprise:2.0:User":{"manager":"m"}}`},
		{"/Users", "POST", "", `{"userName":"nocontenttype"}`},
		{"/Users", "POST", ct, `{"userName":"x","emails":"nope","addresses":[1]}`},
		{"/Users/" + userID, "GET", "", ``},
		{"/Users/" + userID, "PUT", ct + "\nIf-Match: W/\"1\"", `{"userName":"jdoe","name":{"givenName":"J"},"active":false}`},
		{"/Users/" + userID, "PATCH", ct, patch + `[{"op":"Replace","path":"emails[type eq \"work\"].value","value":"j@example.com"},{"op":"Replace","path":"active","value":"False"}]}`},
		{"/Users/" + userID, "PATCH", ct, patch + `[{"op":"replace","value":{"active":true,"name.givenName":"A","urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department":"D"}}]}`},
		{"/Users/" + userID, "PATCH", ct, patch + `[{"op":"add","path":"phoneNumbers[type eq \"mobile\"].value","value":"1"}]}`},
		{"/Users/" + userID, "PATCH", ct, patch + `[{"op":"remove","path":"emails[value co \"]\"]"}]}`},
		{"/Users/" + userID, "DELETE", "If-Match: *", ``},
		{"/Users/.search", "POST", ct, `{"filter":"active eq true","count":2,"attributes":["userName"]}`},
		{"/Groups?excludedAttributes=members&filter=displayName%20eq%20%22Admins%22", "GET", "", ``},
		{"/Groups/" + groupID, "PATCH", ct, patch + `[{"op":"Add","path":"members","value":[{"$ref":null,"value":"` + userID + `"}]}]}`},
		{"/Groups/" + groupID, "PATCH", ct, patch + `[{"op":"remove","path":"members[value eq \"` + userID + `\"]"}]}`},
		{"/Groups/" + groupID, "PATCH", ct, patch + `[{"op":"replace","path":"members","value":[]},{"op":"replace","value":{"displayName":"Other"}}]}`},
		{"/Groups/" + groupID, "PUT", ct, `{"displayName":"Admins","members":[{"value":"nobody"}]}`},
		{"/Groups/" + groupID + "?attributes=members", "GET", "", ``},
		{"/Groups/" + groupID, "DELETE", "", ``},
		{"/ServiceProviderConfig", "GET", "", ``},
		{"/Schemas/urn:ietf:params:scim:schemas:core:2.0:User", "GET", "", ``},
		{"/ResourceTypes", "POST", ct, `{}`},
		{"/Users", "GET", "Authorization: Bearer ssodir_scim.x.y", ``},
		{"/Nope", "GET", "", ``},
	} {
		f.Add(s.path, s.method, s.headers, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, path, method, headers string, body []byte) {
		rec, ok := serve(fuzzSCIM+path, method, headers, body)
		if !ok {
			t.Skip("not a request an HTTP server would pass on")
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %s%s with %q and %q: %d %s", method, fuzzSCIM, path, headers, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && strings.HasPrefix(rec.Header().Get("Content-Type"), "application/scim+json") {
			var e struct {
				Schemas []string `json:"schemas"`
				Status  string   `json:"status"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || len(e.Schemas) != 1 || e.Status == "" {
				t.Fatalf("%d answered with %s (%v)", rec.Code, rec.Body, err)
			}
		} else if rec.Code >= 400 && rec.Header().Get("Content-Type") != "application/problem+json" {
			// Requests outside a tenant's SCIM base (a path that leaves it) get problem+json.
			t.Fatalf("%d answered as %q: %s", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	})
}
