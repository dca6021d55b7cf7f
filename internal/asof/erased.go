package asof

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An erased person's life item outlives their records: the user's partition, which a
// replay rebuilds life items from, is gone with the erasure. So the erasure keeps in its
// ledger entry what the index's life item of each erased id holds after Erase (ErasedLives
// — only its hash, instants, statuses, actors and `erased`: no name, no id), and a replay
// writes it back into the tables it builds (PutErasedLives). With the rewritten group
// records, which keep the same hash (events' ErasedIDHash), the replayed index then
// answers as the live one did: an erased member, whose intervals end where the user's
// deletion ended them.

// isErasedLifeAttr: the attributes of a life item that an erased life keeps.
func isErasedLifeAttr(a string) bool {
	switch a {
	case "h", "created", "deleted", "deleted_by", "erased":
		return true
	}
	return isStatusAttr(a)
}

// ErasedLives reads the life items of the hashes in table, each as an erased life keeps
// it (no `uid`, no names, whatever the item still held); a hash without a life item is
// left out.
func ErasedLives(ctx context.Context, db Eraser, table string, hashes []string) (map[string]map[string]types.AttributeValue, error) {
	out := map[string]map[string]types.AttributeValue{}
	for _, h := range hashes {
		got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(userLife(h), lifeSK), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil, fmt.Errorf("as-of erased life: %w", err)
		}
		if got.Item == nil {
			continue
		}
		life := map[string]types.AttributeValue{}
		for a, v := range got.Item {
			if isErasedLifeAttr(a) {
				life[a] = v
			}
		}
		life["h"], life["erased"] = s(h), &types.AttributeValueMemberBOOL{Value: true}
		out[h] = life
	}
	return out, nil
}

// Putter is what PutErasedLives needs.
type Putter interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// PutErasedLives writes erased lives (as ErasedLives read them) into table where the hash
// has no life item yet: one there already is the index's own (a record projected live
// into the table), which the erasure's sweep erases.
func PutErasedLives(ctx context.Context, db Putter, table string, lives map[string]map[string]types.AttributeValue) error {
	for h, life := range lives {
		item := map[string]types.AttributeValue{}
		for a, v := range life {
			if isErasedLifeAttr(a) {
				item[a] = v
			}
		}
		maps.Copy(item, key(userLife(h), lifeSK))
		item["h"], item["erased"] = s(h), &types.AttributeValueMemberBOOL{Value: true}
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item, ConditionExpression: aws.String("attribute_not_exists(id)")})
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) {
			return fmt.Errorf("as-of erased life: %w", err)
		}
	}
	return nil
}
