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
