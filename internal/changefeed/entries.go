package changefeed

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Entry is one change of the feed with its position and aggregate: what a consumer that
// keeps its own position (the EventBridge publisher) reads.
type Entry struct {
	Position  int64
	Aggregate string
	Version   int64
	Event     json.RawMessage
}

// Entries answers up to limit changes after position `after`, in feed order. Like Read it
// reads the head first and nothing at or beyond it, so a consumer that goes on from the
// last position answered never passes a change that becomes visible later. Retention is
// not checked: a change TTL has not deleted yet is answered.
func (r *Reader) Entries(ctx context.Context, system, tenant string, after int64, limit int) ([]Entry, error) {
	head, err := r.Head(ctx, system, tenant)
	if err != nil {
		return nil, err
	}
	if head-1 <= after {
		return nil, nil
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(r.table),
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(feedPK(system, tenant)), ":from": str(positionSK(after + 1)), ":to": str(positionSK(head - 1)),
		},
	}
	var out []Entry
	for len(out) < limit {
		in.Limit = aws.Int32(int32(limit - len(out)))
		page, err := r.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("read the change feed: %w", err)
		}
		for _, item := range page.Items {
			p, err := positionOf(strAttr(item, attrSK))
			if err != nil {
				return nil, fmt.Errorf("change feed item %q: %w", strAttr(item, attrSK), err)
			}
			out = append(out, Entry{Position: p, Aggregate: strAttr(item, attrAggregate), Version: numAttr(item, attrVersion),
				Event: json.RawMessage(strAttr(item, attrEvent))})
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	return out, nil
}
