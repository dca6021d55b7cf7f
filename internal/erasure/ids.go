package erasure

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
)

// The erased ids, one item each, beside the entries in the ledger table: partition
// `erased-ids/<system>/<tenant>`, sort key the id's hash, `erasure` the erasure's id. The
// filter reads the items of the ids a record names (BatchGetItem), never the entries;
// the entries keep their `user_id_hashes` (the re-application reads them).

const idsPartitionPrefix = "erased-ids/"

func idKey(system, tenant, hash string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"tenant": s(idsPartitionPrefix + tenantKey(system, tenant)), "erasure_id": s(hash)}
}

// IndexIDHashes writes the items of an erasure's id hashes.
func (l *Ledger) IndexIDHashes(ctx context.Context, system, tenant, id string, hashes []string) error {
	var reqs []types.WriteRequest
	for _, h := range hashes {
		it := idKey(system, tenant, h)
		it["erasure"] = s(id)
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
	}
	for chunk := range slices.Chunk(reqs, 25) {
		pending := map[string][]types.WriteRequest{l.table: chunk}
		for len(pending[l.table]) > 0 {
			out, err := l.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
			if err != nil {
				return fmt.Errorf("record the erased ids of erasure %s: %w", id, dynamo.Translate(err))
			}
			pending = out.UnprocessedItems
		}
	}
	return nil
}

// indexedMark is the ledger item that says every entry's ids have their items (the
// entries written before the items existed were indexed once).
var indexedMark = map[string]types.AttributeValue{"tenant": s("meta"), "erasure_id": s("erased-ids-indexed")}

// IndexOnce writes the id items of every entry written before they existed, once per
// stage: a GetItem when done already (the projector calls it as it starts).
func (l *Ledger) IndexOnce(ctx context.Context) error {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.table), Key: indexedMark, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("read the ledger's mark: %w", dynamo.Translate(err))
	}
	if out.Item != nil {
		return nil
	}
	in := &dynamodb.ScanInput{
		TableName:        aws.String(l.table),
		FilterExpression: aws.String("attribute_exists(user_id_hashes)"),
		ConsistentRead:   aws.Bool(true),
	}
	for {
		page, err := l.db.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("scan the ledger: %w", dynamo.Translate(err))
		}
		for _, it := range page.Items {
			system, tenant, ok := splitTenant(attrS(it, "tenant"))
			if !ok {
				continue
			}
			if err := l.IndexIDHashes(ctx, system, tenant, attrS(it, "erasure_id"), decodeEntry(it).IDHashes); err != nil {
				return err
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	_, err = l.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(l.table), Item: indexedMark})
	if err != nil {
		return fmt.Errorf("mark the ledger indexed: %w", dynamo.Translate(err))
	}
	return nil
}

func splitTenant(k string) (system, tenant string, ok bool) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:], i > 0 && i < len(k)-1
		}
	}
	return "", "", false
}
