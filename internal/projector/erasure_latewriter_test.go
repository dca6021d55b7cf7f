package projector_test

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// lateStore is the real command store for a members change that an erasure overtakes:
// before the change's transaction is sent, the hook runs once (the erasure, carried out).
type lateStore struct {
	commands.Store
	once         sync.Once
	beforeCommit func()
	// on is the record type whose transaction the hook precedes (zero: a members change).
	on events.Type
}

func (s *lateStore) Append(ctx context.Context, t commands.Tenant, c commands.Change) error {
	if on := cmp.Or(s.on, events.GroupMembersChangedType); c.Event.Type == on {
		s.once.Do(s.beforeCommit)
	}
	return s.Store.Append(ctx, t, c)
}

// TestAMembersChangeDecidedBeforeAnErasureNeverCommitsAfterIt: a members change (bulk,
// as SCIM PATCH/PUT make them) reads ann live and decides to add her; before its
// transaction commits, ann is erased and the projector carries the erasure out, both
// passes. The change must not then write a group record naming her, which no pass would
// ever sweep: it decides again and answers that ann does not exist, and no table names
// her. (Without the transaction's condition on the counts of user deletes, the group's
// history kept her username and id.)
func TestAMembersChangeDecidedBeforeAnErasureNeverCommitsAfterIt(t *testing.T) {
	w := newCommandWorld(t)
	ctx := context.Background()
	x := w.erasing()
	ann, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "ann", Email: "ann.canary@example.org", FirstName: "Anncanary"}, w.meta())
	must(t, err)
	must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "carl"}, w.meta())))
	must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
	w.project(t)

	erasureID := uuid.NewString()
	late := &lateStore{Store: w.deps.Store}
	late.beforeCommit = func() {
		if _, err := commands.NewEraseUserHandler(w.deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "ann", Reason: "a request", ErasureID: erasureID}, w.meta()); err != nil {
			t.Errorf("erase: %v", err)
			return
		}
		w.project(t)
		e, err := x.Ledger().Get(ctx, "s", "t", erasureID)
		if err != nil || e.Places[commands.PlaceWriteModel] != dynamo.ErasureStatusDone {
			t.Errorf("the erasure before the change's commit: %+v, %v; want its passes done", e, err)
		}
	}
	deps := w.deps
	deps.Store = late
	_, err = commands.NewChangeMembersHandler(deps).Handle(ctx, w.tenant, commands.ChangeMembers{Group: "g", Add: []string{"ann", "carl"}}, w.meta())
	if apperr.CodeOf(err) != apperr.CodeNotFound {
		t.Errorf("the members change answered %v, want not found: ann was erased before it committed", err)
	}
	w.project(t)

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
					for _, canary := range []string{`"ann"`, "user#ann", "member#ann", "user:ann", ann.ID, "Anncanary", "ann.canary"} {
						if strings.Contains(`"`+sv.Value+`"`, canary) {
							t.Errorf("%s: %s/%s %s still names the erased person (%s)", table, dynamo.StringAttr(it, "id")+dynamo.StringAttr(it, "pk"), dynamo.StringAttr(it, "sk"), attr, canary)
						}
					}
				}
			}
			if start = out.LastEvaluatedKey; len(start) == 0 {
				break
			}
		}
	}
}

// stoppedCleanup is the command store of an erase whose process stops right after its
// transaction, which removed none of the user's memberships: they are left to the
// clean-up after it, which never runs.
type stoppedCleanup struct{ commands.Store }

func (stoppedCleanup) MaxMembersPerChange() int { return 0 }

func (stoppedCleanup) RemoveMembersAfter(context.Context, commands.Tenant, commands.Cleanup) error {
	return errors.New("the process stopped")
}

// TestASingleMemberChangeDecidedBeforeAnEraseNeverCommitsAfterIt: a single remove
// (DELETE /groups/{g}/members/{u}) and a single add (PUT) read ann live and decide; before
// their transaction commits, ann is erased (the command; its process stops before the
// clean-up of her memberships). Like a members change, each must decide again on the
// counts of user deletes and answer that ann does not exist, writing no group record
// after the erasure began. (Without the condition, the remove found her membership still
// there and recorded a group.member_removed naming her after her erasure.)
func TestASingleMemberChangeDecidedBeforeAnEraseNeverCommitsAfterIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		on      events.Type
		member  bool // ann is in the group before
		command func(ctx context.Context, w *commandWorld, deps commands.Deps) error
	}{
		{"remove", events.GroupMemberRemovedType, true, func(ctx context.Context, w *commandWorld, deps commands.Deps) error {
			_, err := commands.NewRemoveMemberHandler(deps).Handle(ctx, w.tenant, commands.RemoveMember{Group: "g", Username: "ann"}, w.meta())
			return err
		}},
		{"put", events.GroupMemberAddedType, false, func(ctx context.Context, w *commandWorld, deps commands.Deps) error {
			_, err := commands.NewAddMemberHandler(deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "ann"}, w.meta())
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newCommandWorld(t)
			ctx := context.Background()
			must(t, second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "ann"}, w.meta())))
			must(t, second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
			if tc.member {
				must(t, second(commands.NewAddMemberHandler(w.deps).Handle(ctx, w.tenant, commands.AddMember{Group: "g", Username: "ann"}, w.meta())))
			}
			before, err := w.deps.Store.LoadGroup(ctx, w.tenant, "g")
			must(t, err)

			late := &lateStore{Store: w.deps.Store, on: tc.on}
			late.beforeCommit = func() {
				deps := w.deps
				deps.Store = stoppedCleanup{w.deps.Store}
				if _, err := commands.NewEraseUserHandler(deps).Handle(ctx, w.tenant, commands.EraseUser{Username: "ann", Reason: "a request", ErasureID: uuid.NewString()}, w.meta()); err != nil {
					t.Errorf("erase: %v", err)
				}
			}
			deps := w.deps
			deps.Store = late
			if err := tc.command(ctx, w, deps); apperr.CodeOf(err) != apperr.CodeNotFound {
				t.Errorf("the %s answered %v, want not found: ann was erased before it committed", tc.name, err)
			}
			after, err := w.deps.Store.LoadGroup(ctx, w.tenant, "g")
			must(t, err)
			if after.State.Version != before.State.Version {
				t.Errorf("the group went from version %d to %d: a record was written after ann's erasure", before.State.Version, after.State.Version)
			}
		})
	}
}
