package projector_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestAGroupDeleteShowsInItsMembersFeeds: a group delete lists the members it removes
// (the live ones: not a user deleted before it, and a renamed member under the new name),
// each of them finds it in their own feed (`group.deleted`, the group's name as the old
// value, their id kept), and an erasure of one of them afterwards leaves nothing that
// names them, in the record or in any feed, while the other member keeps theirs.
func TestAGroupDeleteShowsInItsMembersFeeds(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	olga, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "olga", Email: "olga.canary@example.org", FirstName: "Olgacanary"}, w.meta())
	must(t, err)
	bob, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "bob"}, w.meta())
	must(t, err)
	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "cid"}, w.meta())))
	must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "olga"}, w.meta())))
	must(t, second(commands.NewChangeMembersHandler(w.deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "g", Add: []string{"bob", "cid"}}, w.meta())))
	must(t, second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: "cid"}, w.meta())))
	must(t, second(commands.NewRenameUserHandler(w.deps).Handle(ctx, w.tenant, commands.RenameUser{Username: "bob", NewUsername: "robert"}, w.meta())))
	version, err := commands.NewDeleteGroupHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteGroup{Name: "g"}, w.meta())
	must(t, err)
	env, err := w.deps.Store.LoadRecord(ctx, w.tenant, events.KindGroup, "g", version)
	must(t, err)
	p := env.Payload.(*events.GroupDeleted)
	var listed []string
	for _, m := range p.Members {
		listed = append(listed, m.Username+"="+m.UserID)
	}
	if want := []string{"olga=" + olga.ID, "robert=" + bob.ID}; strings.Join(listed, " ") != strings.Join(want, " ") || p.MoreMembers {
		t.Fatalf("group.deleted lists %v (more: %v), want %v", listed, p.MoreMembers, want)
	}
	w.project(t)

	deleted := func(entity string) []map[string]types.AttributeValue {
		t.Helper()
		out, err := w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(w.row.ActivitiesTable), KeyConditionExpression: aws.String("pk = :p"),
			ConsistentRead:            aws.Bool(true),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK(entity)}}})
		must(t, err)
		var got []map[string]types.AttributeValue
		for _, it := range out.Items {
			if dynamo.StringAttr(it, "type") == string(events.GroupDeletedType) {
				got = append(got, it)
			}
		}
		return got
	}
	for _, c := range []struct{ entity, id string }{{"user:olga", olga.ID}, {"user:robert", bob.ID}} {
		items := deleted(c.entity)
		if len(items) != 1 {
			t.Fatalf("%s's feed has %d group.deleted items, want 1", c.entity, len(items))
		}
		it := items[0]
		var ch map[string]events.Change
		must(t, json.Unmarshal([]byte(dynamo.StringAttr(it, "changes")), &ch))
		if dynamo.StringAttr(it, "entity") != "group:g" || dynamo.StringAttr(it, "user_id") != c.id || ch["group"].Old != "G" || ch["group"].New != nil {
			t.Errorf("%s's item: entity %s user_id %s changes %v, want group:g, their id, group G → null", c.entity,
				dynamo.StringAttr(it, "entity"), dynamo.StringAttr(it, "user_id"), ch)
		}
	}
	if items := deleted("user:cid"); len(items) != 0 {
		t.Errorf("cid, deleted before the group, has %d group.deleted items", len(items))
	}

	erasureID := uuid.NewString()
	must(t, second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "olga", Reason: "a request", ErasureID: erasureID}, w.meta())))
	w.project(t)
	if e, err := x.Ledger().Get(ctx, "s", "t", erasureID); err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
		t.Fatalf("the erasure: %+v, %v", e, err)
	}
	canaries := []string{`"olga"`, `\"olga\"`, "user#olga", "member#olga", "user:olga", olga.ID, "Olgacanary", "olga.canary"}
	for _, table := range []string{w.row.CommandsTable, w.row.UsersTable, w.row.ActivitiesTable} {
		p := dynamodb.NewScanPaginator(w.db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			must(t, err)
			for _, it := range out.Items {
				for attr, v := range it {
					sv, ok := v.(*types.AttributeValueMemberS)
					if !ok {
						continue
					}
					for _, c := range canaries {
						if strings.Contains(`"`+sv.Value+`"`, c) {
							t.Errorf("%s: %s/%s %s still names the erased person (%s): %.200s", table, dynamo.StringAttr(it, "id")+dynamo.StringAttr(it, "pk"),
								dynamo.StringAttr(it, "sk"), attr, c, sv.Value)
						}
					}
				}
			}
		}
	}
	if items := deleted("user:robert"); len(items) != 1 {
		t.Errorf("robert's feed has %d group.deleted items after olga's erasure, want 1", len(items))
	}
	env, err = w.deps.Store.LoadRecord(ctx, w.tenant, events.KindGroup, "g", version)
	must(t, err)
	if ms := env.Payload.(*events.GroupDeleted).Members; len(ms) != 2 || !ms[0].Erased || ms[1].Username != "robert" {
		t.Errorf("the delete's record after the erasure lists %+v, want an erased member and robert", ms)
	}
}
