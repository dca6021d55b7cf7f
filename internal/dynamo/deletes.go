package dynamo

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

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

func deleteCountID(shard int) string { return fmt.Sprintf("%s%02d", deletesPrefix, shard) }

func deleteCountKey(shard int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str(deleteCountID(shard)), "sk": str(skDeleteCount)}
}

// deleteShard is the shard of username's count.
func deleteShard(username string) int {
	h := fnv.New32a()
	h.Write([]byte(username))
	return int(h.Sum32() % deleteShards)
}

// countUserDelete raises the count on the item of username's shard.
func countUserDelete(table, username string) *types.Update {
	return &types.Update{
		TableName:                 aws.String(table),
		Key:                       deleteCountKey(deleteShard(username)),
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": deleteCountAtt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
	}
}

// UserDeletes is the sum of the count's items, read strongly consistently.
func (s *CommandStore) UserDeletes(ctx context.Context, t commands.Tenant) (int64, error) {
	all := make([]int, deleteShards)
	for i := range all {
		all[i] = i
	}
	counts, err := s.readDeleteCounts(ctx, t, all)
	var sum int64
	for _, n := range counts {
		sum += n
	}
	return sum, err
}

// UserDeleteCounts are the counts of the shards of the usernames (0 for an item not
// written yet), keyed by the item's id.
func (s *CommandStore) UserDeleteCounts(ctx context.Context, t commands.Tenant, usernames []string) (commands.DeleteCounts, error) {
	seen := map[int]bool{}
	var shards []int
	for _, u := range usernames {
		if sh := deleteShard(u); !seen[sh] {
			seen[sh] = true
			shards = append(shards, sh)
		}
	}
	return s.readDeleteCounts(ctx, t, shards)
}

func (s *CommandStore) readDeleteCounts(ctx context.Context, t commands.Tenant, shards []int) (commands.DeleteCounts, error) {
	out := make(commands.DeleteCounts, len(shards))
	if len(shards) == 0 {
		return out, nil
	}
	keys := make([]map[string]types.AttributeValue, len(shards))
	for i, sh := range shards {
		keys[i] = deleteCountKey(sh)
		out[deleteCountID(sh)] = 0
	}
	items, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		n, err := getN(it, deleteCountAtt)
		if err != nil {
			return nil, err
		}
		out[getS(it, "id")] = n
	}
	return out, nil
}

// deleteCountChecks are the conditions of a transaction decided on counts: each count
// item still holds the value read.
func deleteCountChecks(table string, counts commands.DeleteCounts) []types.TransactWriteItem {
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]types.TransactWriteItem, 0, len(ids))
	for _, id := range ids {
		cc := &types.ConditionCheck{
			TableName:                aws.String(table),
			Key:                      map[string]types.AttributeValue{"id": str(id), "sk": str(skDeleteCount)},
			ExpressionAttributeNames: map[string]string{"#n": deleteCountAtt},
		}
		if n := counts[id]; n == 0 {
			cc.ConditionExpression = aws.String("attribute_not_exists(#n)")
		} else {
			cc.ConditionExpression = aws.String("#n = :n")
			cc.ExpressionAttributeValues = map[string]types.AttributeValue{":n": num(n)}
		}
		out = append(out, types.TransactWriteItem{ConditionCheck: cc})
	}
	return out
}
