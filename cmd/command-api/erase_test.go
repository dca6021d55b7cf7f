package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/auth/authtest"
)

// TestEraseUser covers POST /users/{username}/erase on the command API: its own scope
// (directory:write does not imply it, the development token has it), 404 for an unknown
// user and for one erased already, If-Match, the reason's rules (checked against every
// version of the user, not only the current one), Idempotency-Key, the
// ledger entry (PII-free) and the name blocked while the erasure runs. The erasure itself
// (the projector and the Keycloak sync) is proven by test/e2e's TestErasureLeavesNoCanary.
func TestEraseUser(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	env := testEnv(t)
	env["SSO_OIDC_ISSUER"], env["SSO_OIDC_AUDIENCE"] = iss.URL, authtest.Audience
	a := startApp(t, env)
	base := a.newTenant(t)
	system, tenant := tenantOf(base)
	a.do(t, "POST", base+"/users", map[string]any{"username": "erin", "email": "erin.secret@example.org",
		"first_name": "Erin", "last_name": "Quorn", "attributes": map[string][]string{"dept": {"zeta-lab"}}}).want(t, http.StatusCreated)
	a.do(t, "POST", base+"/groups", map[string]any{"name": "g"}).want(t, http.StatusCreated)
	a.do(t, "PUT", base+"/groups/g/members/erin", nil).want(t, http.StatusNoContent)
	// The department changes: "zeta-lab" is in the history only, which the reason is
	// checked against too.
	a.do(t, "PATCH", base+"/users/erin", map[string]any{"attributes": map[string][]string{"dept": {"omega-lab"}}}).want(t, http.StatusOK)
	reason := map[string]any{"reason": "GDPR art. 17 request, ticket 12"}

	writer := iss.Token(t, map[string]any{"sub": "w", "scope": "directory:write directory:read", "sso_tenants": "*"})
	send(t, a.url, writer, "POST", base+"/users/erin/erase", reason).wantProblem(t, http.StatusForbidden, "forbidden")
	eraser := iss.Token(t, map[string]any{"sub": "dpo-1", "scope": "directory:erase", "sso_tenants": "*"})

	send(t, a.url, eraser, "POST", base+"/users/nobody/erase", reason).wantProblem(t, http.StatusNotFound, "not_found")
	send(t, a.url, eraser, "POST", base+"/users/erin/erase", map[string]any{}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	send(t, a.url, eraser, "POST", base+"/users/erin/erase", map[string]any{"reason": "x", "extra": 1}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	for _, r := range []string{"asked by erin.secret@example.org", "Erin Quorn left", "from the ZETA-LAB", "now at omega-lab"} {
		send(t, a.url, eraser, "POST", base+"/users/erin/erase", map[string]any{"reason": r}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	}
	send(t, a.url, eraser, "POST", base+"/users/erin/erase", reason, "If-Match", `"7"`).wantProblem(t, http.StatusPreconditionFailed, "version_mismatch")

	first := send(t, a.url, eraser, "POST", base+"/users/erin/erase", reason, "If-Match", `"2"`, "Idempotency-Key", "erase-erin")
	first.want(t, http.StatusAccepted)
	loc := first.header.Get("Location")
	if !strings.HasPrefix(loc, base+"/erasures/") {
		t.Fatalf("Location %q", loc)
	}
	var body struct {
		ErasureID string `json:"erasure_id"`
		Status    string `json:"status"`
	}
	first.decode(t, &body)
	if loc != base+"/erasures/"+body.ErasureID || body.Status != "pending" {
		t.Errorf("body %+v, Location %q", body, loc)
	}
	again := send(t, a.url, eraser, "POST", base+"/users/erin/erase", reason, "If-Match", `"2"`, "Idempotency-Key", "erase-erin")
	again.want(t, http.StatusAccepted)
	if again.header.Get("Location") != loc || string(again.body) != string(first.body) {
		t.Errorf("replay answered %s %s, first %s %s", again.header.Get("Location"), again.body, loc, first.body)
	}
	// Erased (or being erased): unknown to every command; the name waits for the erasure.
	send(t, a.url, eraser, "POST", base+"/users/erin/erase", reason).wantProblem(t, http.StatusNotFound, "not_found")
	a.do(t, "PATCH", base+"/users/erin", map[string]any{"first_name": "E"}).wantProblem(t, http.StatusNotFound, "not_found")
	a.do(t, "POST", base+"/users", map[string]any{"username": "erin"}).wantProblem(t, http.StatusServiceUnavailable, "unavailable")
	// The email is free at once (the guard went with the delete).
	a.do(t, "POST", base+"/users", map[string]any{"username": "other", "email": "erin.secret@example.org"}).want(t, http.StatusCreated)

	// The ledger entry: who, when, why, every place pending; nothing naming the person.
	items := a.items(t, a.names.Erasures())
	if len(items) != 1 {
		t.Fatalf("%d ledger items, want 1", len(items))
	}
	raw, _ := json.Marshal(items[0])
	for _, pii := range []string{"erin", "Quorn", "zeta", "example.org"} {
		if strings.Contains(strings.ToLower(string(raw)), strings.ToLower(pii)) {
			t.Errorf("the ledger entry holds %q: %s", pii, raw)
		}
	}
	if attrS(items[0], "tenant") != system+"/"+tenant || attrS(items[0], "requested_by") != "dpo-1" ||
		attrS(items[0], "reason") != "GDPR art. 17 request, ticket 12" || attrS(items[0], "status") != "pending" {
		t.Errorf("ledger entry %s", raw)
	}
	// all_incarnations: a boolean, kept in the ledger (the re-application reads it).
	a.do(t, "POST", base+"/users", map[string]any{"username": "erik"}).want(t, http.StatusCreated)
	send(t, a.url, eraser, "POST", base+"/users/erik/erase", map[string]any{"reason": "r", "all_incarnations": "yes"}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	send(t, a.url, eraser, "POST", base+"/users/erik/erase", map[string]any{"reason": "r", "all_incarnations": true}).want(t, http.StatusAccepted)
	alls := 0
	for _, it := range a.items(t, a.names.Erasures()) {
		if b, ok := it["all_incarnations"].(*types.AttributeValueMemberBOOL); ok && b.Value {
			alls++
		}
	}
	if alls != 1 {
		t.Errorf("%d ledger entries with all_incarnations, want 1 (erik's)", alls)
	}
	// The idempotency record names the erasure, not the user.
	for _, it := range a.items(t, a.names.Idempotency()) {
		if attrS(it, "kind") == "erasure" && attrS(it, "agg_key") != body.ErasureID {
			t.Errorf("erase's idempotency record %v", it)
		}
	}
}

// TestEraseUserReasonCoversFormerNames: a person renamed left their versions before the
// rename under the former username; the reason is refused when it names the former
// username or an email only those versions held, and a later holder of the former name
// (another person) is not the erased person's history.
func TestEraseUserReasonCoversFormerNames(t *testing.T) {
	t.Parallel()
	a := startApp(t, testEnv(t))
	base := a.newTenant(t)
	a.do(t, "POST", base+"/users", map[string]any{"username": "vexmora", "email": "vex.first@example.org"}).want(t, http.StatusCreated)
	a.do(t, "PATCH", base+"/users/vexmora", map[string]any{"email": "vex.second@example.org"}).want(t, http.StatusOK)
	a.do(t, "POST", base+"/users/vexmora/rename", map[string]any{"username": "kestrel-d"}).want(t, http.StatusOK)
	// The former name is free: someone else takes it.
	a.do(t, "POST", base+"/users", map[string]any{"username": "vexmora", "email": "later.holder@example.org"}).want(t, http.StatusCreated)
	for _, r := range []string{"asked for by VexMora", "first address vex.first@example.org", "now vex.second@example.org"} {
		a.do(t, "POST", base+"/users/kestrel-d/erase", map[string]any{"reason": r}).wantProblem(t, http.StatusBadRequest, "validation_failed")
	}
	a.do(t, "POST", base+"/users/kestrel-d/erase", map[string]any{"reason": "GDPR art. 17, ticket 7, not later.holder@example.org"}).want(t, http.StatusAccepted)
}
