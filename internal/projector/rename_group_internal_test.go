package projector

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestReplayRebuildsAGroupRename: a replay's page over a log with a group rename (the old
// key's tombstone has no history record of its own) builds the group under the new name
// with its memberships, the old key a tombstone whose memberships are tombstones, and
// passes the verification against the log.
func TestReplayRebuildsAGroupRename(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "alice", Email: "alice@example.com"}, commands.CreateUser{Username: "bob"},
		commands.CreateGroup{Name: "g"}, commands.AddMember{Group: "g", Username: "alice"},
		commands.AddMember{Group: "g", Username: "bob"}, commands.RenameGroup{Name: "g", NewName: "Team G"},
		commands.ChangeMembers{Group: "team g", Remove: []string{"bob"}}, commands.CreateGroup{Name: "g"})
	list := &checklist{}
	if _, _, err := f.replayer.applyPage(ctx, f.row, f.next, f.log(t), list, &sync.Map{}); err != nil {
		t.Fatal(err)
	}
	opts := ReplayOptions{Workers: 2, verifyPause: time.Millisecond}
	rep := &ReplayReport{}
	if err := f.replayer.verify(ctx, f.row, f.next, rep, opts, list, 1, nil); err != nil {
		t.Fatalf("verification after a group rename: %v %v", err, rep.Mismatches)
	}
	get := func(id, sk string) map[string]types.AttributeValue {
		out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.next.Users), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	renamed, err := projections.DecodeGroup(get(dynamo.GroupID("team g"), dynamo.SKConfig))
	if err != nil || renamed.IsDeleted || renamed.Name != "Team G" || renamed.Version != 5 || len(renamed.FormerNames) != 1 || renamed.FormerNames[0].Key != "g" {
		t.Fatalf("team g in the new table: %+v (%v)", renamed, err)
	}
	again, err := projections.DecodeGroup(get(dynamo.GroupID("g"), dynamo.SKConfig))
	if err != nil || again.IsDeleted || again.Version != 5 || again.GroupID == renamed.GroupID {
		t.Fatalf("the new g in the new table: %+v (%v)", again, err)
	}
	if m, err := projections.DecodeMembership(get(dynamo.GroupID("team g"), dynamo.MemberSK("alice"))); err != nil || m.IsDeleted || m.GroupName != "Team G" {
		t.Errorf("alice's membership of team g: %+v (%v)", m, err)
	}
	if m, err := projections.DecodeMembership(get(dynamo.GroupID("team g"), dynamo.MemberSK("bob"))); err != nil || !m.IsDeleted {
		t.Errorf("bob's membership of team g: %+v (%v), want a tombstone", m, err)
	}
	for _, u := range []string{"alice", "bob"} {
		if m, err := projections.DecodeMembership(get(dynamo.GroupID("g"), dynamo.MemberSK(u))); err != nil || !m.IsDeleted {
			t.Errorf("%s's membership of the old name: %+v (%v), want a tombstone", u, m, err)
		}
	}
}
