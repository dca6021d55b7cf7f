package main

import (
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// TestMembersAddExpiresAt: --expires-at on members add sets the expiry of one member (PUT)
// and of several (a members change), and members list shows it.
func TestMembersAddExpiresAt(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	for _, u := range []string{"ann", "bob", "cid"} {
		c.ok("users", "create", u)
	}
	c.ok("groups", "create", "Ops")
	at := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	c.fails(exitUsage, "groups", "members", "add", "ops", "ann", "--expires-at", "soon")
	c.ok("groups", "members", "add", "ops", "ann", "--expires-at", at.Format(time.RFC3339))
	c.ok("groups", "members", "add", "ops", "bob", "cid", "--expires-at", at.Add(time.Hour).Format(time.RFC3339))
	c.ok("groups", "get", "ops", "--min-version", "3")
	members := decodeJSON[[]client.User](t, c.ok("groups", "members", "list", "ops", "-o", "json"))
	want := map[string]string{"ann": dynamo.FormatTime(at), "bob": dynamo.FormatTime(at.Add(time.Hour)), "cid": dynamo.FormatTime(at.Add(time.Hour))}
	if len(members) != 3 {
		t.Fatalf("members %+v", members)
	}
	for _, m := range members {
		if m.ExpiresAt != want[m.Username] {
			t.Errorf("%s expires at %q, want %q", m.Username, m.ExpiresAt, want[m.Username])
		}
	}
}

// TestImportUsersExpiresAt: import users --expires-at adds the file's memberships (members
// changes) each ending at that instant, in every group the lines name; an instant that is
// not RFC 3339, or is past, is a usage error before anything is written.
func TestImportUsersExpiresAt(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	file := writeFile(t, "people.csv", "username,groups\nann,Ops;Dev\nbob,Ops\n")
	c.fails(exitUsage, "import", "users", file, "--expires-at", "soon")
	c.fails(exitUsage, "import", "users", file, "--expires-at", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	if users := decodeJSON[[]client.User](t, c.ok("users", "list", "-o", "json")); len(users) != 0 {
		t.Fatalf("a refused import wrote users: %+v", users)
	}
	at := time.Now().Add(72 * time.Hour).UTC().Truncate(time.Second)
	c.ok("import", "users", file, "--expires-at", at.Format(time.RFC3339))
	want := dynamo.FormatTime(at)
	for group, n := range map[string]int{"ops": 2, "dev": 1} {
		members := decodeJSON[[]client.User](t, c.ok("groups", "members", "list", group, "-o", "json"))
		if len(members) != n {
			t.Fatalf("%s members %+v, want %d", group, members, n)
		}
		for _, m := range members {
			if m.ExpiresAt != want {
				t.Errorf("%s: %s expires at %q, want %q", group, m.Username, m.ExpiresAt, want)
			}
		}
	}
}
