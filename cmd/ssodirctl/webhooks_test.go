package main

import (
	"strings"
	"testing"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// TestWebhooks registers, lists, inspects, rotates, replays and deletes an endpoint with
// ssodirctl against the real services.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c := newCtl(t, s)
	c.ok("tenants", "create", "eu")
	made := decodeJSON[client.Webhook](t, c.ok("webhooks", "create", "http://127.0.0.1:9/hook", "--type", "user.created", "-o", "json"))
	if made.ID == "" || !strings.HasPrefix(made.Secret, "whsec_") || len(made.Types) != 1 {
		t.Fatalf("created %+v", made)
	}
	table := c.run("", "webhooks", "create", "http://127.0.0.1:9/other")
	if table.code != 0 || !strings.Contains(table.out, "whsec_") || !strings.Contains(table.errOut, "shown this once") {
		t.Fatalf("table output: %+v", table)
	}
	listed := c.ok("webhooks", "list", "-o", "json")
	if strings.Contains(listed, "whsec_") || strings.Count(listed, `"id"`) != 2 {
		t.Fatalf("list: %s", listed)
	}
	rotated := decodeJSON[client.Webhook](t, c.ok("webhooks", "rotate-secret", made.ID, "-o", "json"))
	if rotated.Secret == made.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") {
		t.Fatalf("rotated %+v", rotated)
	}
	c.ok("webhooks", "deliveries", made.ID)
	if out := c.ok("webhooks", "replay", made.ID); !strings.Contains(out, "active") {
		t.Fatalf("replay: %q", out)
	}
	c.ok("webhooks", "delete", made.ID)
	c.fails(exitNotFound, "webhooks", "delete", made.ID)
	c.fails(exitUsage, "webhooks", "create", "ftp://example.com/")
}
