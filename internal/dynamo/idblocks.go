package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// The id blocks (docs/storage.md): the id lookups' order (`ids#<kind>`, by id) cut into
// idBlocks ranges by the ids' first three characters ("000" to "fff": the ids are random
// UUIDs, so the blocks fill evenly; an id of another shape falls into the range its
// characters sort into). The count of live users (livecount.go) counts each block too, in
// the same update of the same shard item, so that the position of an id in the order is
// known without reading the lookups before it: a SCIM page at any startIndex (PageAt)
// reads the counts (one BatchGetItem of 18 small items), finds the block the page starts
// in, and reads the lookups from that block's start. With 4,096 blocks a block of a
// 100,000-user tenant holds some 25 lookups.
//
//   - `live#<kind>#<shard>` / `count`: `b<xyz>`, the shard's count of block xyz (the shard
//     of a block is its number modulo liveShards: 256 blocks a shard).
//   - `live#<kind>` / `blocks`: `b<xyz>`, the lookups of block xyz the shards do not count
//     (those written before the blocks were counted). Written once per tenant and kind, by
//     the first PageAt that finds it absent, which reads every id lookup once to count
//     them by block, and writes the base (conditioned on its absence) only when no change
//     touched the shards meanwhile (their `w` read before and after are the same), as
//     CountLive writes the count's base.
const (
	idBlocks      = 1 << 12
	idBlockDigits = 3
	skBlocksBase  = "blocks"
)

// blockStart is the smallest id of block b (block 0 also holds every id below it).
func blockStart(b int) string { return fmt.Sprintf("%0*x", idBlockDigits, b) }

func blockAttr(b int) string { return "b" + blockStart(b) }

// idBlock is the block of an id: the range of the order that holds it.
func idBlock(id string) int {
	if len(id) >= idBlockDigits {
		if v, err := strconv.ParseUint(id[:idBlockDigits], 16, 16); err == nil && isLowerHex(id[:idBlockDigits]) {
			return int(v)
		}
	}
	return max(sort.Search(idBlocks, func(b int) bool { return blockStart(b) > id })-1, 0)
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func blocksBaseKey(kind events.AggregateKind) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str(livePrefix + string(kind)), "sk": str(skBlocksBase)}
}

// addBlocks adds an item's block counts (its `b<xyz>` attributes) to counts.
func addBlocks(counts *[idBlocks]int64, it map[string]types.AttributeValue) {
	for name, v := range it {
		if len(name) != 1+idBlockDigits || name[0] != 'b' || !isLowerHex(name[1:]) {
			continue
		}
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		b, _ := strconv.ParseUint(name[1:], 16, 16)
		d, _ := strconv.ParseInt(n.Value, 10, 64)
		counts[b] += d
	}
}

// blocksItem is the blocks base item holding counts (the blocks of 0 left out).
func blocksItem(kind events.AggregateKind, counts *[idBlocks]int64) map[string]types.AttributeValue {
	it := blocksBaseKey(kind)
	for b, n := range counts {
		if n != 0 {
			it[blockAttr(b)] = num(n)
		}
	}
	return it
}

// BlocksBaseItem is the base of a tenant's block counts that holds the lookups of these
// ids, which the shards do not count (the bench's seeding, which writes lookups without a
// command, writes it).
func BlocksBaseItem(kind events.AggregateKind, ids []string) map[string]types.AttributeValue {
	var counts [idBlocks]int64
	for _, id := range ids {
		counts[idBlock(id)]++
	}
	return blocksItem(kind, &counts)
}

// blockCounts are the live users (or groups) of each block: the base and the shards'
// counts; a tenant without the base counts its lookups once (countBlocks).
func (s *CommandStore) blockCounts(ctx context.Context, t commands.Tenant, kind events.AggregateKind) (*[idBlocks]int64, error) {
	st, err := s.readLive(ctx, t, kind, true)
	if err != nil {
		return nil, err
	}
	if !st.hasBlockBase {
		return s.countBlocks(ctx, t, kind, st)
	}
	for b := range st.blocks {
		st.blocks[b] += st.blockBase[b]
	}
	return st.blocks, nil
}

// countBlocks counts the id lookups by block (it reads them all, keys only), and writes
// the blocks' base when no change touched the shards while they were counted. Two
// processes may both count; the first base written stays (both are right).
func (s *CommandStore) countBlocks(ctx context.Context, t commands.Tenant, kind events.AggregateKind, before liveState) (*[idBlocks]int64, error) {
	counts := new([idBlocks]int64)
	err := s.ListIDs(ctx, t, kind, "", func(l commands.Lookup) bool {
		counts[idBlock(l.ID)]++
		return true
	})
	if err != nil {
		return nil, err
	}
	after, err := s.readLive(ctx, t, kind, true)
	if err != nil {
		return nil, err
	}
	if after.hasBlockBase || !maps.Equal(before.w, after.w) {
		// Another process wrote the base, or a change moved a count during the Query:
		// these counts are right for their time, the next jump counts again.
		return counts, nil
	}
	var base [idBlocks]int64
	for b := range base {
		base[b] = counts[b] - after.blocks[b]
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table(t)), Item: blocksItem(kind, &base),
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return nil, fmt.Errorf("write the base of the %s blocks: %w", kind, notFoundTenant(err))
	}
	return counts, nil
}

// PageAt is the page of the live users (or groups), in the order of their ids, that
// starts at position skip (0 for the first) and holds at most n, with their total; more
// reports that the page ended on its limit. It costs the block counts (one BatchGetItem),
// and a Query of the lookups from the start of the block the page starts in: those of the
// block before the page, and the page. A change made meanwhile may shift the page by
// what it changed, as it shifts any index page.
func (s *CommandStore) PageAt(ctx context.Context, t commands.Tenant, kind events.AggregateKind, skip, n int) (page []commands.Lookup, total int, more bool, err error) {
	counts, err := s.blockCounts(ctx, t, kind)
	if err != nil {
		return nil, 0, false, err
	}
	var before int64
	start, found := 0, false
	for b, c := range counts {
		c = max(c, 0)
		if !found && before+c > int64(skip) {
			start, found = b, true
		}
		if !found {
			before += c
		}
		total += int(c)
	}
	if !found || n <= 0 {
		return nil, total, false, nil
	}
	offset := skip - int(before)
	from := ""
	if start > 0 {
		from = blockStart(start)
	}
	ls, more, err := s.pageIDs(ctx, t, kind, "", from, offset+n)
	if err != nil || len(ls) <= offset {
		return nil, total, false, err
	}
	return ls[offset:], total, more, nil
}
