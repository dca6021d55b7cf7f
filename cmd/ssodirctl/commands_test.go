package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/servicetest"
)

func TestUsersGroupsAndTenants(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))

	if out := c.ok("tenants", "create", "eu"); !strings.Contains(out, "active") {
		t.Fatalf("tenants create: %q", out)
	}
	c.ok("tenants", "create", "eu") // the same settings again: nothing changes
	tn := decodeJSON[client.Tenant](t, c.ok("tenants", "get", "eu", "-o", "json"))
	if tn.TenantID != "eu" || tn.Status != "active" {
		t.Fatalf("tenant %+v", tn)
	}
	kcArgs := []string{"tenants", "set-keycloak", "eu", "--keycloak-url", "https://sso.example.com", "--keycloak-realm", "eu", "--keycloak-client-id", "ssodir"}
	if r := c.fails(exitUsage, kcArgs...); !strings.Contains(r.errOut, "SSODIR_KEYCLOAK_CLIENT_SECRET") {
		t.Fatalf("without a secret: %q", r.errOut)
	}
	c.env["SSODIR_KEYCLOAK_CLIENT_SECRET"] = "s3cret"
	if tn := decodeJSON[client.Tenant](t, c.ok(append(kcArgs, "-o", "json")...)); tn.Keycloak == nil || tn.Keycloak.Realm != "eu" || tn.Keycloak.ClientSecret != "" {
		t.Fatalf("set-keycloak: %+v", tn)
	}
	c.fails(exitConflict, "tenants", "create", "eu") // now there with other settings

	c.ok("tenants", "create", "us")
	listed := c.ok("tenants", "list", "-o", "json")
	if strings.Contains(listed, "s3cret") {
		t.Fatalf("tenants list shows the client secret: %s", listed)
	}
	tenants := decodeJSON[[]client.Tenant](t, listed)
	if len(tenants) != 2 || tenants[0].TenantID != "eu" || tenants[1].TenantID != "us" ||
		tenants[0].Keycloak == nil || tenants[0].Keycloak.Realm != "eu" || tenants[1].Status != "active" {
		t.Fatalf("tenants list: %+v", tenants)
	}
	var ys []map[string]any
	if err := yaml.Unmarshal([]byte(c.ok("tenants", "list", "-o", "yaml", "--max", "1")), &ys); err != nil || len(ys) != 1 || ys[0]["tenant_id"] != "eu" {
		t.Fatalf("tenants list yaml --max 1: %v %v", ys, err)
	}
	if lines := strings.Split(strings.TrimSpace(c.ok("tenants", "list")), "\n"); len(lines) != 3 || !strings.Contains(lines[0], "TENANT") ||
		!strings.Contains(lines[1], "eu") || !strings.Contains(lines[2], "us") {
		t.Fatalf("tenants list table: %q", lines)
	}
	c.fails(exitUsage, "tenants", "list", "extra")

	u := decodeJSON[client.User](t, c.ok("users", "create", "JDoe", "--email", "jdoe@example.com", "--first-name", "Jane",
		"--last-name", "Doe", "--attr", "dept=eng", "--attr", "dept=ops", "-o", "json"))
	if u.Username != "jdoe" || u.Version != 1 || !slices.Equal(u.Attributes["dept"], []string{"eng", "ops"}) {
		t.Fatalf("created %+v", u)
	}
	r := c.fails(exitConflict, "users", "create", "jane", "--email", "JDOE@example.com")
	if !strings.Contains(r.errOut, "email_taken") {
		t.Fatalf("stderr %q", r.errOut)
	}
	if r := c.fails(exitUsage, "users", "create", "bad name!"); !strings.Contains(r.errOut, "username") {
		t.Fatalf("stderr %q", r.errOut)
	}
	c.fails(exitNotFound, "users", "get", "nobody")
	c.fails(exitUsage, "users", "get")
	c.fails(exitUsage, "users", "list", "-o", "xml")
	c.fails(exitUsage, "users", "frobnicate", "jdoe")

	var y map[string]any
	if err := yaml.Unmarshal([]byte(c.ok("users", "get", "jdoe", "-o", "yaml", "--min-version", "1")), &y); err != nil || y["username"] != "jdoe" || y["first_name"] != "Jane" {
		t.Fatalf("yaml %v %v", y, err)
	}
	table := c.ok("users", "get", "jdoe")
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "USERNAME") || !strings.Contains(lines[1], "jdoe@example.com") {
		t.Fatalf("table %q", table)
	}

	c.fails(exitConflict, "users", "update", "jdoe", "--last-name", "Dough", "--if-match", "9")
	u = decodeJSON[client.User](t, c.ok("users", "update", "jdoe", "--last-name", "Dough", "--if-match", "1", "-o", "json"))
	if u.LastName != "Dough" || u.Version != 2 || len(u.Attributes) != 1 {
		t.Fatalf("updated %+v", u)
	}
	c.fails(exitUsage, "users", "update", "jdoe")
	u = decodeJSON[client.User](t, c.ok("users", "deactivate", "jdoe", "-o", "json"))
	if u.IsActive || u.Version != 3 {
		t.Fatalf("deactivated %+v", u)
	}
	u = decodeJSON[client.User](t, c.ok("users", "activate", "jdoe", "-o", "json"))
	if !u.IsActive || u.Version != 4 {
		t.Fatalf("activated %+v", u)
	}
	if r := c.run("correct horse battery\n", "users", "set-password", "jdoe"); r.code != 0 || !strings.Contains(r.out, "version 5") {
		t.Fatalf("set-password: %+v", r)
	}
	if r := c.run("short\n", "users", "set-password", "jdoe"); r.code != exitUsage || !strings.Contains(r.errOut, "password") {
		t.Fatalf("short password: %+v", r)
	}
	if r := c.run("", "users", "set-password", "jdoe"); r.code != exitUsage || !strings.Contains(r.errOut, "no password") {
		t.Fatalf("no password: %+v", r)
	}
	if r := c.run("s3cret-s3cret\n", "users", "create", "asmith", "--email", "asmith@example.com", "--last-name", "Smith", "--password"); r.code != 0 {
		t.Fatalf("create with a password: %+v", r)
	}
	c.ok("users", "create", "bsmith", "--last-name", "Smith", "--inactive")

	c.ok("groups", "create", "Site Admins", "--description", "people who run the site")
	c.fails(exitConflict, "groups", "create", "site admins")
	g := decodeJSON[client.Group](t, c.ok("groups", "update", "site admins", "--description", "the admins", "-o", "json"))
	if g.Description != "the admins" || g.Name != "Site Admins" {
		t.Fatalf("group %+v", g)
	}
	// Several users are one command each way: versions 3 and 4; an unknown user refuses
	// the whole change, naming it.
	if r := c.run("", "groups", "members", "add", "Site Admins", "jdoe", "nobody", "bsmith"); r.code != exitNotFound || !strings.Contains(r.errOut, "no user nobody") {
		t.Fatalf("add with an unknown user: %+v", r)
	}
	if out := c.ok("groups", "members", "add", "Site Admins", "jdoe", "asmith", "bsmith"); !strings.Contains(out, "group version 3") {
		t.Fatalf("members add: %q", out)
	}
	c.ok("groups", "members", "remove", "Site Admins", "bsmith")
	c.ok("groups", "get", "Site Admins", "--min-version", "4")
	// Each waited for the group's view, which a membership change reaches only with its
	// memberships: the list shows them at once.
	members := decodeJSON[[]client.User](t, c.ok("groups", "members", "list", "site admins", "-o", "json"))
	if len(members) != 2 || members[0].Username != "asmith" || members[1].Username != "jdoe" {
		t.Fatalf("members %+v", members)
	}
	groups := decodeJSON[[]client.Group](t, c.ok("users", "groups", "jdoe", "-o", "json"))
	if len(groups) != 1 || groups[0].Name != "Site Admins" {
		t.Fatalf("groups %+v", groups)
	}
	smiths := decodeJSON[[]client.User](t, c.ok("users", "list", "--last-name-prefix", "smi", "-o", "json"))
	if len(smiths) != 2 || smiths[0].Username != "asmith" || smiths[1].IsActive {
		t.Fatalf("smiths %+v", smiths)
	}
	if bs := decodeJSON[[]client.User](t, c.ok("users", "list", "--username-prefix", "B", "-o", "json")); len(bs) != 1 || bs[0].Username != "bsmith" {
		t.Fatalf("by username prefix %+v", bs)
	}
	all := decodeJSON[[]client.User](t, c.ok("users", "list", "--oldest-first", "-o", "json"))
	if len(all) != 3 || all[0].Username != "jdoe" {
		t.Fatalf("all %+v", all)
	}
	if two := decodeJSON[[]client.User](t, c.ok("users", "list", "--max", "2", "-o", "json")); len(two) != 2 {
		t.Fatalf("--max 2: %d", len(two))
	}
	if found := decodeJSON[[]client.User](t, c.ok("users", "list", "--email", "ASMITH@example.com", "-o", "json")); len(found) != 1 || found[0].Username != "asmith" {
		t.Fatalf("by email %+v", found)
	}
	if list := c.ok("groups", "list"); !strings.Contains(list, "Site Admins") {
		t.Fatalf("groups list %q", list)
	}

	// Newest first: jdoe's joining Site Admins (the group's change, in jdoe's feed too,
	// written after the group's view), then jdoe's own.
	var acts []client.Activity
	eventually(t, "jdoe's feed", func() bool {
		acts = decodeJSON[[]client.Activity](t, c.ok("users", "activity", "jdoe", "-o", "json"))
		return len(acts) == 6
	})
	var types []string
	for _, a := range acts {
		types = append(types, a.Type)
	}
	if want := []string{"group.member_added", "user.password_changed", "user.activated", "user.deactivated", "user.updated", "user.created"}; !slices.Equal(types, want) {
		t.Fatalf("activity %v", types)
	}
	if gacts := decodeJSON[[]client.Activity](t, c.ok("groups", "activity", "site admins", "--max", "1", "-o", "json")); len(gacts) != 1 || gacts[0].Type != "group.member_removed" {
		t.Fatalf("group activity %+v", gacts)
	}
	if byActor := decodeJSON[[]client.Activity](t, c.ok("activity", "--actor", "bootstrap", "--max", "0", "-o", "json")); len(byActor) < 12 {
		t.Fatalf("by actor: %d", len(byActor))
	}
	c.fails(exitUsage, "activity")

	c.fails(exitConflict, "users", "delete", "jdoe", "--if-match", "1")
	c.ok("users", "delete", "jdoe")
	c.fails(exitNotFound, "users", "delete", "jdoe")
	c.ok("groups", "delete", "Site Admins")
	c.fails(exitNotFound, "groups", "get", "site admins", "--min-version", "5")
}

func TestConfigurationAndHelp(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c := newCtl(t, s)
	if out := c.ok("--help"); !strings.Contains(out, "Exit codes") || !strings.Contains(out, "SSODIR_TOKEN") {
		t.Fatalf("help %q", out)
	}
	if out := c.ok("import", "users", "--help"); !strings.Contains(out, "Examples:") || !strings.Contains(out, "--skip-invalid") {
		t.Fatalf("import users help %q", out)
	}
	c.ok("tenants", "create", "eu")

	// Flags win over the environment.
	c.fails(exitNotFound, "users", "get", "x", "--tenant", "other")
	// A token from a file, instead of the environment.
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(servicetest.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	delete(c.env, "SSODIR_TOKEN")
	if r := c.run("", "users", "list"); r.code != exitUsage || !strings.Contains(r.errOut, "no token") {
		t.Fatalf("without a token: %+v", r)
	}
	c.env["SSODIR_TOKEN_FILE"] = file
	c.ok("users", "list")
	c.env["SSODIR_TOKEN_FILE"] = ""
	c.env["SSODIR_TOKEN"] = "wrong"
	if r := c.run("", "users", "list"); r.code != exitFailure || !strings.Contains(r.errOut, "unauthorized") {
		t.Fatalf("a wrong token: %+v", r)
	}
	c.env["SSODIR_TOKEN"] = servicetest.Token
	delete(c.env, "SSODIR_TENANT")
	if r := c.run("", "users", "list"); r.code != exitUsage || !strings.Contains(r.errOut, "which tenant") {
		t.Fatalf("without a tenant: %+v", r)
	}
}
