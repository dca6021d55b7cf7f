package projector

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/expiry"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestExpiryProjectsAndReplays: memberships with an expiry (added alone and in bulk,
// renewed) show it in the read model; the scheduler's removal shows in the views and in
// the member's own feed as system:expiry's; and a replay of the log rebuilds the same.
func TestExpiryProjectsAndReplays(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	annAt, bobAt, bobRenewed, carlAt := now.Add(time.Hour), now.Add(time.Hour), now.Add(3*time.Hour), now.Add(5*time.Hour)
	f.run(t, commands.CreateUser{Username: "ann"}, commands.CreateUser{Username: "bob"}, commands.CreateUser{Username: "carl"},
		commands.CreateGroup{Name: "Ops"},
		commands.AddMember{Group: "ops", Username: "ann", Expiry: &commands.ExpiryChange{At: &annAt}},
		commands.AddMember{Group: "ops", Username: "bob", Expiry: &commands.ExpiryChange{At: &bobAt}},
		commands.AddMember{Group: "ops", Username: "bob", Expiry: &commands.ExpiryChange{At: &bobRenewed}},
		commands.ChangeMembers{Group: "ops", Add: []string{"carl"}, Expires: map[string]time.Time{"carl": carlAt}})
	later := func() time.Time { return now.Add(90 * time.Minute) }
	store := f.deps.Store.(*dynamo.CommandStore)
	s := &expiry.Scheduler{Due: dynamo.NewExpiries(f.db, dynamo.Names{Prefix: prefixOf(f.row.CommandsTable)}), Find: store, Now: later,
		Remove: commands.NewRemoveMemberHandler(commands.Deps{Store: store, Now: later, NewID: uuid.NewString})}
	if res, err := s.Sweep(ctx); err != nil || res.Done != 2 {
		t.Fatalf("sweep = %+v, %v; want ann's and bob's first entries done", res, err)
	}

	live := projections.Tables{Users: dynamotest.UniqueName("live-users"), Activities: dynamotest.UniqueName("live-activities")}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(live.Users), dynamo.ActivitiesTable(live.Activities)} {
		if err := dynamo.EnsureTable(ctx, f.db, spec); err != nil {
			t.Fatal(err)
		}
	}
	log := f.log(t)
	for _, it := range log {
		if !dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
			continue
		}
		e, err := dynamo.DecodeRecord(f.reg, it)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.projector.Apply(ctx, live, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := f.replayer.applyPage(ctx, f.row, f.next, log, &checklist{}, &sync.Map{}); err != nil {
		t.Fatal(err)
	}

	members := func(table string) map[string]projections.MembershipView {
		out, err := f.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		ms := map[string]projections.MembershipView{}
		for _, it := range out.Items {
			if !dynamo.IsMemberSK(dynamo.StringAttr(it, "sk")) {
				continue
			}
			var m projections.MembershipView
			if err := attributevalue.UnmarshalMap(it, &m); err != nil {
				t.Fatal(err)
			}
			ms[m.Username] = m
		}
		return ms
	}
	for name, ms := range map[string]map[string]projections.MembershipView{"live": members(live.Users), "replayed": members(f.next.Users)} {
		if m := ms["ann"]; !m.IsDeleted {
			t.Errorf("%s: ann's membership %+v, want removed by the expiry", name, m)
		}
		if m := ms["bob"]; m.IsDeleted || m.ExpiresAt != dynamo.FormatTime(bobRenewed) {
			t.Errorf("%s: bob's membership %+v, want live until %s", name, m, dynamo.FormatTime(bobRenewed))
		}
		if m := ms["carl"]; m.IsDeleted || m.ExpiresAt != dynamo.FormatTime(carlAt) {
			t.Errorf("%s: carl's membership %+v, want live until %s", name, m, dynamo.FormatTime(carlAt))
		}
	}
	liveMs, replayed := members(live.Users), members(f.next.Users)
	for u, m := range liveMs {
		r := replayed[u]
		if fmt.Sprint(m.IsDeleted, m.ExpiresAt, m.AddedAt, m.MembershipRev) != fmt.Sprint(r.IsDeleted, r.ExpiresAt, r.AddedAt, r.MembershipRev) {
			t.Errorf("%s: live %+v, replayed %+v", u, m, r)
		}
	}

	// ann's own feed shows the removal, by system:expiry.
	for _, table := range []string{live.Activities, f.next.Activities} {
		out, err := f.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :p"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK("user:ann")}}})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, it := range out.Items {
			if dynamo.StringAttr(it, "type") == "group.member_removed" && dynamo.StringAttr(it, "actor") == expiry.Actor {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: ann's feed has no removal by %s", table, expiry.Actor)
		}
	}
}

// prefixOf is the table prefix of a tenant's write table named by dynamo.Names.Commands.
func prefixOf(commandsTable string) string {
	suffix := "_s_t_user_commands"
	return commandsTable[:len(commandsTable)-len(suffix)]
}
