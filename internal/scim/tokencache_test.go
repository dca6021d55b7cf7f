package scim_test

import (
	"strings"
	"testing"
)

// TestATokenRowIsReadOncePerProcess: a provider's requests in a row (an import's pages) read
// its SCIM token's row once per process and minute, not once each; the bearer is still
// checked on each (a forged token for the kept id gets 401); a revocation through the
// process takes effect there at once, and a process that keeps no rows (this test's
// second) reads the row on every request and sees it gone too.
func TestATokenRowIsReadOncePerProcess(t *testing.T) {
	s := newService(t)
	id := s.createUser("tc1", "tc1@example.com")
	s.scim("GET", "/Users/"+id, "").want(t, 200)
	// A request that reads nothing else: with the row kept, it reads nothing at all.
	calls, items := s.db.snapshot()
	s.scim("GET", "/ServiceProviderConfig", "").want(t, 200)
	if got, read := s.db.since(calls, items); len(got) != 0 || read != 0 {
		t.Errorf("a request with a kept token: DynamoDB calls %v (%d items), want none", got, read)
	}
	tenant := tenantOf(s)
	admin := s.url + "/v1/systems/" + tenant.System + "/tenants/" + tenant.ID + "/scim-tokens"
	tokenID := s.do(adminToken, "GET", admin, "").want(t, 200).obj(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	s.do("ssodir_scim."+tokenID+".forged", "GET", s.base+"/ServiceProviderConfig", "").wantError(t, 401, "")

	other := strings.Replace(s.base, s.url, s.other, 1)
	for range 2 {
		calls, items := s.db.snapshot()
		s.do(s.token, "GET", other+"/ServiceProviderConfig", "").want(t, 200)
		if got, read := s.db.since(calls, items); got["GetItem"] != 1 || read != 1 {
			t.Errorf("a process that keeps no rows: DynamoDB calls %v (%d items), want the token's GetItem", got, read)
		}
	}

	s.do(adminToken, "DELETE", admin+"/"+tokenID, "").want(t, 204)
	s.scim("GET", "/ServiceProviderConfig", "").wantError(t, 401, "")
	s.scim("GET", "/Users/"+id, "").wantError(t, 401, "")
	s.do(s.token, "GET", other+"/ServiceProviderConfig", "").wantError(t, 401, "")
}
