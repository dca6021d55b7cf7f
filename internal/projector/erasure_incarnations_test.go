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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	must(second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "carl"}, w.meta())))
	// ids[name] are the ids of the two incarnations of name, in order.
	ids := map[string][]string{}
	for _, name := range []string{"ann", "bob"} {
		for _, first := range []string{"Firstperson", "Secondperson"} {
			u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: name, FirstName: first + name}, w.meta())
			must(err)
			ids[name] = append(ids[name], u.ID)
			if first == "Firstperson" {
				must(second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: name}, w.meta())))
			} else {
				// In bulk (one feed item per member, of one version), ann with a bystander.
				add := []string{name}
				if name == "ann" {
					add = append(add, "carl")
				}
				must(second(commands.NewChangeMembersHandler(w.deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "g", Add: add}, w.meta())))
			}
			if first == "Firstperson" {
				must(second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: name}, w.meta())))
			}
		}
	}
	w.project(t)

	erasures := map[string]string{"ann": uuid.NewString(), "bob": uuid.NewString()}
	must(second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "ann", Reason: "a request", ErasureID: erasures["ann"]}, w.meta())))
	must(second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "bob", Reason: "a request", ErasureID: erasures["bob"], AllIncarnations: true}, w.meta())))
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
		if earlier := strings.Contains(hashes, identity.ErasedIDHash(ids[name][0])); earlier != (name == "bob") {
			t.Errorf("%s: the ledger holds the earlier incarnation's id: %v", name, earlier)
		}
	}

	scanText := func(table string) string {
		out, err := w.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, it := range out.Items {
			for _, v := range it {
				if s, ok := v.(*types.AttributeValueMemberS); ok {
					b.WriteString(s.Value + "\n")
				}
			}
		}
		return b.String()
	}
	all := scanText(w.row.CommandsTable) + scanText(w.row.UsersTable) + scanText(w.row.ActivitiesTable)
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
	out, err := w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(w.row.ActivitiesTable), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK("group:g")}}})
	if err != nil {
		t.Fatal(err)
	}
	named, carl, erased := 0, 0, 0
	for _, it := range out.Items {
		ch := dynamo.StringAttr(it, "changes")
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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	// ids[name] are the ids of the two incarnations of name, in order; both deleted.
	ids := map[string][]string{}
	for _, name := range []string{"dee", "eve"} {
		for _, first := range []string{"Firstperson", "Secondperson"} {
			u, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: name, FirstName: first + name}, w.meta())
			must(err)
			ids[name] = append(ids[name], u.ID)
			must(second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: name}, w.meta())))
			must(second(commands.NewDeleteUserHandler(w.deps).Handle(ctx, w.tenant, commands.DeleteUser{Username: name}, w.meta())))
		}
	}
	w.project(t)

	erasures := map[string]string{"dee": uuid.NewString(), "eve": uuid.NewString()}
	must(second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "dee", Reason: "a request", ErasureID: erasures["dee"]}, w.meta())))
	must(second(commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "eve", Reason: "a request", ErasureID: erasures["eve"], AllIncarnations: true}, w.meta())))
	w.project(t)
	for name, id := range erasures {
		e, err := x.Ledger().Get(ctx, "s", "t", id)
		if err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
			t.Fatalf("%s's erasure %+v, %v", name, e, err)
		}
		hashes := strings.Join(e.IDHashes, " ")
		if !strings.Contains(hashes, identity.ErasedIDHash(ids[name][1])) {
			t.Errorf("%s: the ledger misses the latest deleted incarnation's id", name)
		}
		if earlier := strings.Contains(hashes, identity.ErasedIDHash(ids[name][0])); earlier != (name == "eve") {
			t.Errorf("%s: the ledger holds the earlier incarnation's id: %v", name, earlier)
		}
	}
	var all strings.Builder
	for _, table := range []string{w.row.CommandsTable, w.row.UsersTable, w.row.ActivitiesTable} {
		out, err := w.db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			for _, v := range it {
				if s, ok := v.(*types.AttributeValueMemberS); ok {
					all.WriteString(s.Value + "\n")
				}
			}
		}
	}
	// dee: the earlier person is kept (history, the group records naming their id).
	for _, kept := range []string{"Firstpersondee", ids["dee"][0]} {
		if !strings.Contains(all.String(), kept) {
			t.Errorf("dee's earlier incarnation lost %q", kept)
		}
	}
	// Gone: dee's latest incarnation, and both of eve's.
	for _, gone := range []string{"Secondpersondee", ids["dee"][1], "Firstpersoneve", "Secondpersoneve", ids["eve"][0], ids["eve"][1], "user#eve", "member#eve", "user:eve"} {
		if strings.Contains(all.String(), gone) {
			t.Errorf("%q is left after the erasure", gone)
		}
	}
	// The group's feed still names the earlier dee (her add and her removal by the
	// delete), and every change of the erased ones as an erased member.
	out, err := w.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(w.row.ActivitiesTable), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK("group:g")}}})
	if err != nil {
		t.Fatal(err)
	}
	dee, eve := 0, 0
	for _, it := range out.Items {
		ch := dynamo.StringAttr(it, "changes")
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
