package memberindex

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// segments is the number of segments the table's Scan is cut into, from its size as
// DescribeTable last reported it.
func (ix *Indexer) segments(ctx context.Context, table string) (int, error) {
	n, err := dynamo.ScanSegments(ctx, ix.db, table, ix.opts.SegmentItems)
	if err != nil {
		return 0, fmt.Errorf("describe %s: %w", table, dynamo.Translate(err))
	}
	return n, nil
}

// segment indexes the group records of segment seg of segs, and replaces the pending
// marks it finds with the items of their records. A segment cut short (a crash, the
// lease's end) is done again by the next call: its writes are idempotent.
func (ix *Indexer) segment(ctx context.Context, table string, seg, segs int) (records, items int64, err error) {
	in := &dynamodb.ScanInput{
		TableName:        aws.String(table),
		FilterExpression: aws.String("(begins_with(id, :g) AND begins_with(sk, :h)) OR id = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":g": s(dynamo.GroupID("")), ":h": s("config#"), ":p": s(dynamo.MemberIndexPending),
		},
		ConsistentRead: aws.Bool(true),
		Segment:        aws.Int32(int32(seg)),
		TotalSegments:  aws.Int32(int32(segs)),
	}
	if ix.opts.PageSize > 0 {
		in.Limit = aws.Int32(int32(ix.opts.PageSize))
	}
	for {
		out, err := ix.db.Scan(ctx, in)
		if err != nil {
			return records, items, fmt.Errorf("scan %s (segment %d of %d): %w", table, seg, segs, dynamo.Translate(err))
		}
		var recs, marks []map[string]types.AttributeValue
		for _, it := range out.Items {
			if attrS(it, "id") == dynamo.MemberIndexPending {
				marks = append(marks, it)
			} else {
				recs = append(recs, it)
			}
		}
		if len(marks) > 0 {
			// A writer that died between its commit and its items: its record's items here.
			var keys []map[string]types.AttributeValue
			for _, m := range marks {
				keys = append(keys, map[string]types.AttributeValue{
					"id": s(dynamo.GroupID(attrS(m, "group_key"))), "sk": s(dynamo.HistorySK(attrN(m, "version")))})
			}
			got, err := ix.batchGet(ctx, table, keys)
			if err != nil {
				return records, items, err
			}
			recs = append(recs, got...)
		}
		r, i, err := ix.index(ctx, table, recs)
		records, items = records+r, items+i
		if err != nil {
			return records, items, err
		}
		var dels []types.WriteRequest
		for _, m := range marks {
			dels = append(dels, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
				Key: map[string]types.AttributeValue{"id": m["id"], "sk": m["sk"]}}})
		}
		if err := ix.batchWrite(ctx, table, dels); err != nil {
			return records, items, err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return records, items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// indexed is a group record the backfill wrote index items for.
type indexed struct {
	key     string
	version int64
	ids     []string
}

func recordKey(group string, version int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": s(dynamo.GroupID(group)), "sk": s(dynamo.HistorySK(version))}
}

// index writes the index items of recs (the ids dynamo.MemberIndexItems, the live path's
// rule, finds), then reads the records again and deletes the items of the ids a record
// names no more: an erasure rewrote it meanwhile (package comment).
func (ix *Indexer) index(ctx context.Context, table string, recs []map[string]types.AttributeValue) (records, items int64, err error) {
	var done []indexed
	var puts []types.WriteRequest
	seen := map[string]bool{}
	for _, it := range recs {
		k := attrS(it, "id") + "/" + attrS(it, "sk")
		if seen[k] {
			continue
		}
		seen[k] = true
		env, err := dynamo.DecodeRecord(ix.reg, it)
		if err != nil {
			return records, items, fmt.Errorf("member index backfill of %s: %w", table, err)
		}
		its := dynamo.MemberIndexItems(env)
		if len(its) == 0 {
			continue
		}
		done = append(done, indexed{key: env.Key, version: env.Version, ids: dynamo.NamedMemberIDs(env.Payload)})
		for _, item := range its {
			puts = append(puts, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
	}
	if len(puts) == 0 {
		return 0, 0, nil
	}
	if err := ix.batchWrite(ctx, table, puts); err != nil {
		return 0, 0, err
	}
	keys := make([]map[string]types.AttributeValue, 0, len(done))
	for _, d := range done {
		keys = append(keys, recordKey(d.key, d.version))
	}
	again, err := ix.batchGet(ctx, table, keys)
	if err != nil {
		return 0, 0, err
	}
	now := map[string][]string{}
	for _, it := range again {
		env, err := dynamo.DecodeRecord(ix.reg, it)
		if err != nil {
			return 0, 0, fmt.Errorf("member index backfill of %s: %w", table, err)
		}
		now[attrS(it, "id")+"/"+attrS(it, "sk")] = dynamo.NamedMemberIDs(env.Payload)
	}
	var stale []types.WriteRequest
	for _, d := range done {
		still := now[dynamo.GroupID(d.key)+"/"+dynamo.HistorySK(d.version)]
		for _, id := range d.ids {
			if !slices.Contains(still, id) {
				it := dynamo.MemberIndexItem(id, d.key, d.version)
				stale = append(stale, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
					Key: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}}})
			}
		}
	}
	if err := ix.batchWrite(ctx, table, stale); err != nil {
		return 0, 0, err
	}
	return int64(len(done)), int64(len(puts) - len(stale)), nil
}

// batchWrite writes reqs in batches of 25, retrying unprocessed items with backoff.
func (ix *Indexer) batchWrite(ctx context.Context, table string, reqs []types.WriteRequest) error {
	for batch := range slices.Chunk(reqs, 25) {
		for attempt := 0; len(batch) > 0; attempt++ {
			out, err := ix.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: batch}})
			if err != nil {
				return fmt.Errorf("write the member index of %s: %w", table, dynamo.Translate(err))
			}
			batch = out.UnprocessedItems[table]
			if len(batch) > 0 {
				if err := backoff(ctx, attempt, table); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// batchGet reads keys consistently, 100 at a time, retrying what is unprocessed.
func (ix *Indexer) batchGet(ctx context.Context, table string, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	for chunk := range slices.Chunk(keys, 100) {
		req := map[string]types.KeysAndAttributes{table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req[table].Keys) > 0; attempt++ {
			res, err := ix.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", table, dynamo.Translate(err))
			}
			out = append(out, res.Responses[table]...)
			req = res.UnprocessedKeys
			if len(req[table].Keys) > 0 {
				if err := backoff(ctx, attempt, table); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

func backoff(ctx context.Context, attempt int, table string) error {
	if attempt > 10 {
		return apperr.Unavailable(fmt.Errorf("member index backfill of %s: requests left unprocessed", table), time.Second)
	}
	t := time.NewTimer(time.Duration(10<<min(attempt, 6)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	return nil
}
