package erasure

import (
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

func TestRewriteHistoryItemNamesAnErasedMemberOnly(t *testing.T) {
	reg := events.NewRegistry()
	at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	g := events.Group{ID: "gid", Key: "g", Name: "G", Version: 4, CreatedAt: at, UpdatedAt: at}
	cases := []struct {
		name    string
		payload events.Payload
		changes map[string]events.Change
		changed bool
		keeps   string // a value that must stay
	}{
		{"a member added is erased", &events.GroupMemberAdded{Group: g, Username: "zed", UserID: "uid-zed", MembershipRev: 3},
			map[string]events.Change{"member": {New: "zed"}}, true, `"name":"G"`},
		{"a member removed is erased", &events.GroupMemberRemoved{Group: g, Username: "zed", UserID: "uid-zed"},
			map[string]events.Change{"member": {Old: "zed"}}, true, `"version":4`},
		{"only the erased one of a members change", &events.GroupMembersChanged{Group: g,
			Added:   []events.Member{{Username: "amy", UserID: "uid-amy", MembershipRev: 1}, {Username: "zed", UserID: "uid-zed", MembershipRev: 2}},
			Removed: []events.Member{{Username: "zed2", UserID: "uid-zed"}}},
			map[string]events.Change{"members_added": {New: 2}}, true, `"username":"amy"`},
		{"only the erased one of a group rename", &events.GroupRenamed{Group: g, PreviousName: "Old", PreviousKey: "old", PreviousVersion: 3,
			Members: []events.RenamedMember{{Username: "amy", UserID: "uid-amy", MembershipRev: 1, AddedAt: at}, {Username: "zed", UserID: "uid-zed", MembershipRev: 2, AddedAt: at}}},
			map[string]events.Change{"name": {Old: "Old", New: "G"}}, true, `"username":"amy"`},
		{"a member whose expiry moved is erased", &events.GroupMemberExpirySet{Group: g, Username: "zed", UserID: "uid-zed", MembershipRev: 3,
			AddedAt: at, ExpiresAt: &at},
			map[string]events.Change{"member": {Old: "zed", New: "zed"}, "expires_at": {New: at}}, true, `"name":"G"`},
		{"a record of another member is left alone", &events.GroupMemberAdded{Group: g, Username: "zedd", UserID: "uid-zedd", MembershipRev: 3},
			map[string]events.Change{"member": {New: "zedd"}}, false, `"zedd"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			item, err := dynamo.EncodeRecord(events.Envelope{EventID: "e", Type: c.payload.EventType(), SchemaVersion: events.SchemaVersion,
				Kind: events.KindGroup, Key: "g", Version: 4, OccurredAt: at, Changes: c.changes, Payload: c.payload}, at, 0)
			if err != nil {
				t.Fatal(err)
			}
			out, changed, err := RewriteHistoryItem(reg, item, NewSubject("zed", "uid-zed"))
			if err != nil {
				t.Fatal(err)
			}
			if changed != c.changed {
				t.Fatalf("changed %v, want %v", changed, c.changed)
			}
			text := attrS(out, "data") + " " + attrS(out, "changes")
			if c.changed && (strings.Contains(text, `"zed"`) || strings.Contains(text, "uid-zed") || !strings.Contains(text, `"erased":true`)) {
				t.Errorf("rewritten record still names the member or marks none erased: %s", text)
			}
			// A membership change keeps the hash of the member's id, which the as-of
			// index pairs the erased member's changes by (a replay's too).
			if _, rename := c.payload.(*events.GroupRenamed); c.changed && !rename && !strings.Contains(text, `"erased_id_hash":"`+identity.ErasedIDHash("uid-zed")+`"`) {
				t.Errorf("rewritten record lost the hash of the member's id: %s", text)
			}
			if !strings.Contains(text, c.keeps) {
				t.Errorf("rewritten record lost %s: %s", c.keeps, text)
			}
			// The record still decodes, at its version, with its type.
			env, err := dynamo.DecodeRecord(reg, out)
			if err != nil || env.Version != 4 || env.Type != c.payload.EventType() {
				t.Errorf("decoded %v v%d: %v", env.Type, env.Version, err)
			}
		})
	}
}

func TestScrubTextInAnyCase(t *testing.T) {
	s := NewSubject("zed.q", "0f6c")
	s.AddUser(events.User{Email: "Zed.Q@Example.org", FirstName: "Zedekiah", LastName: "Q"})
	got := s.ScrubText("sync user:ZED.Q failed: email zed.q@example.org taken (Zedekiah, Q)")
	if strings.Contains(strings.ToLower(got), "zed") || !strings.Contains(got, "(") {
		t.Errorf("scrubbed %q", got)
	}
}
