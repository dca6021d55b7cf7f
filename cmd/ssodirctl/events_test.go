package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// tailed runs `events tail` with args and returns the changes it printed and the cursor
// it left on stderr.
func tailed(t *testing.T, c *ctl, args ...string) ([]client.Event, string) {
	t.Helper()
	r := c.run("", append([]string{"events", "tail", "--no-follow"}, args...)...)
	if r.code != 0 {
		t.Fatalf("events tail: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	var evs []client.Event
	for line := range strings.Lines(r.out) {
		var ev client.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("a line of events tail: %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	cursor, ok := strings.CutPrefix(strings.TrimSpace(r.errOut), "cursor: ")
	if !ok || cursor == "" {
		t.Fatalf("events tail left no cursor: %q", r.errOut)
	}
	return evs, cursor
}

func TestEventsTailResumesFromItsCursor(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	c.ok("users", "create", "ann", "--email", "ann@example.com")
	c.ok("users", "create", "bob", "--email", "bob@example.com")

	var evs []client.Event
	var cursor string
	eventually(t, "both creates in the feed", func() bool {
		evs, cursor = tailed(t, c, "--max", "2")
		return len(evs) == 2
	})
	if evs[0].Subject != "user:ann" || evs[1].Subject != "user:bob" || evs[0].Type != "io.ssodir.user.created" {
		t.Fatalf("tail printed %+v", evs)
	}
	// --max 1 stops after ann; its cursor goes on with bob, exactly.
	_, afterAnn := tailed(t, c, "--max", "1")
	if got, _ := tailed(t, c, "--from", afterAnn); len(got) != 1 || got[0].Subject != "user:bob" {
		t.Fatalf("tail --from ann's cursor printed %+v, want bob's create", got)
	}
	c.ok("users", "deactivate", "ann")
	eventually(t, "the deactivation in the feed", func() bool {
		got, _ := tailed(t, c, "--from", cursor)
		return len(got) == 1 && got[0].Type == "io.ssodir.user.deactivated" && got[0].Data.Version == 2
	})
	if r := c.run("", "events", "tail", "--no-follow", "--from", "not-a-cursor"); r.code == 0 || !strings.Contains(r.errOut, "after") {
		t.Errorf("a made-up cursor: exit %d, %q", r.code, r.errOut)
	}
}
