package erasure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/bounded"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// Resuming (docs/erasure.md, "The bound"): an erasure goes on without its stream record.
// Its first call keeps two items:
//   - in the ledger table, under the partition `pending`, `<system>/<tenant>/<erasure id>`:
//     the stage's erasures not known to be done, which the resume task reads (one Query,
//     not the ledger); it goes once the entry is done;
//   - in the tenant's write table, `erasure#<erasure id>` / `erasure`: what the user.erased
//     record says (the username, the incarnation's id, its groups), which the ledger may
//     not hold; it goes with the write model's tombstone, in the second pass.

const (
	pendingPartition = "pending"
	pointerSK        = "erasure"
)

func pointerKey(erasureID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": s("erasure#" + erasureID), "sk": s(pointerSK)}
}

func pendingKey(system, tenant, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"tenant": s(pendingPartition), "erasure_id": s(system + "/" + tenant + "/" + id)}
}

// remember keeps where the resume task finds the erasure.
func (x *Eraser) remember(ctx context.Context, row dynamo.Tenant, e *events.UserErased) error {
	item := pointerKey(e.ErasureID)
	item["username"] = s(e.User.Username)
	item["erasure_id"] = s(e.ErasureID)
	if e.PreviousID != "" {
		item["previous_id"] = s(e.PreviousID)
	}
	if len(e.Groups) > 0 {
		item["groups"] = &types.AttributeValueMemberSS{Value: e.Groups}
	}
	if _, err := x.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(row.CommandsTable), Item: item}); err != nil {
		return fmt.Errorf("keep erasure %s for its resumption: %w", e.ErasureID, dynamo.Translate(err))
	}
	p := pendingKey(row.SystemID, row.TenantID, e.ErasureID)
	p["since"] = s(dynamo.FormatTime(x.opts.Now()))
	if _, err := x.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(x.ledger.table), Item: p}); err != nil {
		return fmt.Errorf("list erasure %s as pending: %w", e.ErasureID, dynamo.Translate(err))
	}
	return nil
}

// forgetPointer removes the erasure's pointer (the second pass is done).
func (x *Eraser) forgetPointer(ctx context.Context, row dynamo.Tenant, erasureID string) error {
	_, err := x.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(row.CommandsTable), Key: pointerKey(erasureID)})
	if err != nil && !missing(err) {
		return fmt.Errorf("remove the pointer of erasure %s: %w", erasureID, dynamo.Translate(err))
	}
	return nil
}

// record is the user.erased record's content, from the pointer, or (an erasure whose
// record never reached a projector) from the write model's tombstone, found by a Scan.
func (x *Eraser) record(ctx context.Context, row dynamo.Tenant, erasureID string) (*events.UserErased, bool, error) {
	out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(row.CommandsTable), Key: pointerKey(erasureID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, false, fmt.Errorf("read the pointer of erasure %s: %w", erasureID, dynamo.Translate(err))
	}
	if out.Item != nil {
		e := &events.UserErased{ErasureID: erasureID, User: events.User{Username: attrS(out.Item, "username")}, PreviousID: attrS(out.Item, "previous_id")}
		if ss, ok := out.Item["groups"].(*types.AttributeValueMemberSS); ok {
			e.Groups = ss.Value
		}
		return e, true, nil
	}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(row.CommandsTable),
		FilterExpression:          aws.String("sk = :c AND erasure_id = :e AND begins_with(id, :u)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": s(dynamo.SKConfig), ":e": s(erasureID), ":u": s("user#")},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		page, err := x.db.Scan(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("scan %s for the tombstone of erasure %s: %w", row.CommandsTable, erasureID, dynamo.Translate(err))
		}
		for _, it := range page.Items {
			return &events.UserErased{ErasureID: erasureID, User: events.User{Username: strings.TrimPrefix(attrS(it, "id"), "user#")},
				PreviousID: attrS(it, "user_id")}, true, nil
		}
		if len(page.LastEvaluatedKey) == 0 {
			return nil, false, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Resume does the next call's share of one erasure without its stream record (`ssodirctl
// erasures resume`): again as Step's; zero also when what is left is the Keycloak sync's.
func (x *Eraser) Resume(ctx context.Context, system, tenant, id string) (time.Time, error) {
	entry, err := x.ledger.Get(ctx, system, tenant, id)
	if err != nil {
		return time.Time{}, err
	}
	if entry.Status == dynamo.ErasureStatusDone || entry.Places[commands.PlaceWriteModel] == dynamo.ErasureStatusDone {
		return time.Time{}, nil
	}
	row, err := x.tenants.Get(ctx, system, tenant)
	if err != nil {
		return time.Time{}, err
	}
	e, ok, err := x.record(ctx, row, id)
	if err != nil {
		return time.Time{}, err
	}
	if !ok {
		return time.Time{}, apperr.Conflict("erasure_unreachable", "erasure "+id+" has no tombstone in the write model: nothing of it is left for the projector")
	}
	return x.Step(ctx, system, tenant, e)
}

// ResumeResult says what a run of ResumePending did.
type ResumeResult struct {
	// Pending is how many erasures the pending list held; Resumed how many this run
	// worked on, Finished how many of those the projector's part is done of; Left how many
	// the run had no time for.
	Pending, Resumed, Finished, Left int
}

// ResumePending works on the stage's pending erasures until ctx's deadline (less the
// margin) or the budget: those that nothing has worked on for stalledAfter (0: all of
// them — the Lambda projector acknowledges a user.erased record after its first call and
// leaves the rest to this). An erasure waiting for its second pass is waited for when it
// is due within the run. Entries done are dropped from the list.
func (x *Eraser) ResumePending(ctx context.Context, stalledAfter time.Duration) (ResumeResult, error) {
	ctx = x.bounded(ctx)
	var res ResumeResult
	refs, err := x.ledger.pendingRefs(ctx)
	if err != nil {
		return res, err
	}
	res.Pending = len(refs)
	var errs []error
	for _, ref := range refs {
		if bounded.Passed(ctx) {
			res.Left++
			continue
		}
		finished, worked, err := x.resumeOne(ctx, ref, stalledAfter)
		if err != nil {
			x.opts.Log.Warn("erasure: could not resume", zap.String("tenant", ref[0]+"/"+ref[1]), zap.String("erasure_id", ref[2]), zap.Error(err))
			errs = append(errs, err)
		}
		if worked {
			res.Resumed++
		}
		if finished {
			res.Finished++
		}
	}
	return res, errors.Join(errs...)
}

func (x *Eraser) resumeOne(ctx context.Context, ref [3]string, stalledAfter time.Duration) (finished, worked bool, err error) {
	system, tenant, id := ref[0], ref[1], ref[2]
	entry, err := x.ledger.Get(ctx, system, tenant, id)
	if apperr.KindOf(err) == apperr.KindNotFound {
		return false, false, x.ledger.dropPending(ctx, system, tenant, id)
	}
	if err != nil {
		return false, false, err
	}
	if entry.Status == dynamo.ErasureStatusDone {
		return false, false, x.ledger.dropPending(ctx, system, tenant, id)
	}
	if entry.Places[commands.PlaceWriteModel] == dynamo.ErasureStatusDone {
		return false, false, nil // the Keycloak sync's part is left
	}
	if stalledAfter > 0 && x.opts.Now().Sub(lastWorked(entry)) < stalledAfter {
		return false, false, nil
	}
	row, err := x.tenants.Get(ctx, system, tenant)
	if err != nil {
		return false, false, err
	}
	e, ok, err := x.record(ctx, row, id)
	if err != nil || !ok {
		return false, false, err
	}
	for {
		again, err := x.Step(ctx, system, tenant, e)
		if err != nil {
			return false, true, err
		}
		if again.IsZero() {
			return true, true, nil
		}
		if bounded.Passed(ctx) || !bounded.Deadline(ctx).After(again) {
			return false, true, nil
		}
		t := time.NewTimer(time.Until(again))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, true, nil
		case <-t.C:
		}
	}
}

// lastWorked is when a call last did something to the erasure, as the entry tells.
func lastWorked(e Entry) time.Time {
	last := e.Progress.At
	for _, v := range []string{e.RequestedAt, e.SweptAt} {
		if t, err := dynamo.ParseTime(v); err == nil && t.After(last) {
			last = t
		}
	}
	return last
}

// pendingRefs reads the stage's pending list: system, tenant, erasure id.
func (l *Ledger) pendingRefs(ctx context.Context) ([][3]string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(l.table),
		KeyConditionExpression:    aws.String("tenant = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(pendingPartition)},
		ConsistentRead:            aws.Bool(true),
	}
	var out [][3]string
	for {
		page, err := l.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("read the pending erasures: %w", dynamo.Translate(err))
		}
		for _, it := range page.Items {
			parts := strings.SplitN(attrS(it, "erasure_id"), "/", 3)
			if len(parts) == 3 {
				out = append(out, [3]string{parts[0], parts[1], parts[2]})
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

func (l *Ledger) dropPending(ctx context.Context, system, tenant, id string) error {
	_, err := l.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(l.table), Key: pendingKey(system, tenant, id)})
	if err != nil {
		return fmt.Errorf("drop erasure %s from the pending list: %w", id, dynamo.Translate(err))
	}
	return nil
}

// ListPending is the tenant's erasures still pending (`ssodirctl erasures list
// --pending`), read from the tenant's entries.
func (l *Ledger) ListPending(ctx context.Context, system, tenant string) ([]Entry, error) {
	all, err := l.List(ctx, system, tenant)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range all {
		if e.Status != dynamo.ErasureStatusDone {
			out = append(out, e)
		}
	}
	return out, nil
}

// StalledAfter is how long an erasure goes without a call before the long-running
// projector's resume loop takes it up: its settle wait, and two calls' budgets more.
func StalledAfter(settle time.Duration) time.Duration {
	if settle <= 0 {
		settle = DefaultSettle
	}
	return settle + 2*DefaultBudget + time.Minute
}
