package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// EraseDB is what Erase needs of DynamoDB.
type EraseDB interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Erase takes an erased person out of a tenant's feed (docs/erasure.md): the changes of
// their own aggregate (ids) are deleted, and in the others (a group's membership changes)
// every member naming one of the ids, and every value that is one of their usernames,
// becomes an erased member, `{"erased": true}`, as the command log's rewrite does. Their aggregates' guards go too: the projector's erasure
// filter keeps any record of theirs from coming back. The feed keeps its positions, so a
// cursor past a deleted change reads on. Its cost is one Query of the tenant's feed (within
// SSO_EVENTS_RETENTION), filtered to the items that name an id.
//
// heldAt, when set, says whether a username named the person at the change's time (the
// name may have been an earlier incarnation's, or a later holder's of a former name):
// only then is a string that is the username rewritten.
func Erase(ctx context.Context, db EraseDB, table, system, tenant string, ids, usernames []string, heldAt func(username string, at time.Time) bool) error {
	if len(ids) == 0 {
		return nil
	}
	vals := map[string]types.AttributeValue{":pk": str(feedPK(system, tenant))}
	var named []string
	for i, id := range ids {
		n := fmt.Sprintf(":id%d", i)
		vals[n] = str(id)
		named = append(named, fmt.Sprintf("contains(#e, %s)", n))
	}
	for i, u := range usernames {
		n := fmt.Sprintf(":u%d", i)
		vals[n] = str(`"` + u + `"`)
		named = append(named, fmt.Sprintf("contains(#e, %s)", n))
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		FilterExpression:          aws.String(strings.Join(named, " OR ")),
		ExpressionAttributeNames:  map[string]string{"#e": attrEvent},
		ExpressionAttributeValues: vals,
		ConsistentRead:            aws.Bool(true),
	}
	erased, names := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		erased[id] = true
	}
	for _, u := range usernames {
		names[u] = true
	}
	for {
		page, err := db.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("change feed: read the changes naming an erased person: %w", err)
		}
		for _, it := range page.Items {
			key := map[string]types.AttributeValue{attrPK: it[attrPK], attrSK: it[attrSK]}
			var ev map[string]any
			if err := json.Unmarshal([]byte(strAttr(it, attrEvent)), &ev); err != nil {
				return fmt.Errorf("change feed: decode a change: %w", err)
			}
			if data, _ := ev["data"].(map[string]any); data != nil && erased[fmt.Sprint(data["id"])] {
				if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
					return fmt.Errorf("change feed: delete an erased person's change: %w", err)
				}
				continue
			}
			isName := func(v string) bool { return names[v] }
			if heldAt != nil {
				at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(ev["time"]))
				isName = func(v string) bool { return names[v] && heldAt(v, at) }
			}
			out, _ := eraseIn(ev, func(id string) bool { return erased[id] }, isName)
			raw, err := json.Marshal(out)
			if err != nil {
				return fmt.Errorf("change feed: encode a change: %w", err)
			}
			if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: key,
				UpdateExpression:          aws.String("SET #e = :e"),
				ConditionExpression:       aws.String("attribute_exists(pk)"),
				ExpressionAttributeNames:  map[string]string{"#e": attrEvent},
				ExpressionAttributeValues: map[string]types.AttributeValue{":e": str(string(raw))},
			}); err != nil && !isConditionFailed(err) {
				return fmt.Errorf("change feed: rewrite a change naming an erased member: %w", err)
			}
		}
		if page.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	for _, id := range ids {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{
			attrPK: str(guardPK(system, tenant, id)), attrSK: str(skGuard),
		}}); err != nil {
			return fmt.Errorf("change feed: delete an erased aggregate's guard: %w", err)
		}
	}
	return nil
}

// eraseIn replaces, in v (in place where it can), every object whose user_id erasedID
// says is erased, and every string that name says is an erased person's name, by an
// erased member; either may be nil. It returns the result and whether it replaced any.
func eraseIn(v any, erasedID, name func(string) bool) (any, bool) {
	switch x := v.(type) {
	case map[string]any:
		if id, ok := x["user_id"].(string); ok && erasedID != nil && erasedID(id) {
			return map[string]any{"erased": true}, true
		}
		changed := false
		for k, e := range x {
			var c bool
			x[k], c = eraseIn(e, erasedID, name)
			changed = changed || c
		}
		return x, changed
	case []any:
		changed := false
		for i, e := range x {
			var c bool
			x[i], c = eraseIn(e, erasedID, name)
			changed = changed || c
		}
		return x, changed
	case string:
		if name != nil && name(x) {
			return map[string]any{"erased": true}, true
		}
	}
	return v, false
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}
