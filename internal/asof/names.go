package asof

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// GroupRenamed records that group gid left the name oldKey for newName (key newKey) at
// instant at: the old name's holding ends, the new one's begins, and the group's life
// item names it so from then on. It is what the projector calls for a group rename; the
// group's intervals are keyed by its id and do not change.
func (x *Index) GroupRenamed(ctx context.Context, table, gid, oldKey, newKey, newName string, at int64) error {
	if err := x.endHolding(ctx, table, groupName(oldKey), gid, at); err != nil {
		return err
	}
	if err := x.held(ctx, table, groupName(newKey), at, gid, 0); err != nil {
		return err
	}
	_, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(groupLife(gid), lifeSK),
		UpdateExpression:          aws.String("SET g = :g, #n = :name"),
		ExpressionAttributeNames:  map[string]string{"#n": nameAttr(at)},
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": s(gid), ":name": s(newName)},
	})
	if err != nil {
		return fmt.Errorf("as-of index: group rename: %w", err)
	}
	return nil
}

// MarkCoverage records that the index of table is complete for every instant from since
// on; an earlier mark stands (the index cannot become less complete).
func MarkCoverage(ctx context.Context, db Updater, table string, since int64) error {
	_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(MetaID, CoverageSK),
		UpdateExpression:          aws.String("SET since = :s"),
		ConditionExpression:       aws.String("attribute_not_exists(since) OR since > :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": n(since)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("as-of index: coverage mark: %w", err)
	}
	return nil
}
