package erasure

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// SecondPass sweeps the read side and the dead letters again (records of the user read
// before the erasure may have been applied, or dead-lettered, since the first pass) and
// marks them done, then removes the write model's tombstone on condition that it is still
// this erasure's, which frees the name, and marks the write model done. Run again after
// the name was freed, it touches nothing and only marks the places.
func (x *Eraser) SecondPass(ctx context.Context, row dynamo.Tenant, subj *Subject, erasureID string, groups []string) error {
	return x.secondPass(ctx, row, subj, erasureID, groups, true, true)
}

// secondPass is SecondPass; live says the tables are the tenant's own (a tombstone holds
// the name), shared that the tables every tenant shares are swept too.
func (x *Eraser) secondPass(ctx context.Context, row dynamo.Tenant, subj *Subject, erasureID string, groups []string, live, shared bool) error {
	// Everything below finds the person by the name, which is safe only while the name is
	// refused: while the write model's tombstone is still this erasure's, nobody else can
	// have been created under it. Once it is gone (an earlier run of this pass deleted it
	// and then could not mark the places), a new user may hold the name: nothing is swept
	// again, the places are only marked (docs/erasure.md, "Only its person").
	held, err := x.holdsName(ctx, row.CommandsTable, subj.Username, erasureID, live)
	if err != nil {
		return err
	}
	if held {
		if subj.IDOnly {
			// The history left is the earlier incarnations' (the first pass deleted the
			// erased one's): the erased one started after it.
			if subj.From, err = x.keptHistoryEnd(ctx, row.CommandsTable, subj.Username); err != nil {
				return err
			}
		}
		found := map[string]bool{}
		for _, g := range groups {
			found[g] = true
		}
		if err := x.sweepReadSide(ctx, row, subj, found); err != nil {
			return err
		}
		// Nothing is written under a former name after the rename, but a membership
		// tombstone there may have been projected since the first pass.
		if err := x.sweepFormerMemberships(ctx, row, subj, found); err != nil {
			return err
		}
		// A members change that committed before the erasure writes its index items right
		// after its commit: one that came after the first pass's deletion goes now.
		if err := x.deleteMemberIndex(ctx, row.CommandsTable, subj); err != nil {
			return err
		}
		places := []string{commands.PlaceReadModel, commands.PlaceActivities}
		if shared {
			if err := x.sweepDeadLetters(ctx, row, subj); err != nil {
				return err
			}
			places = append(places, commands.PlaceDeadLetters)
		}
		// The places swept by name are marked before the name is freed, so that no later
		// run has a reason to sweep them again.
		if err := x.ledger.MarkDone(ctx, row.SystemID, row.TenantID, erasureID, places...); err != nil {
			return err
		}
		if err := x.releaseName(ctx, row.CommandsTable, subj, erasureID, live); err != nil {
			return err
		}
	}
	return x.ledger.MarkDone(ctx, row.SystemID, row.TenantID, erasureID,
		commands.PlaceWriteModel, commands.PlaceReadModel, commands.PlaceActivities, commands.PlaceDeadLetters)
}

// holdsName reports whether the user's partition is still this erasure's: its tombstone
// carries the erasure's id. In restored tables (live false) no tombstone blocks the name,
// and nothing is created there: the partition is the erased user's whenever the ledger's
// ids found it.
func (x *Eraser) holdsName(ctx context.Context, table, username, erasureID string, live bool) (bool, error) {
	if !live {
		return true, nil
	}
	out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": s(dynamo.UserID(username)), "sk": s(dynamo.SKConfig)},
	})
	if err != nil {
		return false, fmt.Errorf("read the tombstone of an erased user: %w", dynamo.Translate(err))
	}
	return out.Item != nil && attrS(out.Item, "erasure_id") == erasureID, nil
}

// releaseName deletes what is left of the erased incarnations in the user's write-model
// partition, the tombstone last and only on condition that it is still this erasure's:
// which frees the name. When earlier incarnations' history is kept (the erasure did not
// ask for all of them), the tombstone stays as a plain delete's, naming nobody: it
// carries on the version sequence that history holds.
func (x *Eraser) releaseName(ctx context.Context, table string, subj *Subject, erasureID string, live bool) error {
	id := dynamo.UserID(subj.Username)
	// The rest went in the first pass; anything written there since belongs to nobody
	// else either (the name was refused).
	if err := x.deletePartition(ctx, table, "id", id, subj.erasedWriteItem); err != nil {
		return err
	}
	key := map[string]types.AttributeValue{"id": s(id), "sk": s(dynamo.SKConfig)}
	var (
		cond *string
		vals map[string]types.AttributeValue
	)
	if live {
		cond = aws.String("erasure_id = :e")
		vals = map[string]types.AttributeValue{":e": s(erasureID)}
	}
	var err error
	if subj.From > 1 {
		if vals == nil {
			vals = map[string]types.AttributeValue{}
		}
		vals[":t"] = s(dynamo.FormatTime(x.opts.Now()))
		vals[":y"] = &types.AttributeValueMemberBOOL{Value: true}
		vals[":n"] = &types.AttributeValueMemberBOOL{Value: false}
		_, err = x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key, ConditionExpression: cond, ExpressionAttributeValues: vals,
			UpdateExpression: aws.String("SET deleted = :y, is_active = :n, created_at = :t, updated_at = :t " +
				"REMOVE erasure_id, user_id, email, first_name, last_name, attributes, password, cleanup_pending"),
		})
	} else {
		_, err = x.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key,
			ConditionExpression: cond, ExpressionAttributeValues: vals})
	}
	if err != nil && !sdkerr.ConditionFailed(err) {
		return fmt.Errorf("release the tombstone of an erased user: %w", dynamo.Translate(err))
	}
	return nil
}

// keptHistoryEnd is the version after the last history record left in the user's
// partition (1 when none is left).
func (x *Eraser) keptHistoryEnd(ctx context.Context, table, username string) (int64, error) {
	var last int64
	err := x.query(ctx, table, "id", dynamo.UserID(username), func(it map[string]types.AttributeValue) error {
		if dynamo.IsHistorySK(attrS(it, "sk")) {
			if v := historyVersion(it); v > last {
				last = v
			}
		}
		return nil
	})
	return last + 1, err
}

// historyVersion is a history record's version.
func historyVersion(it map[string]types.AttributeValue) int64 {
	if n, ok := it["version"].(*types.AttributeValueMemberN); ok {
		v, _ := strconv.ParseInt(n.Value, 10, 64)
		return v
	}
	v, _ := strconv.ParseInt(strings.TrimLeft(strings.TrimPrefix(attrS(it, "sk"), dynamo.SKConfig+"#"), "0"), 10, 64)
	return v
}
