package projector_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
)

// lateStore is the real command store for a members change that an erasure overtakes:
// before the change's transaction is sent, the hook runs once (the erasure, carried out).
type lateStore struct {
	commands.Store
	once         sync.Once
	beforeCommit func()
}

func (s *lateStore) Append(ctx context.Context, t commands.Tenant, c commands.Change) error {
	if c.Event.Type == events.GroupMembersChangedType {
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
	x := erasure.NewEraser(w.db, w.names, w.tenants, events.NewRegistry(), erasure.Options{Settle: time.Millisecond})
	w.handler.Erase(x, erasure.NewFilter(erasure.NewLedger(w.db, w.names), time.Millisecond))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ann, err := commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "ann", Email: "ann.canary@example.org", FirstName: "Anncanary"}, w.meta())
	must(err)
	must(second(commands.NewCreateUserHandler(w.deps, nil).Handle(ctx, w.tenant, commands.CreateUser{Username: "carl"}, w.meta())))
	must(second(commands.NewCreateGroupHandler(w.deps).Handle(ctx, w.tenant, commands.CreateGroup{Name: "G"}, w.meta())))
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
			must(err)
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
