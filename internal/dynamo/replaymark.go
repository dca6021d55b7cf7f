package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// A replay's life in the tenant row (docs/storage.md): StartReplay names the tables under
// construction, each scan segment's progress is saved as it goes, SwitchTables points the
// readers at the new tables and forgets the progress, and ClearReplayNeeded removes the
// mark the replay was started for.

func (t *Tenants) key(system, tenant string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)}
}

// StartReplay names the tables a replay builds in the tenant row, with the scan's segment
// count; from then on live projectors write into them too. It fails if a replay is named
// already.
func (t *Tenants) StartReplay(ctx context.Context, system, tenant, nextUsers, nextActivities string, segments int) error {
	_, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(t.table),
		Key:       t.key(system, tenant),
		UpdateExpression: aws.String("SET next_users_table = :u, next_activities_table = :a, replay_segments = :n, replay_cursors = :c, " +
			"updated_at = :now REMOVE replay_done ADD row_version :one"),
		ConditionExpression: aws.String("attribute_not_exists(next_users_table)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":u": str(nextUsers), ":a": str(nextActivities),
			":c":   &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
			":n":   &types.AttributeValueMemberN{Value: strconv.Itoa(segments)},
			":now": str(FormatTime(time.Now())), ":one": num(1),
		},
	})
	if err != nil {
		return fmt.Errorf("start replay of %s/%s: %w", system, tenant, err)
	}
	return nil
}

// ReplayPosition is a replay's progress: Segments is the scan's segment count (fixed when
// the replay starts, so a resumed run splits the table the same way), Cursors maps a
// segment in progress to its saved cursor, Done holds the finished segments.
type ReplayPosition struct {
	Segments int
	Cursors  map[string]string
	Done     map[int]bool
}

// ReplayPosition reads a replay's progress (strongly consistent).
func (t *Tenants) ReplayPosition(ctx context.Context, system, tenant string) (ReplayPosition, error) {
	out, err := t.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.table), Key: t.key(system, tenant), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("replay_segments, replay_cursors, replay_done"),
	})
	if err != nil {
		return ReplayPosition{}, fmt.Errorf("read replay position: %w", err)
	}
	var row struct {
		Segments int               `dynamodbav:"replay_segments"`
		Cursors  map[string]string `dynamodbav:"replay_cursors"`
		Done     []int             `dynamodbav:"replay_done,numberset"`
	}
	if err := attributevalue.UnmarshalMap(out.Item, &row); err != nil {
		return ReplayPosition{}, fmt.Errorf("decode replay position: %w", err)
	}
	pos := ReplayPosition{Segments: row.Segments, Cursors: row.Cursors, Done: map[int]bool{}}
	if pos.Cursors == nil {
		pos.Cursors = map[string]string{}
	}
	for _, seg := range row.Done {
		pos.Done[seg] = true
	}
	return pos, nil
}

// SaveReplayCursor records a segment's progress while a replay is named.
func (t *Tenants) SaveReplayCursor(ctx context.Context, system, tenant string, segment int, cursor string) error {
	return t.saveSegment(ctx, system, tenant, segment, "SET replay_cursors.#s = :c",
		map[string]types.AttributeValue{":c": str(cursor)})
}

// FinishReplaySegment records a segment among the finished ones and drops its cursor.
func (t *Tenants) FinishReplaySegment(ctx context.Context, system, tenant string, segment int) error {
	return t.saveSegment(ctx, system, tenant, segment, "ADD replay_done :s REMOVE replay_cursors.#s",
		map[string]types.AttributeValue{":s": &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(segment)}}})
}

func (t *Tenants) saveSegment(ctx context.Context, system, tenant string, segment int, update string, values map[string]types.AttributeValue) error {
	_, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(t.table),
		Key:                       t.key(system, tenant),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("attribute_exists(next_users_table)"),
		ExpressionAttributeNames:  map[string]string{"#s": strconv.Itoa(segment)},
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return fmt.Errorf("save replay position: %w", err)
	}
	return nil
}

// SwitchTables points the tenant's readers at the tables the replay named, as generation
// gen, and forgets the replay's progress. It fails unless those are the tables named.
func (t *Tenants) SwitchTables(ctx context.Context, system, tenant, users, activities string, gen int) error {
	// The tenant-list marker moves with the row, so that readers caching rows (the query
	// API) follow the switch within a round rather than after their cache time.
	_, err := t.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(t.table),
			Key:       t.key(system, tenant),
			UpdateExpression: aws.String("SET users_table = :u, activities_table = :a, generation = :g, updated_at = :now " +
				"REMOVE next_users_table, next_activities_table, replay_segments, replay_cursors, replay_done " +
				"ADD row_version :one"),
			ConditionExpression: aws.String("next_users_table = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":u": str(users), ":a": str(activities), ":g": num(int64(gen)), ":now": str(FormatTime(time.Now())), ":one": num(1),
			},
		}},
		{Update: t.markerUpdate()},
	}})
	if err != nil {
		return fmt.Errorf("switch %s/%s to the new tables: %w", system, tenant, translate(err))
	}
	return nil
}

// ClearReplayNeeded removes a tenant's replay_needed mark once a replay has switched its
// readers to usersTable, but only the mark with this reason, the one the replay was
// started for: a mark recorded since carries another reason and stays. It reports
// whether the mark was removed.
func (t *Tenants) ClearReplayNeeded(ctx context.Context, system, tenant, usersTable, reason string) (bool, error) {
	_, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(t.table),
		Key:                 t.key(system, tenant),
		UpdateExpression:    aws.String("REMOVE replay_needed, replay_reason ADD row_version :one"),
		ConditionExpression: aws.String("users_table = :u AND replay_reason = :r"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":u": str(usersTable), ":r": str(reason), ":one": num(1),
		},
	})
	if sdkerr.ConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("clear the replay mark of %s/%s: %w", system, tenant, translate(err))
	}
	return true, nil
}
