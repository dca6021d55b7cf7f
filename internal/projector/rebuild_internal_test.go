package projector

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestApplyPageRepairsWhatALiveProjectorWroteFirst plays the race that projections.Rebuild
// opens: a command accepted after the replay scanned its aggregate is projected into the
// new tables by the live projector first, and the replay's unconditional write of the
// older version lands on top of it. After the page, the new tables must hold the newest
// state again: the user's last update, and the group's delete with its membership
// tombstoned.
func TestApplyPageRepairsWhatALiveProjectorWroteFirst(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	db, row, next, reg, tenant, meta, deps := f.db, f.row, f.next, f.reg, f.tenant, f.meta, f.deps
	if _, err := commands.NewCreateUserHandler(deps, nil).Handle(ctx, tenant, commands.CreateUser{Username: "alice", Email: "a@example.com"}, meta); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"Al", "Alice"} {
		if _, err := commands.NewUpdateUserHandler(deps).Handle(ctx, tenant, commands.UpdateUser{Username: "alice", FirstName: aws.String(name)}, meta); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := commands.NewCreateGroupHandler(deps).Handle(ctx, tenant, commands.CreateGroup{Name: "g"}, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := commands.NewAddMemberHandler(deps).Handle(ctx, tenant, commands.AddMember{Group: "g", Username: "alice"}, meta); err != nil {
		t.Fatal(err)
	}
	if _, err := commands.NewDeleteGroupHandler(deps).Handle(ctx, tenant, commands.DeleteGroup{Name: "g"}, meta); err != nil {
		t.Fatal(err)
	}

	all, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(row.CommandsTable), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	p, r := f.projector, f.replayer
	// The live projector has projected the whole log into the new tables.
	var page []map[string]types.AttributeValue
	for _, it := range all.Items {
		sk := dynamo.StringAttr(it, "sk")
		if !dynamo.IsHistorySK(sk) {
			continue
		}
		e, err := dynamo.DecodeRecord(reg, it)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(ctx, next, e); err != nil {
			t.Fatal(err)
		}
		// The replay's page was scanned before each aggregate's last command.
		if sk != dynamo.HistorySK(3) {
			page = append(page, it)
		}
	}
	history, repaired, err := r.applyPage(ctx, row, next, page, &checklist{}, &sync.Map{})
	if err != nil {
		t.Fatal(err)
	}
	if history != 4 || repaired != 2 {
		t.Errorf("applied %d history records and %d states, want 4 and 2", history, repaired)
	}

	get := func(id, sk string) map[string]any {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(next.Users), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := attributevalue.UnmarshalMap(out.Item, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if u := get(dynamo.UserID("alice"), dynamo.SKConfig); u["version"] != 3.0 || u["first_name"] != "Alice" {
		t.Errorf("alice in the new table: %v, want version 3 named Alice", u)
	}
	if g := get(dynamo.GroupID("g"), dynamo.SKConfig); g["version"] != 3.0 || g["is_deleted"] != true {
		t.Errorf("group g in the new table: %v, want the version 3 tombstone", g)
	}
	if m := get(dynamo.GroupID("g"), dynamo.MemberSK("alice")); m["is_deleted"] != true || m["member_id"] != nil {
		t.Errorf("alice's membership of the deleted group g: %v, want a tombstone", m)
	}
}

type rebuildFixture struct {
	db        *dynamodb.Client
	row       dynamo.Tenant
	next      projections.Tables
	reg       *events.Registry
	tenant    commands.Tenant
	meta      commands.Meta
	deps      commands.Deps
	projector *projections.Projector
	replayer  *Replayer
}

// newRebuildFixture is a tenant with a command log and the empty tables of a replay.
func newRebuildFixture(t *testing.T) rebuildFixture {
	t.Helper()
	return newRebuildFixtureOn(t, dynamotest.Current(t))
}

// newRebuildFixtureOn is the fixture on local: dynamotest.Private's for a test that writes
// many records.
func newRebuildFixtureOn(t *testing.T, local *dynamotest.Local) rebuildFixture {
	t.Helper()
	ctx := context.Background()
	db := local.DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("rb")}
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	store := dynamo.NewTenantStore(db, names)
	if err := store.EnsureTables(ctx, "s", "t"); err != nil {
		t.Fatal(err)
	}
	row := dynamo.Tenant{SystemID: "s", TenantID: "t", CommandsTable: names.Commands("s", "t")}
	next := projections.Tables{Users: names.Users("s", "t", 1), Activities: names.Activities("s", "t", 1)}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(next.Users), dynamo.ActivitiesTable(next.Activities)} {
		if err := dynamo.EnsureTable(ctx, db, spec); err != nil {
			t.Fatal(err)
		}
	}

	// The command log: alice created and updated twice; group g created, alice added, g deleted.
	reg := events.NewRegistry()
	deps := commands.Deps{Store: dynamo.NewCommandStore(db, names, reg, 0), Now: time.Now, NewID: uuid.NewString}
	tenant := commands.Tenant{System: "s", ID: "t"}
	meta := commands.Meta{Actor: "test", CommandID: "c", CorrelationID: "c"}
	p := projections.New(db, projections.Options{})
	return rebuildFixture{db: db, row: row, next: next, reg: reg, tenant: tenant, meta: meta, deps: deps, projector: p,
		replayer: NewReplayer(db, names, dynamo.NewTenants(db, names), p, reg, zap.NewNop())}
}

// replayAndVerify rebuilds the next generation from the whole log in one page, and fails
// the test unless it verifies against the log (what: the history, for the message).
func (f rebuildFixture) replayAndVerify(t *testing.T, what string) {
	t.Helper()
	ctx := context.Background()
	list := &checklist{}
	if _, _, err := f.replayer.applyPage(ctx, f.row, f.next, f.log(t), list, &sync.Map{}); err != nil {
		t.Fatal(err)
	}
	rep := &ReplayReport{}
	if err := f.replayer.verify(ctx, f.row, f.next, rep, ReplayOptions{Workers: 2, verifyPause: time.Millisecond}, list, 1, nil); err != nil {
		t.Fatalf("verification after %s: %v %v", what, err, rep.Mismatches)
	}
}

// nextItem is the item id/sk of the next generation's users table, read consistently.
func (f rebuildFixture) nextItem(t *testing.T, id, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(f.next.Users), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// log is the whole command log, read consistently.
func (f rebuildFixture) log(t *testing.T) []map[string]types.AttributeValue {
	t.Helper()
	out, err := f.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(f.row.CommandsTable), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Items
}

// states is the state items of the command log as a page of the rebuild would read them.
func (f rebuildFixture) states(t *testing.T) []stateItem {
	t.Helper()
	_, _, states, err := f.replayer.split(context.Background(), f.row.CommandsTable, f.log(t))
	if err != nil {
		t.Fatal(err)
	}
	return states
}

// run executes commands against the fixture's command log.
func (f rebuildFixture) run(t *testing.T, cmds ...any) {
	t.Helper()
	ctx := context.Background()
	for _, c := range cmds {
		var err error
		switch c := c.(type) {
		case commands.CreateUser:
			_, err = commands.NewCreateUserHandler(f.deps, nil).Handle(ctx, f.tenant, c, f.meta)
		case commands.DeleteUser:
			_, err = commands.NewDeleteUserHandler(f.deps).Handle(ctx, f.tenant, c, f.meta)
		case commands.CreateGroup:
			_, err = commands.NewCreateGroupHandler(f.deps).Handle(ctx, f.tenant, c, f.meta)
		case commands.DeleteGroup:
			_, err = commands.NewDeleteGroupHandler(f.deps).Handle(ctx, f.tenant, c, f.meta)
		case commands.AddMember:
			_, err = commands.NewAddMemberHandler(f.deps).Handle(ctx, f.tenant, c, f.meta)
		case commands.ChangeMembers:
			_, err = commands.NewChangeMembersHandler(f.deps).Handle(ctx, f.tenant, c, f.meta)
		case commands.RenameUser:
			_, err = commands.NewRenameUserHandler(f.deps).Handle(ctx, f.tenant, c, f.meta)
		case commands.RenameGroup:
			_, err = commands.NewRenameGroupHandler(f.deps).Handle(ctx, f.tenant, c, f.meta)
		default:
			t.Fatalf("fixture: no handler for %T", c)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestVerifyFollowsTheLogPastTheRebuild checks a membership the rebuild read as live and
// a later delete of its user removed from the log: the new table's tombstone (which keeps
// the membership's version) must pass the verification, and a live membership the log no
// longer has must not.
func TestVerifyFollowsTheLogPastTheRebuild(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "alice", Email: "alice@example.com"}, commands.CreateUser{Username: "bob", Email: "bob@example.com"},
		commands.CreateGroup{Name: "g"}, commands.AddMember{Group: "g", Username: "alice"}, commands.AddMember{Group: "g", Username: "bob"})
	project := func() {
		t.Helper()
		out := f.log(t)
		for _, it := range out {
			if dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
				e, err := dynamo.DecodeRecord(f.reg, it)
				if err != nil {
					t.Fatal(err)
				}
				if err := f.projector.Apply(ctx, f.next, e); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	project()
	// What the rebuild read: both memberships live.
	states := f.states(t)
	// Then alice is deleted (the log drops her membership; the new table tombstones it).
	f.run(t, commands.DeleteUser{Username: "alice"})
	project()
	opts := ReplayOptions{Workers: 2, verifyPause: time.Millisecond}
	list := &checklist{}
	list.addStates(states)
	if err := f.replayer.verify(ctx, f.row, f.next, &ReplayReport{}, opts, list, 1, nil); err != nil {
		t.Fatalf("a membership removed after the rebuild read it: %v", err)
	}

	// bob's membership made live in the new table after the log removed it must fail.
	if _, err := commands.NewRemoveMemberHandler(f.deps).Handle(ctx, f.tenant, commands.RemoveMember{Group: "g", Username: "bob"}, f.meta); err != nil {
		t.Fatal(err)
	}
	project()
	if _, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.next.Users),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: dynamo.GroupID("g")}, "sk": &types.AttributeValueMemberS{Value: dynamo.MemberSK("bob")}},
		UpdateExpression:          aws.String("SET member_id = :u, is_deleted = :f"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": &types.AttributeValueMemberS{Value: "bob"}, ":f": &types.AttributeValueMemberBOOL{Value: false}}}); err != nil {
		t.Fatal(err)
	}
	list = &checklist{}
	list.addStates(states)
	rep := &ReplayReport{}
	if err := f.replayer.verify(ctx, f.row, f.next, rep, opts, list, 1, nil); err == nil || len(rep.Mismatches) == 0 {
		t.Fatalf("a live membership the log removed passed the verification (%v, %v)", err, rep.Mismatches)
	}
}

// TestVerifyRefreshKeepsTheTargetOfAnAggregateThatMovesOn checks that a failed check of an
// aggregate still in the log keeps the version the rebuild read. Raised to the log's
// newest version each round, the check chased a user updated faster than the live
// projector's lag, and a replay of a busy tenant failed its verification.
func TestVerifyRefreshKeepsTheTargetOfAnAggregateThatMovesOn(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "alice", Email: "a@example.com"})
	states := f.states(t)
	var list checklist
	list.addStates(states)
	if len(list.checks) != 1 || list.checks[0].version != 1 {
		t.Fatalf("checks of the rebuild: %+v", list.checks)
	}
	// alice moves on while the new table still lacks her.
	for _, name := range []string{"Al", "Alice"} {
		if _, err := commands.NewUpdateUserHandler(f.deps).Handle(ctx, f.tenant, commands.UpdateUser{Username: "alice", FirstName: aws.String(name)}, f.meta); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.replayer.refresh(ctx, f.row.CommandsTable, list.checks)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].reverse || got[0].version != 1 {
		t.Fatalf("refreshed checks %+v, want alice's check at version 1 still", got)
	}
	// A check the new table meets at a newer version holds.
	if !got[0].holds(true, readState{Version: 3}) {
		t.Fatal("a newer version in the new table does not meet the check")
	}
}

// TestApplyPageTombstonesMembershipsOfAnIncarnationDeletedSinceTheScan plays a group that
// is deleted and created again after the replay scanned it with a member: a live projector
// writes the delete (and its guard) into the new tables first, the replay's page then
// overwrites the group's config with the scanned one and adds the old membership, and the
// repair brings the current, live group back. The old incarnation's membership must end as
// a tombstone, as the log has it gone; before, it stayed live and the replay's
// verification refused the switch. The same for a user deleted and created again.
func TestApplyPageTombstonesMembershipsOfAnIncarnationDeletedSinceTheScan(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "alice", Email: "alice@example.com"}, commands.CreateUser{Username: "bob", Email: "bob@example.com"},
		commands.CreateGroup{Name: "g"}, commands.AddMember{Group: "g", Username: "alice"},
		commands.CreateGroup{Name: "h"}, commands.AddMember{Group: "h", Username: "bob"})
	scanned := f.log(t)
	seen := map[string]bool{}
	for _, it := range scanned {
		seen[dynamo.StringAttr(it, "id")+"\x00"+dynamo.StringAttr(it, "sk")] = true
	}
	// After the scan: g is deleted and created again, and so is bob.
	f.run(t, commands.DeleteGroup{Name: "g"}, commands.CreateGroup{Name: "g"},
		commands.DeleteUser{Username: "bob"}, commands.CreateUser{Username: "bob", Email: "bob@example.com"})
	// The live projector writes what came after the scan into the new tables first.
	all := f.log(t)
	for _, it := range all {
		sk := dynamo.StringAttr(it, "sk")
		if !dynamo.IsHistorySK(sk) || seen[dynamo.StringAttr(it, "id")+"\x00"+sk] {
			continue
		}
		e, err := dynamo.DecodeRecord(f.reg, it)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.projector.Apply(ctx, f.next, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := f.replayer.applyPage(ctx, f.row, f.next, scanned, &checklist{}, &sync.Map{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range [][2]string{{"g", "alice"}, {"h", "bob"}} {
		out, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.next.Users), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: dynamo.GroupID(m[0])}, "sk": &types.AttributeValueMemberS{Value: dynamo.MemberSK(m[1])}}})
		if err != nil {
			t.Fatal(err)
		}
		if dynamo.StringAttr(out.Item, "member_id") != "" {
			t.Errorf("%s's membership of %s, which a delete since the scan ended, is live in the new table", m[1], m[0])
		}
	}
	var group readState
	g, err := f.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.next.Users), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: dynamo.GroupID("g")}, "sk": &types.AttributeValueMemberS{Value: dynamo.SKConfig}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := attributevalue.UnmarshalMap(g.Item, &group); err != nil {
		t.Fatal(err)
	}
	if group.IsDeleted || group.Version != 4 {
		t.Errorf("group g in the new table: %+v, want the live version 4", group)
	}
}

// unwrittenMembers is a command store whose writer dies after recording a members change,
// before writing its membership items.
type unwrittenMembers struct{ commands.Store }

func (unwrittenMembers) WriteMembers(context.Context, commands.Tenant, commands.MembersWrite, func(context.Context) error) error {
	return context.Canceled
}

// TestVerifyReadsAPendingMembersChange: the memberships a members change recorded but has
// not written to the write model yet (its writer died; the next command on the group
// writes them) are the log's: the new tables' live memberships from its record pass the
// verification, and a membership the change removed must not be live.
func TestVerifyReadsAPendingMembersChange(t *testing.T) {
	ctx := context.Background()
	f := newRebuildFixture(t)
	f.run(t, commands.CreateUser{Username: "alice", Email: "alice@example.com"}, commands.CreateUser{Username: "bob", Email: "bob@example.com"},
		commands.CreateGroup{Name: "g"}, commands.AddMember{Group: "g", Username: "bob"})
	f.deps.Store = unwrittenMembers{f.deps.Store}
	f.run(t, commands.ChangeMembers{Group: "g", Add: []string{"alice"}, Remove: []string{"bob"}})
	for _, it := range f.log(t) {
		if dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
			e, err := dynamo.DecodeRecord(f.reg, it)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.projector.Apply(ctx, f.next, e); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := ReplayOptions{Workers: 2, verifyPause: time.Millisecond}
	list := &checklist{}
	list.addStates(f.states(t))
	rep := &ReplayReport{}
	if err := f.replayer.verify(ctx, f.row, f.next, rep, opts, list, 1, nil); err != nil {
		t.Fatalf("the pending change's memberships failed the verification: %v %v", err, rep.Mismatches)
	}

	// bob made live again in the new table, against the change's removal, must fail.
	if _, err := f.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.next.Users),
		Key:                       map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: dynamo.GroupID("g")}, "sk": &types.AttributeValueMemberS{Value: dynamo.MemberSK("bob")}},
		UpdateExpression:          aws.String("SET member_id = :u, is_deleted = :f"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": &types.AttributeValueMemberS{Value: "bob"}, ":f": &types.AttributeValueMemberBOOL{Value: false}}}); err != nil {
		t.Fatal(err)
	}
	list = &checklist{}
	list.addStates(f.states(t))
	rep = &ReplayReport{}
	if err := f.replayer.verify(ctx, f.row, f.next, rep, opts, list, 1, nil); err == nil {
		t.Fatal("a live membership the pending change removed passed the verification")
	}
}
