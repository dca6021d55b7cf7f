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

// TestReplayRebuildsARename: a replay's page over a log with a rename (the old name's
// tombstone has no history record of its own) builds the person under the new name with
// its memberships, the old name a tombstone, and passes the verification against the log.
func TestReplayRebuildsARename(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "alice", Email: "alice@example.com"}, commands.CreateGroup{Name: "g"},
		commands.AddMember{Group: "g", Username: "alice"}, commands.RenameUser{Username: "alice", NewUsername: "alice.b"},
		commands.CreateUser{Username: "alice", Email: "other@example.com"})
	list := &checklist{}
	if _, _, err := f.replayer.applyPage(ctx, f.row, f.next, f.log(t), list, &sync.Map{}); err != nil {
		t.Fatal(err)
	}
	opts := ReplayOptions{Workers: 2, verifyPause: time.Millisecond}
	rep := &ReplayReport{}
	if err := f.replayer.verify(ctx, f.row, f.next, rep, opts, list, 1, nil); err != nil {
		t.Fatalf("verification after a rename: %v %v", err, rep.Mismatches)
	}
	get := func(id, sk string) map[string]types.AttributeValue {
		out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.next.Users), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	renamed, err := projections.DecodeUser(get(dynamo.UserID("alice.b"), dynamo.SKConfig))
	if err != nil || renamed.IsDeleted || renamed.Version != 2 || len(renamed.FormerNames) != 1 || renamed.FormerNames[0].Username != "alice" {
		t.Fatalf("alice.b in the new table: %+v (%v)", renamed, err)
	}
	again, err := projections.DecodeUser(get(dynamo.UserID("alice"), dynamo.SKConfig))
	if err != nil || again.IsDeleted || again.Version != 3 || again.UserID == renamed.UserID {
		t.Fatalf("the new alice in the new table: %+v (%v)", again, err)
	}
	if m, err := projections.DecodeMembership(get(dynamo.GroupID("g"), dynamo.MemberSK("alice.b"))); err != nil || m.IsDeleted || m.MemberID != "alice.b" {
		t.Errorf("alice.b's membership: %+v (%v)", m, err)
	}
	if m, err := projections.DecodeMembership(get(dynamo.GroupID("g"), dynamo.MemberSK("alice"))); err != nil || !m.IsDeleted {
		t.Errorf("the old name's membership: %+v (%v), want a tombstone", m, err)
	}
}
