package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// TestScimTokens makes, lists and revokes a SCIM token with ssodirctl against the real
// services, and uses the token on the tenant's SCIM endpoint in between.
func TestScimTokens(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c := newCtl(t, s)
	c.ok("tenants", "create", "eu")
	made := decodeJSON[client.ScimToken](t, c.ok("scim-tokens", "create", "okta-prod", "--expires-in", "24h", "-o", "json"))
	if made.ID == "" || made.Name != "okta-prod" || !strings.HasPrefix(made.Token, "ssodir_scim.") || made.ExpiresAt == nil {
		t.Fatalf("created %+v", made)
	}
	scimGet := func() int {
		req, _ := http.NewRequest("GET", s.CommandURL+"/scim/v2/acme/eu/Users", nil)
		req.Header.Set("Authorization", "Bearer "+made.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := scimGet(); code != http.StatusOK {
		t.Fatalf("the new token: %d", code)
	}
	table := c.run("", "scim-tokens", "create", "entra")
	if table.code != 0 || !strings.Contains(table.out, "ssodir_scim.") || !strings.Contains(table.errOut, "shown this once") {
		t.Fatalf("table output: %+v", table)
	}
	listed := c.ok("scim-tokens", "list", "-o", "json")
	if strings.Contains(listed, made.Token) || strings.Count(listed, `"id"`) != 2 {
		t.Fatalf("list: %s", listed)
	}
	if out := c.ok("scim-tokens", "revoke", made.ID); !strings.Contains(out, "revoked") {
		t.Fatalf("revoke: %q", out)
	}
	if code := scimGet(); code != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %d", code)
	}
	c.fails(exitNotFound, "scim-tokens", "revoke", made.ID)

	// --print-token prints the token alone (SCIM_TOKEN=$(…)); revoke takes a unique name.
	printed := strings.TrimSpace(c.ok("scim-tokens", "create", "okta-local", "--print-token"))
	if !strings.HasPrefix(printed, "ssodir_scim.") || strings.ContainsAny(printed, " \n") {
		t.Fatalf("--print-token printed %q", printed)
	}
	if out := c.ok("scim-tokens", "revoke", "okta-local"); !strings.Contains(out, "okta-local") || !strings.Contains(out, "revoked") {
		t.Fatalf("revoke by name: %q", out)
	}
	c.ok("scim-tokens", "create", "twice")
	c.ok("scim-tokens", "create", "twice")
	if r := c.fails(exitUsage, "scim-tokens", "revoke", "twice"); !strings.Contains(r.errOut, "revoke one by its id") {
		t.Fatalf("revoke of an ambiguous name: %+v", r)
	}
	c.fails(exitUsage, "scim-tokens", "create", "x", "--expires-in", "1h", "--expires-at", "2030-01-01T00:00:00Z")
	c.fails(exitUsage, "scim-tokens", "create", "x", "--expires-at", "tomorrow")
}
