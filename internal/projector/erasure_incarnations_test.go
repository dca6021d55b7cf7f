package projector_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestAnErasureTakesTheIncarnationTheNameResolvesTo: two people held the name in turn
// (created, deleted, created again), both members of a group. By default the erasure
// takes the last (the live user) only: the earlier one's history, group records and feed
// items stay; with all_incarnations it takes both.
func TestAnErasureTakesTheIncarnationTheNameResolvesTo(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "carl"}, w.meta())))
	// ids[name] are the ids of the two incarnations of name, in order.
	ids := map[string][]string{}
	for _, name := range []string{"ann", "bob"} {
		for _, first := range []string{"Firstperson", "Secondperson"} {
			u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: name, FirstName: first + name}, w.meta())
			must(t, err)
			ids[name] = append(ids[name], u.ID)
			if first == "Firstperson" {
				must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: name}, w.meta())))
			} else {
				// In bulk (one feed item per member, of one version), ann with a bystander.
				add := []string{name}
				if name == "ann" {
					add = append(add, "carl")
				}
				must(t, second(commands.NewChangeMembersHandler(w.deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "g", Add: add}, w.meta())))
			}
			if first == "Firstperson" {
				must(t, second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: name}, w.meta())))
			}
		}
	}
	w.project(t)

	eraseByDefaultAndAll(t, w, x, ids, "ann", "bob")

	all := tenantText(t, w)
	// ann: the earlier person is kept (history, group records naming their id, feed).
	for _, kept := range []string{"Firstpersonann", ids["ann"][0]} {
		if !strings.Contains(all, kept) {
			t.Errorf("ann's earlier incarnation lost %q", kept)
		}
	}
	// Gone: ann's last incarnation, and both of bob's.
	for _, gone := range []string{"Secondpersonann", ids["ann"][1], "Firstpersonbob", "Secondpersonbob", ids["bob"][0], ids["bob"][1], "user#bob", "member#bob", "user:bob"} {
		if strings.Contains(all, gone) {
			t.Errorf("%q is left after the erasure", gone)
		}
	}
	// The group's feed still names the earlier ann once (her add), and the erased one as
	// an erased member.
	named, carl, erased := 0, 0, 0
	for _, ch := range groupFeedChanges(t, w, "group:g") {
		named += strings.Count(ch, `"ann"`)
		carl += strings.Count(ch, `"carl"`)
		erased += strings.Count(ch, `{"erased":true}`)
	}
	if named != 1 || carl != 1 || erased != 3 {
		t.Errorf("group feed: ann named %d times (want 1: the earlier one's add), carl %d (want 1), %d erased members (want 3)", named, carl, erased)
	}
	// Both names are free; ann's versions go on after the kept history.
	for _, name := range []string{"ann", "bob"} {
		u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: name}, w.meta())
		if err != nil {
			t.Fatalf("%s again: %v", name, err)
		}
		if (name == "bob") != (u.Version == 1) {
			t.Errorf("%s again at version %d", name, u.Version)
		}
	}
	w.project(t)
	if v := w.get(t, w.row.UsersTable, idsk("user#ann", dynamo.SKConfig)); v == nil || dynamo.StringAttr(v, "first_name") != "" {
		t.Errorf("the next ann's view: %v", v)
	}
}

// TestAnErasureOfADeletedNameTakesItsLatestIncarnation: two people held each name in
// turn and both were deleted, so no live user holds it. The name resolves to the latest
// deleted incarnation: by default the erasure takes that one only (the earlier one's
// history, group records and feed items stay); with all_incarnations it takes both.
func TestAnErasureOfADeletedNameTakesItsLatestIncarnation(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	// ids[name] are the ids of the two incarnations of name, in order; both deleted.
	ids := map[string][]string{}
	for _, name := range []string{"dee", "eve"} {
		for _, first := range []string{"Firstperson", "Secondperson"} {
			u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: name, FirstName: first + name}, w.meta())
			must(t, err)
			ids[name] = append(ids[name], u.ID)
			must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: name}, w.meta())))
			must(t, second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: name}, w.meta())))
		}
	}
	w.project(t)

	eraseByDefaultAndAll(t, w, x, ids, "dee", "eve")
	all := tenantText(t, w)
	// dee: the earlier person is kept (history, the group records naming their id).
	for _, kept := range []string{"Firstpersondee", ids["dee"][0]} {
		if !strings.Contains(all, kept) {
			t.Errorf("dee's earlier incarnation lost %q", kept)
		}
	}
	// Gone: dee's latest incarnation, and both of eve's.
	for _, gone := range []string{"Secondpersondee", ids["dee"][1], "Firstpersoneve", "Secondpersoneve", ids["eve"][0], ids["eve"][1], "user#eve", "member#eve", "user:eve"} {
		if strings.Contains(all, gone) {
			t.Errorf("%q is left after the erasure", gone)
		}
	}
	// The group's feed still names the earlier dee (her add and her removal by the
	// delete), and every change of the erased ones as an erased member.
	dee, eve := 0, 0
	for _, ch := range groupFeedChanges(t, w, "group:g") {
		dee += strings.Count(ch, `"dee"`)
		eve += strings.Count(ch, `"eve"`)
	}
	if dee == 0 || eve != 0 {
		t.Errorf("group feed: dee named %d times (want the earlier one's changes), eve %d (want 0)", dee, eve)
	}
	// Both names are free; dee's versions go on after the kept history, eve's start again.
	for _, name := range []string{"dee", "eve"} {
		u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: name}, w.meta())
		if err != nil {
			t.Fatalf("%s again: %v", name, err)
		}
		if (name == "eve") != (u.Version == 1) {
			t.Errorf("%s again at version %d", name, u.Version)
		}
	}
}

// eraseByDefaultAndAll erases byDefault's name as requested by default and all's with
// all_incarnations, projects, and checks that each ledger entry names the last incarnation
// (ids[name][1]) and the earlier one (ids[name][0]) only for all.
func eraseByDefaultAndAll(t *testing.T, w *commandWorld, x *erasure.Eraser, ids map[string][]string, byDefault, all string) {
	t.Helper()
	ctx := context.Background()
	erasures := map[string]string{byDefault: uuid.NewString(), all: uuid.NewString()}
	for _, name := range []string{byDefault, all} {
		id := erasures[name]
		if _, err := commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: name, Reason: "a request", ErasureID: id, AllIncarnations: name == all}, w.meta()); err != nil {
			t.Fatal(err)
		}
	}
	w.project(t)
	for name, id := range erasures {
		e, err := x.Ledger().Get(ctx, "s", "t", id)
		if err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
			t.Fatalf("%s's erasure %+v, %v", name, e, err)
		}
		hashes := strings.Join(e.IDHashes, " ")
		if !strings.Contains(hashes, identity.ErasedIDHash(ids[name][1])) {
			t.Errorf("%s: the ledger misses the last incarnation's id", name)
		}
		if earlier := strings.Contains(hashes, identity.ErasedIDHash(ids[name][0])); earlier != (name == all) {
			t.Errorf("%s: the ledger holds the earlier incarnation's id: %v", name, earlier)
		}
	}
}

// tenantText is every string value in the tenant's write, view and activity tables, a
// line each.
func tenantText(t *testing.T, w *commandWorld) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{w.row.CommandsTable, w.row.UsersTable, w.row.ActivitiesTable} {
		out, err := w.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			for _, v := range it {
				if s, ok := v.(*types.AttributeValueMemberS); ok {
					b.WriteString(s.Value + "\n")
				}
			}
		}
	}
	return b.String()
}

// groupFeedChanges is the changes attribute of each item of an entity's activity feed.
func groupFeedChanges(t *testing.T, w *commandWorld, entity string) []string {
	t.Helper()
	out, err := w.db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(w.row.ActivitiesTable), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK(entity)}}})
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, it := range out.Items {
		changes = append(changes, dynamo.StringAttr(it, "changes"))
	}
	return changes
}

// TestAllIncarnationsReachEveryOnesFormerNames: two people came to the name ann by a
// rename — vera, renamed ann and deleted, then walt, renamed ann. Erasing ann with
// all_incarnations erases both, under their former names too: nothing names either by
// name, id or value afterwards, and bob, who shared a group with both, stays.
func TestAllIncarnationsReachEveryOnesFormerNames(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "bob"}, w.meta())))
	var ids []string
	for _, former := range []string{"vera", "walt"} {
		u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: former, Email: former + ".canary@example.org", FirstName: "First" + former}, w.meta())
		must(t, err)
		ids = append(ids, u.ID)
		must(t, second(commands.NewChangeMembersHandler(w.deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "g", Add: []string{former, "bob"}}, w.meta())))
		must(t, second(commands.NewRenameUserHandler(w.deps).Handle(ctx, w.tenant, commands.RenameUser{Username: former, NewUsername: "ann"}, w.meta())))
		if former == "vera" {
			must(t, second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: "ann"}, w.meta())))
		}
	}
	w.project(t)

	erasureID := uuid.NewString()
	must(t, second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "ann", Reason: "a request", ErasureID: erasureID, AllIncarnations: true}, w.meta())))
	w.project(t)
	if e, err := x.Ledger().Get(ctx, "s", "t", erasureID); err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
		t.Fatalf("the erasure: %+v, %v", e, err)
	}
	all := tenantText(t, w)
	for _, gone := range []string{"Firstvera", "vera.canary", ids[0], "user#vera", "member#vera", "user:vera", "Firstwalt", "walt.canary", ids[1], "user#walt", "member#walt", "user:walt"} {
		if strings.Contains(all, gone) {
			t.Errorf("%q is left after erasing every incarnation of ann", gone)
		}
	}
	if !strings.Contains(all, "member#bob") {
		t.Error("bob's membership is gone too: the erasure took a bystander")
	}
}
