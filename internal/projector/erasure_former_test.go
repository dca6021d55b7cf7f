package projector_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// TestAnErasureReachesWhatThePersonDidUnderAFormerName: olga joins groups (one by one and
// in bulk beside bob), is updated, is renamed petra, joins another group, and is erased
// as petra. No table names her by either name, id or value afterwards: not the history,
// tombstone, view and feed under the old name, not the groups' records and feed items
// naming the old name; bob and the groups' histories stay.
func TestAnErasureReachesWhatThePersonDidUnderAFormerName(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	olga, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "olga", Email: "olga.canary@example.org", FirstName: "Olgacanary"}, w.meta())
	must(t, err)
	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "bob"}, w.meta())))
	for _, g := range []string{"G", "H", "K"} {
		must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: g}, w.meta())))
	}
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "olga"}, w.meta())))
	must(t, second(commands.NewChangeMembersHandler(w.deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "h", Add: []string{"olga", "bob"}}, w.meta())))
	must(t, second(commands.NewUpdateUserHandler(w.deps).Handle(ctx, w.tenant, commands.UpdateUser{Username: "olga", LastName: strPtr("Olgalastcanary")}, w.meta())))
	must(t, second(commands.NewRenameUserHandler(w.deps).Handle(ctx, w.tenant, commands.RenameUser{Username: "olga", NewUsername: "petra"}, w.meta())))
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "k", Username: "petra"}, w.meta())))
	w.project(t)

	erasureID := uuid.NewString()
	must(t, second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "petra", Reason: "a request", ErasureID: erasureID}, w.meta())))
	w.project(t)
	if e, err := x.Ledger().Get(ctx, "s", "t", erasureID); err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
		t.Fatalf("the erasure: %+v, %v", e, err)
	}

	canaries := []string{`"olga"`, `\"olga\"`, "user#olga", "member#olga", "user:olga", `"petra"`, `\"petra\"`, "user#petra", "member#petra", "user:petra",
		olga.ID, "Olgacanary", "olga.canary", "Olgalastcanary"}
	bob := 0
	for _, table := range []string{w.row.CommandsTable, w.row.UsersTable, w.row.ActivitiesTable} {
		var start map[string]types.AttributeValue
		for {
			out, err := w.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), ExclusiveStartKey: start})
			must(t, err)
			for _, it := range out.Items {
				for attr, v := range it {
					sv, ok := v.(*types.AttributeValueMemberS)
					if !ok {
						continue
					}
					if strings.Contains(sv.Value, "bob") {
						bob++
					}
					for _, c := range canaries {
						if strings.Contains(`"`+sv.Value+`"`, c) {
							t.Errorf("%s: %s/%s %s still names the erased person (%s): %.200s", table, dynamo.StringAttr(it, "id")+dynamo.StringAttr(it, "pk"), dynamo.StringAttr(it, "sk"), attr, c, sv.Value)
						}
					}
				}
			}
			if start = out.LastEvaluatedKey; len(start) == 0 {
				break
			}
		}
	}
	if bob == 0 {
		t.Error("bob is gone too: the erasure took a bystander")
	}
	for _, g := range []string{"g", "h", "k"} {
		if v := w.get(t, w.row.CommandsTable, idsk("group#"+g, dynamo.HistorySK(2))); v == nil {
			t.Errorf("group %s's second record is gone: its history must keep its shape", g)
		}
	}
}

func strPtr(v string) *string { return &v }

// TestAnErasureUnderAFormerNameLeavesItsLaterHolderWhole: olga is renamed petra, and a
// new person takes the free name olga, joins the same group and is updated. Erasing
// petra erases the first olga's history under the name and leaves the new olga whole:
// write model, history, view, membership and feed.
func TestAnErasureUnderAFormerNameLeavesItsLaterHolderWhole(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	first, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "olga", FirstName: "Firstolga"}, w.meta())
	must(t, err)
	must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "olga"}, w.meta())))
	must(t, second(commands.NewRenameUserHandler(w.deps).Handle(ctx, w.tenant, commands.RenameUser{Username: "olga", NewUsername: "petra"}, w.meta())))
	later, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "olga", FirstName: "Laterolga"}, w.meta())
	must(t, err)
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "olga"}, w.meta())))
	must(t, second(commands.NewUpdateUserHandler(w.deps).Handle(ctx, w.tenant, commands.UpdateUser{Username: "olga", LastName: strPtr("Laterlast")}, w.meta())))
	w.project(t)

	// What the later olga has, before the erasure.
	laterItems := func() (history, feed int) {
		t.Helper()
		for _, q := range []struct{ table, pkName, pk string }{
			{w.row.CommandsTable, "id", "user#olga"}, {w.row.ActivitiesTable, "pk", "entity#user:olga"},
		} {
			out, err := w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(q.table), KeyConditionExpression: aws.String("#p = :p"),
				ExpressionAttributeNames: map[string]string{"#p": q.pkName}, ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: q.pk}}})
			must(t, err)
			for _, it := range out.Items {
				text := dynamo.StringAttr(it, "data") + dynamo.StringAttr(it, "changes")
				// The first olga's: her own events, and the copies of her membership changes
				// in the name's feed (which carry her id apart from their changes).
				if strings.Contains(text, "Firstolga") || strings.Contains(text, first.ID) || dynamo.StringAttr(it, "user_id") == first.ID {
					continue
				}
				if q.pkName == "id" && dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
					history++
				} else if q.pkName == "pk" {
					feed++
				}
			}
		}
		return history, feed
	}
	h0, f0 := laterItems()
	if h0 < 2 || f0 < 2 {
		t.Fatalf("the later olga has %d history records and %d feed items before the erasure", h0, f0)
	}

	erasureID := uuid.NewString()
	must(t, second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "petra", Reason: "a request", ErasureID: erasureID}, w.meta())))
	w.project(t)
	if e, err := x.Ledger().Get(ctx, "s", "t", erasureID); err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
		t.Fatalf("the erasure: %+v, %v", e, err)
	}

	agg, err := w.deps.Store.LoadUser(ctx, w.tenant, "olga")
	if err != nil || !agg.Live() || agg.State.ID != later.ID || agg.State.LastName != "Laterlast" {
		t.Errorf("the later olga's write model: %+v, %v", agg.State, err)
	}
	if h, f := laterItems(); h != h0 || f != f0 {
		t.Errorf("the later olga has %d history records and %d feed items after the erasure, %d and %d before", h, f, h0, f0)
	}
	if v := w.get(t, w.row.UsersTable, idsk("user#olga", dynamo.SKConfig)); dynamo.StringAttr(v, "user_id") != later.ID {
		t.Errorf("the later olga's view is %v", v)
	}
	if m := w.get(t, w.row.UsersTable, idsk("group#g", dynamo.MemberSK("olga"))); m == nil || m["member_id"] == nil {
		t.Errorf("the later olga's membership of g is %v", m)
	}
	if m := w.get(t, w.row.CommandsTable, idsk("group#g", dynamo.MemberSK("olga"))); dynamo.StringAttr(m, "user_id") != later.ID {
		t.Errorf("the later olga's membership of g in the write model is %v", m)
	}
	// The first olga is gone from every table.
	for _, table := range []string{w.row.CommandsTable, w.row.UsersTable, w.row.ActivitiesTable} {
		out, err := w.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		must(t, err)
		for _, it := range out.Items {
			for _, v := range it {
				if sv, ok := v.(*types.AttributeValueMemberS); ok && (strings.Contains(sv.Value, first.ID) || strings.Contains(sv.Value, "Firstolga")) {
					t.Errorf("%s: %s/%s still names the first olga: %.200s", table, dynamo.StringAttr(it, "id")+dynamo.StringAttr(it, "pk"), dynamo.StringAttr(it, "sk"), sv.Value)
				}
			}
		}
	}
}

// TestAnErasureTakesItsMembershipTombstonesUnderAFormerNameAnotherNowHolds: olga was in
// g and k and was renamed petra, which left tombstones of her memberships under "olga" in
// the read model; a later olga joined and left k (her own tombstone there). Erasing petra
// takes the first olga's tombstone in g, which names only the old name, and leaves the
// later olga's in k as it was.
func TestAnErasureTakesItsMembershipTombstonesUnderAFormerNameAnotherNowHolds(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "olga"}, w.meta())))
	for _, g := range []string{"G", "K"} {
		must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: g}, w.meta())))
		must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: g, Username: "olga"}, w.meta())))
	}
	must(t, second(commands.NewRenameUserHandler(w.deps).Handle(ctx, w.tenant, commands.RenameUser{Username: "olga", NewUsername: "petra"}, w.meta())))
	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "olga"}, w.meta())))
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "k", Username: "olga"}, w.meta())))
	must(t, second(commands.NewRemoveMemberHandler(w.deps).Handle(ctx, w.tenant, commands.RemoveMember{Group: "k", Username: "olga"}, w.meta())))
	w.project(t)

	first := w.get(t, w.row.UsersTable, idsk("group#g", dynamo.MemberSK("olga")))
	if b, _ := first["is_deleted"].(*types.AttributeValueMemberBOOL); b == nil || !b.Value {
		t.Fatalf("before the erasure, the first olga's membership of g under her old name is %v, want a tombstone", first)
	}
	laterTomb := w.get(t, w.row.UsersTable, idsk("group#k", dynamo.MemberSK("olga")))
	if b, _ := laterTomb["is_deleted"].(*types.AttributeValueMemberBOOL); b == nil || !b.Value {
		t.Fatalf("before the erasure, the later olga's membership of k is %v, want a tombstone", laterTomb)
	}

	erasureID := uuid.NewString()
	must(t, second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "petra", Reason: "a request", ErasureID: erasureID}, w.meta())))
	w.project(t)
	if e, err := x.Ledger().Get(ctx, "s", "t", erasureID); err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
		t.Fatalf("the erasure: %+v, %v", e, err)
	}
	plain := func(it map[string]types.AttributeValue) string {
		var m map[string]any
		must(t, attributevalue.UnmarshalMap(it, &m))
		return fmt.Sprint(m)
	}
	if m := w.get(t, w.row.UsersTable, idsk("group#g", dynamo.MemberSK("olga"))); m != nil {
		t.Errorf("the first olga's membership tombstone of g under her old name is left: %s", plain(m))
	}
	after := w.get(t, w.row.UsersTable, idsk("group#k", dynamo.MemberSK("olga")))
	if plain(after) != plain(laterTomb) {
		t.Errorf("the later olga's tombstone of k changed:\n%v\n%v", laterTomb, after)
	}
}
