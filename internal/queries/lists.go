package queries

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// maxRoundTrips bounds the Queries spent on one page when items are filtered out (a join
// whose other side was just deleted). Filtering is rare and transient, so a page is almost
// always filled long before; if it is not, the page ends early with a cursor that goes on.
const maxRoundTrips = 16

// listSpec is one list: the Query that serves it and the identity its cursors carry.
type listSpec struct {
	id        listID
	table     string
	index     string // empty: the table itself
	keyCond   string
	names     map[string]string
	values    map[string]types.AttributeValue
	ascending bool
	// keyAttrs are the attributes of a LastEvaluatedKey: the table's key and the index's.
	keyAttrs []string
}

// activitiesTableKey is the key of the activities table itself.
var activitiesTableKey = []string{"pk", "sk"}

// indexKey is the LastEvaluatedKey attributes of a users-table index.
func indexKey(hash, rng string) []string {
	attrs := []string{"id", "sk", hash}
	if rng != "id" && rng != "sk" {
		attrs = append(attrs, rng)
	}
	return attrs
}

// accept turns the raw items of one Query page into list items; a nil entry is an item the
// list skips (a tombstone, or a membership whose user or group is gone).
type accept[T any] func(ctx context.Context, raw []map[string]types.AttributeValue) ([]*T, error)

// runList serves one page of spec: it continues after the cursor, fills the page across
// Query pages when items are skipped, and makes the cursor of the next page from the key of
// the last item it consumed. It reads one item more than it needs, so that next_cursor is
// null exactly when nothing follows. Because every sort key of the read tables ends in a
// unique name, continuing after a key never repeats or skips an item that did not change.
func runList[T any](ctx context.Context, db DB, c cursors, spec listSpec, p PageRequest, acc accept[T]) (Page[T], error) {
	limit := p.size()
	var start map[string]types.AttributeValue
	if p.Cursor != "" {
		k, err := c.decode(p.Cursor, spec.id, spec.keyAttrs)
		if err != nil {
			return Page[T]{}, err
		}
		start = k
	}
	items := make([]T, 0, min(limit, 64))
	var last map[string]types.AttributeValue
	more := false
	for trip := 0; ; trip++ {
		if trip == maxRoundTrips {
			if last == nil {
				last = start
			}
			more = last != nil
			break
		}
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(spec.table),
			KeyConditionExpression:    aws.String(spec.keyCond),
			ExpressionAttributeNames:  spec.names,
			ExpressionAttributeValues: spec.values,
			ScanIndexForward:          aws.Bool(spec.ascending),
			ExclusiveStartKey:         start,
			Limit:                     aws.Int32(int32(limit - len(items) + 1)),
		}
		if spec.index != "" {
			in.IndexName = aws.String(spec.index)
		}
		out, err := db.Query(ctx, in)
		if err != nil {
			return Page[T]{}, fmt.Errorf("query %s %s: %w", spec.table, spec.id.List, storageError(err))
		}
		got, err := acc(ctx, out.Items)
		if err != nil {
			return Page[T]{}, err
		}
		full := false
		for i, raw := range out.Items {
			if len(items) == limit {
				full = true
				break
			}
			last = keyOf(raw, spec.keyAttrs)
			if got[i] != nil {
				items = append(items, *got[i])
			}
		}
		if full {
			more = true
			break
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		start = out.LastEvaluatedKey
		if len(items) == limit {
			// Full, and DynamoDB says more may follow; the extra item read did not come
			// back (page size limit), so the next page will tell.
			more = true
			break
		}
	}
	page := Page[T]{Items: items}
	if more && last != nil {
		cur, err := c.encode(spec.id, last)
		if err != nil {
			return Page[T]{}, fmt.Errorf("cursor of %s: %w", spec.id.List, err)
		}
		page.NextCursor = &cur
	}
	return page, nil
}

func keyOf(item map[string]types.AttributeValue, attrs []string) map[string]types.AttributeValue {
	k := make(map[string]types.AttributeValue, len(attrs))
	for _, a := range attrs {
		k[a] = item[a]
	}
	return k
}
