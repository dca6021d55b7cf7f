package projector_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestAnErasureTakesTheMembershipsInItsIncarnationsFeed: the user's feed holds, besides
// their own events, the group membership changes that concerned them, whose versions are
// the group's. Erasing the live incarnation of a name takes its membership items too
// (added in bulk, removed alone), and keeps the earlier person's (added alone) with the
// rest of their history — even where the group's versions are above the version the
// erased incarnation starts at.
func TestAnErasureTakesTheMembershipsInItsIncarnationsFeed(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	// The group's versions run ahead of ann's: every membership change is at version 5 or
	// more, and the incarnation erased starts at version 3.
	for _, d := range []string{"one", "two", "three"} {
		must(t, second(commands.NewUpdateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.UpdateGroup{Name: "g", Description: aws.String(d)}, w.meta())))
	}
	first, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "ann"}, w.meta())
	must(t, err)
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "ann"}, w.meta())))
	must(t, second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: "ann"}, w.meta())))
	last, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "ann"}, w.meta())
	must(t, err)
	must(t, second(commands.NewChangeMembersHandler(w.deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "g", Add: []string{"ann"}}, w.meta())))
	must(t, second(commands.NewRemoveMemberHandler(w.deps).Handle(ctx, w.tenant, commands.RemoveMember{Group: "g", Username: "ann"}, w.meta())))
	w.project(t)

	feed := func() []string {
		t.Helper()
		out, err := w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(w.row.ActivitiesTable), KeyConditionExpression: aws.String("pk = :p"),
			ConsistentRead:            aws.Bool(true),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK("user:ann")}}})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range out.Items {
			who := map[string]string{first.ID: " (first)", last.ID: " (last)"}[dynamo.StringAttr(it, "user_id")]
			got = append(got, dynamo.StringAttr(it, "type")+" "+dynamo.StringAttr(it, "entity")+" v"+
				it["version"].(*types.AttributeValueMemberN).Value+who)
		}
		return got
	}
	before := []string{"user.created user:ann v1", "group.member_added group:g v5 (first)", "user.deleted user:ann v2",
		"user.created user:ann v3", "group.member_added group:g v6 (last)", "group.member_removed group:g v7 (last)"}
	if got := feed(); !slices.Equal(got, before) {
		t.Fatalf("ann's feed before the erasure:\n got %v\nwant %v", got, before)
	}

	id := uuid.NewString()
	must(t, second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "ann", Reason: "a request", ErasureID: id}, w.meta())))
	w.project(t)
	if e, err := x.Ledger().Get(ctx, "s", "t", id); err != nil || e.Places[commands.PlaceActivities] != dynamo.ErasureStatusDone {
		t.Fatalf("the erasure: %+v, %v", e, err)
	}
	if got, want := feed(), before[:3]; !slices.Equal(got, want) {
		t.Errorf("ann's feed after the last incarnation's erasure:\n got %v\nwant %v (the earlier person's history, memberships included)", got, want)
	}
	out, err := w.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(w.row.ActivitiesTable), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		for k, v := range it {
			if s, ok := v.(*types.AttributeValueMemberS); ok && strings.Contains(s.Value, last.ID) {
				t.Errorf("the erased incarnation's id is left in %s of %s", k, dynamo.StringAttr(it, "pk"))
			}
		}
	}
}
