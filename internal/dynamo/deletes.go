package dynamo

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
)

// The tenant's count of user deletes (docs/storage.md): `deletes#<shard>` / `count`,
// attribute `n`, raised by one in the transaction of every change that writes a user
// tombstone. It is spread over deleteShards items, each in its own partition, so that
// concurrent deletes seldom meet on one item; the count is their sum. A members change
// reads it before deciding and again after writing its items: when it has not moved, no
// user it added can have been deleted in between, and it need not read every one again.
const (
	deleteShards   = 16
	deletesPrefix  = "deletes#"
	skDeleteCount  = "count"
	deleteCountAtt = "n"
)

func deleteCountKey(shard int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str(fmt.Sprintf("%s%02d", deletesPrefix, shard)), "sk": str(skDeleteCount)}
}

// countUserDelete raises the count on the item of username's shard.
func countUserDelete(table, username string) *types.Update {
	h := fnv.New32a()
	h.Write([]byte(username))
	return &types.Update{
		TableName:                 aws.String(table),
		Key:                       deleteCountKey(int(h.Sum32() % deleteShards)),
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": deleteCountAtt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
	}
}

// UserDeletes is the sum of the count's items, read strongly consistently.
func (s *CommandStore) UserDeletes(ctx context.Context, t commands.Tenant) (int64, error) {
	keys := make([]map[string]types.AttributeValue, deleteShards)
	for i := range keys {
		keys[i] = deleteCountKey(i)
	}
	items, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, it := range items {
		n, err := getN(it, deleteCountAtt)
		if err != nil {
			return 0, err
		}
		sum += n
	}
	return sum, nil
}
