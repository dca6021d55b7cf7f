package dynamo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// The tenant's count of live users (and of live groups), docs/storage.md: how many id
// lookups (`ids#<kind>`) there are, without reading them, for SCIM's totalResults.
//
//   - `live#<kind>#<shard>` / `count`: attribute `n`, raised or lowered in the transaction
//     of every change that writes or removes an id lookup (a create, a delete, an erasure,
//     a backfill), on the shard of the aggregate's id; `w` counts the changes that touched
//     the shard, so that a reader can tell that none did meanwhile; `b<xyz>` is moved with
//     `n` and counts the lookups of the id block xyz (idblocks.go), whose shard it is.
//     liveShards items, each in its own partition, so that concurrent creates seldom meet
//     on one item; a shard holds the counts of idBlocks/liveShards blocks (a few KB).
//   - `live#<kind>` / `base`: attribute `n`, the lookups there were that the shards do not
//     count (those written before the count existed). Written once per tenant and kind,
//     by CountLive, when it has counted the lookups and seen no change in the meantime.
//     Without it the count is not known (LiveCount's known is false).
//
// The count is base + the shards' n.
const (
	liveShards  = 16
	livePrefix  = "live#"
	skLiveCount = "count"
	skLiveBase  = "base"
)

func liveShardKey(kind events.AggregateKind, shard int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str(fmt.Sprintf("%s%s#%02d", livePrefix, kind, shard)), "sk": str(skLiveCount)}
}

func liveBaseKey(kind events.AggregateKind) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str(livePrefix + string(kind)), "sk": str(skLiveBase)}
}

// liveShard is the shard of the id's block: ids are random, so creates spread evenly over
// the shards. (Shards counted by a hash of the id before the blocks existed: the count,
// their sum, is the same whichever shard a change moved.)
func liveShard(id string) int { return idBlock(id) % liveShards }

// liveCountItems are the updates of the live counts for a change that writes the lookups
// put and removes the lookups del: one per shard whose count moves. Only id lookups count;
// a rename, which rewrites an id lookup in place, goes through its own transaction and
// counts nothing.
func liveCountItems(table string, put, del []commands.Lookup) []types.TransactWriteItem {
	type at struct {
		kind  events.AggregateKind
		shard int
	}
	delta := map[at]int{}
	blocks := map[at]map[int]int{}
	move := func(l commands.Lookup, d int) {
		if l.By != commands.LookupByID {
			return
		}
		k := at{l.Kind, liveShard(l.ID)}
		delta[k] += d
		if blocks[k] == nil {
			blocks[k] = map[int]int{}
		}
		blocks[k][idBlock(l.ID)] += d
	}
	for _, l := range put {
		move(l, 1)
	}
	for _, l := range del {
		move(l, -1)
	}
	var out []types.TransactWriteItem
	keys := slices.SortedFunc(maps.Keys(delta), func(a, b at) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.shard, b.shard))
	})
	for _, k := range keys {
		expr := "ADD #n :d, #w :one"
		names := map[string]string{"#n": "n", "#w": "w"}
		values := map[string]types.AttributeValue{":d": num(int64(delta[k])), ":one": num(1)}
		for _, b := range slices.Sorted(maps.Keys(blocks[k])) {
			if d := blocks[k][b]; d != 0 {
				name, value := fmt.Sprintf("#b%d", b), fmt.Sprintf(":b%d", b)
				expr += ", " + name + " " + value
				names[name], values[value] = blockAttr(b), num(int64(d))
			}
		}
		if len(names) == 2 && delta[k] == 0 {
			continue
		}
		out = append(out, types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(table),
			Key:                       liveShardKey(k.kind, k.shard),
			UpdateExpression:          aws.String(expr),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
		}})
	}
	return out
}

// liveState is what the count's items say: the base (if written), each shard's n and w,
// and, when read (withBlocks), the blocks' counts in the shards and their base.
type liveState struct {
	base    int64
	hasBase bool
	n, w    map[string]int64
	// blocks are the shards' counts of each block; blockBase the blocks' base (if written).
	blocks       *[idBlocks]int64
	blockBase    *[idBlocks]int64
	hasBlockBase bool
}

func (s *CommandStore) readLive(ctx context.Context, t commands.Tenant, kind events.AggregateKind, withBlocks bool) (liveState, error) {
	keys := []map[string]types.AttributeValue{liveBaseKey(kind)}
	for i := range liveShards {
		keys = append(keys, liveShardKey(kind, i))
	}
	if withBlocks {
		keys = append(keys, blocksBaseKey(kind))
	}
	items, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return liveState{}, err
	}
	st := liveState{n: map[string]int64{}, w: map[string]int64{}}
	if withBlocks {
		st.blocks, st.blockBase = new([idBlocks]int64), new([idBlocks]int64)
	}
	for _, it := range items {
		n, _ := getN(it, "n")
		switch getS(it, "sk") {
		case skLiveBase:
			st.base, st.hasBase = n, true
			continue
		case skBlocksBase:
			st.hasBlockBase = true
			addBlocks(st.blockBase, it)
			continue
		}
		w, _ := getN(it, "w")
		st.n[getS(it, "id")], st.w[getS(it, "id")] = n, w
		if withBlocks {
			addBlocks(st.blocks, it)
		}
	}
	return st, nil
}

func (st liveState) sum() int64 {
	var n int64
	for _, v := range st.n {
		n += v
	}
	return n
}

// LiveCount is the count of the live users (or groups), from the count's items (one
// BatchGetItem of 17 small items, strongly consistent), whatever the tenant's size;
// known is false while the tenant's count has no base (CountLive makes it).
func (s *CommandStore) LiveCount(ctx context.Context, t commands.Tenant, kind events.AggregateKind) (n int, known bool, err error) {
	st, err := s.readLive(ctx, t, kind, false)
	if err != nil || !st.hasBase {
		return 0, false, err
	}
	return int(st.base + st.sum()), true, nil
}

// CountLive counts the live users (or groups) by their id lookups (CountIDs: it reads
// them all), and writes the count's base when no change touched the count while they
// were counted (the shards read before and after the count are the same), so that from
// then on LiveCount knows the count. Two processes may both count; the first base
// written stays (both are right).
func (s *CommandStore) CountLive(ctx context.Context, t commands.Tenant, kind events.AggregateKind) (int, error) {
	before, err := s.readLive(ctx, t, kind, false)
	if err != nil {
		return 0, err
	}
	if before.hasBase {
		return int(before.base + before.sum()), nil
	}
	n, err := s.CountIDs(ctx, t, kind)
	if err != nil {
		return 0, err
	}
	after, err := s.readLive(ctx, t, kind, false)
	if err != nil {
		return 0, err
	}
	if after.hasBase || !maps.Equal(before.w, after.w) {
		// Another process wrote the base, or a change moved the count during the Query:
		// this answer is right for its time, the next count tries again.
		return n, nil
	}
	base := maps.Clone(liveBaseKey(kind))
	base["n"] = num(int64(n) - after.sum())
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table(t)), Item: base,
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return 0, fmt.Errorf("write the base of the %s count: %w", kind, notFoundTenant(err))
	}
	return n, nil
}

// LiveCountItems are the count updates of a change that writes the lookups put and removes
// the lookups del, as the command store writes them (the bench's raw baseline writes the
// same).
func LiveCountItems(table string, put, del []commands.Lookup) []types.TransactWriteItem {
	return liveCountItems(table, put, del)
}

// LiveBaseItem is the base of a tenant's count of live users (or groups) that holds n
// lookups the shards do not count (the bench's seeding, which writes lookups without a
// command, writes it).
func LiveBaseItem(kind events.AggregateKind, n int) map[string]types.AttributeValue {
	it := liveBaseKey(kind)
	it["n"] = num(int64(n))
	return it
}
