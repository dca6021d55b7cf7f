package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/servicetest"
)

// TestErasuresListPendingAndResume: an erasure whose Keycloak place nobody marks (no sync
// runs here) stays pending; `erasures list --pending` shows it with the places left,
// `erasures resume` carries the projector's part on until it is done and says what is
// left, and says what it waits for while it waits for the second pass; an unknown erasure
// is not found.
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
	c.ok("tenants", "create", "eu")
	c.ok("users", "create", "gone", "--email", "gone@example.com")
	out := c.ok("users", "erase", "gone", "--reason", "GDPR request, ticket 9", "--wait=false")
	f := strings.Fields(out)
	if len(f) < 2 || f[0] != "erasure" {
		t.Fatalf("users erase: %q", out)
	}
	id := f[1]
	if out := c.ok("erasures", "list", "--pending"); !strings.Contains(out, id) || !strings.Contains(out, "pending") {
		t.Fatalf("erasures list --pending: %q", out)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		start := time.Now()
		r := c.run("", "erasures", "resume", id)
		out := r.out
		if r.code != 0 {
			t.Fatalf("erasures resume: exit %d\n%s%s", r.code, r.out, r.errOut)
		}
		// The second pass comes SSO_ERASURE_SETTLE (10 s or more) after the first: a resume
		// that waited for it says what it waits for.
		if time.Since(start) > 3*time.Second && !strings.Contains(r.errOut, "waiting until erasure "+id+" can go on at ") {
			t.Errorf("erasures resume waited %s silently: stderr %q", time.Since(start).Round(time.Second), r.errOut)
		}
		if strings.Contains(out, id) && strings.Contains(out, "left: keycloak\t") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("erasures resume: %q, want the erasure with only keycloak left", out)
		}
	}
	if out := c.ok("erasures", "list", "--pending"); !strings.Contains(out, id) || !strings.Contains(out, "left: keycloak\t") {
		t.Fatalf("erasures list --pending after the resume: %q", out)
	}
	if r := c.fails(exitNotFound, "erasures", "resume", "00000000-0000-0000-0000-00000000dead"); !strings.Contains(r.errOut, "not found") {
		t.Errorf("erasures resume of an unknown erasure: %q", r.errOut)
	}
	c.fails(exitUsage, "erasures", "resume")
}
