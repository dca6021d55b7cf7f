package projector

import (
	"testing"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestReplayRebuildsAGroupRename: a replay's page over a log with a group rename (the old
// key's tombstone has no history record of its own) builds the group under the new name
// with its memberships, the old key a tombstone whose memberships are tombstones, and
// passes the verification against the log.
func TestReplayRebuildsAGroupRename(t *testing.T) {
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "alice", Email: "alice@example.com"}, commands.CreateUser{Username: "bob"},
		commands.CreateGroup{Name: "g"}, commands.AddMember{Group: "g", Username: "alice"},
		commands.AddMember{Group: "g", Username: "bob"}, commands.RenameGroup{Name: "g", NewName: "Team G"},
		commands.ChangeMembers{Group: "team g", Remove: []string{"bob"}}, commands.CreateGroup{Name: "g"})
	f.replayAndVerify(t, "a group rename")
	renamed, err := projections.DecodeGroup(f.nextItem(t, dynamo.GroupID("team g"), dynamo.SKConfig))
	if err != nil || renamed.IsDeleted || renamed.Name != "Team G" || renamed.Version != 5 || len(renamed.FormerNames) != 1 || renamed.FormerNames[0].Key != "g" {
		t.Fatalf("team g in the new table: %+v (%v)", renamed, err)
	}
	again, err := projections.DecodeGroup(f.nextItem(t, dynamo.GroupID("g"), dynamo.SKConfig))
	if err != nil || again.IsDeleted || again.Version != 5 || again.GroupID == renamed.GroupID {
		t.Fatalf("the new g in the new table: %+v (%v)", again, err)
	}
	if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID("team g"), dynamo.MemberSK("alice"))); err != nil || m.IsDeleted || m.GroupName != "Team G" {
		t.Errorf("alice's membership of team g: %+v (%v)", m, err)
	}
	if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID("team g"), dynamo.MemberSK("bob"))); err != nil || !m.IsDeleted {
		t.Errorf("bob's membership of team g: %+v (%v), want a tombstone", m, err)
	}
	for _, u := range []string{"alice", "bob"} {
		if m, err := projections.DecodeMembership(f.nextItem(t, dynamo.GroupID("g"), dynamo.MemberSK(u))); err != nil || !m.IsDeleted {
			t.Errorf("%s's membership of the old name: %+v (%v), want a tombstone", u, m, err)
		}
	}
}
