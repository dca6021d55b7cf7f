package projector

import (
	"testing"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestReplayRebuildsARename: a replay's page over a log with a rename (the old name's
// tombstone has no history record of its own) builds the person under the new name with
// its memberships, the old name a tombstone, and passes the verification against the log.
func TestReplayRebuildsARename(t *testing.T) {
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "alice", Email: "alice@example.com"}, commands.CreateGroup{Name: "g"},
		commands.AddMember{Group: "g", Username: "alice"}, commands.RenameUser{Username: "alice", NewUsername: "alice.b"},
		commands.CreateUser{Username: "alice", Email: "other@example.com"})
	f.replayAndVerify(t, "a rename")
	renamed, err := projections.DecodeUser(f.nextItem(t, dynamo.UserID("alice.b"), dynamo.SKConfig))
	if err != nil || renamed.IsDeleted || renamed.Version != 2 || len(renamed.FormerNames) != 1 || renamed.FormerNames[0].Username != "alice" {
		t.Fatalf("alice.b in the new table: %+v (%v)", renamed, err)
	}
	again, err := projections.DecodeUser(f.nextItem(t, dynamo.UserID("alice"), dynamo.SKConfig))
	if err != nil || again.IsDeleted || again.Version != 3 || again.UserID == renamed.UserID {
		t.Fatalf("the new alice in the new table: %+v (%v)", again, err)
	}
	if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID("g"), dynamo.MemberSK("alice.b"))); err != nil || m.IsDeleted || m.MemberID != "alice.b" {
		t.Errorf("alice.b's membership: %+v (%v)", m, err)
	}
	if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID("g"), dynamo.MemberSK("alice"))); err != nil || !m.IsDeleted {
		t.Errorf("the old name's membership: %+v (%v), want a tombstone", m, err)
	}
}
