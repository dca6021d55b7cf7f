package changefeed

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

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
// knowing them only as the erasure ledger does: erased(id) says whether an aggregate or
// member id is one. Their changes and guards are deleted; in others' changes a member
// whose user_id is erased becomes `{"erased": true}`. A restored copy is read once, whole
// (a Scan: it serves no traffic).
func EraseRestored(ctx context.Context, db RestoredDB, table, system, tenant string, erased func(id string) bool) (int, error) {
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
				if !eraseMembersBy(ev, erased) {
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

// eraseMembersBy replaces, in place, every object of v whose user_id is erased by an erased
// member; it reports whether it replaced any.
func eraseMembersBy(v any, erased func(string) bool) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if m, ok := e.(map[string]any); ok {
				if id, ok := m["user_id"].(string); ok && erased(id) {
					x[k] = map[string]any{"erased": true}
					changed = true
					continue
				}
			}
			changed = eraseMembersBy(e, erased) || changed
		}
	case []any:
		for i, e := range x {
			if m, ok := e.(map[string]any); ok {
				if id, ok := m["user_id"].(string); ok && erased(id) {
					x[i] = map[string]any{"erased": true}
					changed = true
					continue
				}
			}
			changed = eraseMembersBy(e, erased) || changed
		}
	}
	return changed
}
