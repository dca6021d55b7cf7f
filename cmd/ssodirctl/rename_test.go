package main

import (
	"strings"
	"testing"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// TestUsersRename renames a user through the real services: the same person under the
// new name, a stale --if-match and a taken name refused, an Idempotency-Key retried once,
// the old name gone and its memberships following the person.
func TestUsersRename(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	ann := decodeJSON[client.User](t, c.ok("users", "create", "ann", "--email", "ann@example.com", "-o", "json"))
	c.ok("users", "create", "bob")
	c.ok("groups", "create", "staff")
	c.ok("groups", "members", "add", "staff", "ann")

	c.fails(exitConflict, "users", "rename", "ann", "bob")
	c.fails(exitConflict, "users", "rename", "ann", "ann.smith", "--if-match", "9")
	c.fails(exitNotFound, "users", "rename", "nobody", "ann.smith")
	c.fails(exitUsage, "users", "rename", "ann")

	args := []string{"users", "rename", "ann", "ann.smith", "--if-match", "1", "--idempotency-key", "rename-ann", "-o", "json"}
	u := decodeJSON[client.User](t, c.ok(args...))
	if u.ID != ann.ID || u.Username != "ann.smith" || u.Version != 2 || u.Email != "ann@example.com" {
		t.Fatalf("renamed %+v, want ann's id %s as ann.smith v2", u, ann.ID)
	}
	if again := decodeJSON[client.User](t, c.ok(args...)); again.Version != 2 || again.Username != "ann.smith" {
		t.Fatalf("the same request again: %+v, want the first answer", again)
	}
	c.fails(exitNotFound, "users", "get", "ann")
	if got := decodeJSON[client.User](t, c.ok("users", "get", "ann.smith", "--min-version", "2", "-o", "json")); got.ID != ann.ID {
		t.Fatalf("get the new name: %+v", got)
	}
	eventually(t, "ann.smith is a member of staff, and ann of nothing", func() bool {
		return strings.Contains(c.ok("users", "groups", "ann.smith"), "staff") &&
			!strings.Contains(c.ok("groups", "members", "list", "staff"), "ann\n")
	})
}

// TestGroupsRename renames a group through the real services: the same group under the
// new name, a stale --if-match and a taken name refused, an Idempotency-Key retried once,
// the old name gone and the members following the group.
func TestGroupsRename(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	c.ok("users", "create", "ann")
	staff := decodeJSON[client.Group](t, c.ok("groups", "create", "staff", "-o", "json"))
	c.ok("groups", "create", "ops")
	c.ok("groups", "members", "add", "staff", "ann")

	c.fails(exitConflict, "groups", "rename", "staff", "OPS")
	c.fails(exitConflict, "groups", "rename", "staff", "crew", "--if-match", "9")
	c.fails(exitNotFound, "groups", "rename", "nobody", "crew")
	c.fails(exitUsage, "groups", "rename", "staff")

	args := []string{"groups", "rename", "staff", "Crew", "--if-match", "2", "--idempotency-key", "rename-staff", "-o", "json"}
	g := decodeJSON[client.Group](t, c.ok(args...))
	if g.ID != staff.ID || g.Name != "Crew" || g.Version != 3 {
		t.Fatalf("renamed %+v, want staff's id %s as Crew v3", g, staff.ID)
	}
	if again := decodeJSON[client.Group](t, c.ok(args...)); again.Version != 3 || again.Name != "Crew" {
		t.Fatalf("the same request again: %+v, want the first answer", again)
	}
	c.fails(exitNotFound, "groups", "get", "staff")
	if got := decodeJSON[client.Group](t, c.ok("groups", "get", "crew", "--min-version", "3", "-o", "json")); got.ID != staff.ID {
		t.Fatalf("get the new name: %+v", got)
	}
	eventually(t, "ann is a member of Crew, found by its new name", func() bool {
		return strings.Contains(c.ok("users", "groups", "ann"), "Crew") &&
			strings.Contains(c.ok("groups", "members", "list", "crew"), "ann")
	})
}
