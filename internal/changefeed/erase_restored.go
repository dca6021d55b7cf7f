package changefeed

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RestoredDB is what EraseRestored needs of DynamoDB.
type RestoredDB interface {
	EraseDB
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// EraseRestored takes every erased person out of a tenant's part of a restored copy of the
// feed table (`projector erasures reapply --events-table`, docs/erasure.md "Backups"),
// knowing them as the erasure ledger does: erased(id) says whether an aggregate or member
// id is one. Their changes and guards are deleted; in others' changes a member whose
// user_id is erased becomes `{"erased": true}`, and so does a string value that named(value,
// at) says was an erased person's name when the change was made (at: its time) — a
// membership change's own change set names the member by username alone, and a later user
// of the name is told apart by the time (nil: by the ids only). A restored copy is read
// once, whole (a Scan: it serves no traffic).
func EraseRestored(ctx context.Context, db RestoredDB, table, system, tenant string, erased func(id string) bool, named func(value string, at time.Time) bool) (int, error) {
	feed, guards := feedPK(system, tenant), guardPK(system, tenant, "")
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	n := 0
	for {
		page, err := db.Scan(ctx, in)
		if err != nil {
			return n, fmt.Errorf("change feed: scan the restored %s: %w", table, err)
		}
		for _, it := range page.Items {
			pk := strAttr(it, attrPK)
			key := map[string]types.AttributeValue{attrPK: it[attrPK], attrSK: it[attrSK]}
			switch {
			case strings.HasPrefix(pk, guards):
				if erased(strings.TrimPrefix(pk, guards)) {
					if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
						return n, fmt.Errorf("change feed: delete an erased aggregate's guard: %w", err)
					}
					n++
				}
			case pk == feed && strings.HasPrefix(strAttr(it, attrSK), positionPrefix):
				if erased(strAttr(it, attrAggregate)) {
					if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
						return n, fmt.Errorf("change feed: delete an erased person's change: %w", err)
					}
					n++
					continue
				}
				var ev any
				if err := json.Unmarshal([]byte(strAttr(it, attrEvent)), &ev); err != nil {
					return n, fmt.Errorf("change feed: decode a change: %w", err)
				}
				ev, changed := eraseIn(ev, erased, nil)
				if doc, ok := ev.(map[string]any); ok && named != nil {
					at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(doc["time"]))
					if data, ok := doc["data"].(map[string]any); ok && !at.IsZero() {
						var c bool
						doc["data"], c = eraseIn(data, nil, func(v string) bool { return named(v, at) })
						changed = changed || c
					}
				}
				if !changed {
					continue
				}
				raw, err := json.Marshal(ev)
				if err != nil {
					return n, err
				}
				if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: aws.String(table), Key: key,
					UpdateExpression:          aws.String("SET #e = :e"),
					ExpressionAttributeNames:  map[string]string{"#e": attrEvent},
					ExpressionAttributeValues: map[string]types.AttributeValue{":e": str(string(raw))},
				}); err != nil {
					return n, fmt.Errorf("change feed: rewrite a change naming an erased member: %w", err)
				}
				n++
			}
		}
		if page.LastEvaluatedKey == nil {
			return n, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}
