package erasure

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// The ledger entry keeps, in `asof_lives`, what the as-of index's life item of each
// erased id holds after the read-side sweep (asof.ErasedLives: the id's hash, the
// instants of its creation, statuses and deletion, their actors, `erased`; no name, no
// id), so that a replay, which no longer has the user's partition, can give the index it
// rebuilds the same erased member (asof.PutErasedLives; docs/history.md, "Erasure").

const asOfLivesAttr = "asof_lives"

// keepAsOfLives records the erased lives of the subject's ids, read from the tenant's
// read tables (the current one first), in the erasure's entry. The first record stands:
// a later pass (a resumed one, or a re-application over restored tables whose index may
// be older) does not replace it.
func (x *Eraser) keepAsOfLives(ctx context.Context, row dynamo.Tenant, subj *Subject, erasureID string) error {
	users, _ := readTables(row, x.names)
	lives := map[string]map[string]types.AttributeValue{}
	for _, t := range append([]string{row.UsersTable}, users...) {
		if t == "" {
			continue
		}
		got, err := asof.ErasedLives(ctx, x.db, t, subj.idHashList())
		if missing(err) {
			continue
		}
		if err != nil {
			return err
		}
		for h, l := range got {
			if _, ok := lives[h]; !ok {
				lives[h] = l
			}
		}
	}
	if len(lives) == 0 {
		return nil
	}
	m := make(map[string]types.AttributeValue, len(lives))
	for h, l := range lives {
		m[h] = &types.AttributeValueMemberM{Value: l}
	}
	_, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(x.ledger.table), Key: key(row.SystemID, row.TenantID, erasureID),
		UpdateExpression:          aws.String("SET #l = if_not_exists(#l, :l)"),
		ConditionExpression:       aws.String("attribute_exists(erasure_id)"),
		ExpressionAttributeNames:  map[string]string{"#l": asOfLivesAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": &types.AttributeValueMemberM{Value: m}},
	})
	if err != nil {
		return fmt.Errorf("keep the as-of lives of erasure %s: %w", erasureID, dynamo.Translate(err))
	}
	return nil
}

// AsOfLives are the erased lives every erasure of the tenant kept (keepAsOfLives), by the
// hash of the erased id.
func (l *Ledger) AsOfLives(ctx context.Context, system, tenant string) (map[string]map[string]types.AttributeValue, error) {
	out := map[string]map[string]types.AttributeValue{}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(l.table),
		KeyConditionExpression:    aws.String("tenant = :t"),
		ProjectionExpression:      aws.String("#l"),
		ExpressionAttributeNames:  map[string]string{"#l": asOfLivesAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": s(tenantKey(system, tenant))},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		page, err := l.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("read the as-of lives of %s: %w", tenantKey(system, tenant), dynamo.Translate(err))
		}
		for _, it := range page.Items {
			m, ok := it[asOfLivesAttr].(*types.AttributeValueMemberM)
			if !ok {
				continue
			}
			for h, v := range m.Value {
				if life, ok := v.(*types.AttributeValueMemberM); ok {
					out[h] = life.Value
				}
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}
