package main

import (
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/servicetest"
)

// TestErasuresListPendingAndResume: an erasure whose Keycloak place nobody marks (no sync
// runs here) stays pending; `erasures list --pending` shows it with the places left,
// `erasures resume` carries the projector's part on until it is done and says what is
// left, and says what it waits for while it waits for the second pass; an unknown erasure
// is not found. The projector is stopped before the erasure: the resume does both passes
// itself, and so always waits SSO_ERASURE_SETTLE between them.
func TestErasuresListPendingAndResume(t *testing.T) {
	s := servicetest.Start(t)
	c := newCtl(t, s)
	for _, kv := range s.DynamoEnv() {
		k, v, _ := strings.Cut(kv, "=")
		c.env[k] = v
		if strings.HasPrefix(k, "AWS_") {
			t.Setenv(k, v) // the SDK reads its credentials from the process's environment
		}
	}
	c.env["SSO_ERASURE_SETTLE"] = "10s" // the least allowed
	c.ok("tenants", "create", "eu")
	c.ok("users", "create", "gone", "--email", "gone@example.com")
	s.Stop(t, "projector")
	out := c.ok("users", "erase", "gone", "--reason", "GDPR request, ticket 9", "--wait=false")
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "erasure" {
		t.Fatalf("users erase: %q", out)
	}
	id := f[1]
	if out := c.ok("erasures", "list", "--pending"); !strings.Contains(out, id) || !strings.Contains(out, "pending") {
		t.Fatalf("erasures list --pending: %q", out)
	}
	r := c.run("", "erasures", "resume", id)
	if r.code != 0 || !strings.Contains(r.out, id) || !strings.Contains(r.out, "left: keycloak\t") {
		t.Fatalf("erasures resume: exit %d, want the erasure with only keycloak left\n%s%s", r.code, r.out, r.errOut)
	}
	// The second pass comes SSO_ERASURE_SETTLE after the first: the wait says what it is for.
	if !strings.Contains(r.errOut, "waiting until erasure "+id+" can go on at ") || !strings.Contains(r.errOut, "\nwaited ") {
		t.Errorf("erasures resume waited for the second pass without saying so: stderr %q", r.errOut)
	}
	if out := c.ok("erasures", "list", "--pending"); !strings.Contains(out, id) || !strings.Contains(out, "left: keycloak\t") {
		t.Fatalf("erasures list --pending after the resume: %q", out)
	}
	if r := c.fails(exitNotFound, "erasures", "resume", "00000000-0000-0000-0000-00000000dead"); !strings.Contains(r.errOut, "not found") {
		t.Errorf("erasures resume of an unknown erasure: %q", r.errOut)
	}
	c.fails(exitUsage, "erasures", "resume")
}
