package erasure

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/bounded"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// memberIndexed reports whether the tenant's write table carries the member index's mark
// (dynamo/memberindex.go): every group record of it is then found by the index, and the
// erasure needs no Scan.
func (x *Eraser) memberIndexed(ctx context.Context, table string) (bool, error) {
	out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: dynamo.MemberIndexMarkKey(),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("read the member index's mark: %w", dynamo.Translate(err))
	}
	return out.Item != nil, nil
}

// rewriteWorkers is how many group records (or group feeds) an erasure rewrites at once:
// each is a read and a write of its own.
const rewriteWorkers = 8

// groupRecordRef is a group history record the index points to.
type groupRecordRef struct {
	group   string
	version int64
	// pending: found by a pending mark (it may name anyone), not by the subject's id.
	pending bool
}

// rewriteIndexedGroups is rewriteGroups by the member index: the records the index lists
// under each of the subject's ids, and those of the pending marks, read by BatchGetItem
// and rewritten like the Scan's; then the memberships of the groups found are deleted.
// Its cost is the person's group records, whatever the tenant's size.
func (x *Eraser) rewriteIndexedGroups(ctx context.Context, row dynamo.Tenant, erasureID string, subj *Subject, groups map[string]bool, p *pass) error {
	table := row.CommandsTable
	var refs []groupRecordRef
	collect := func(pending bool) func(map[string]types.AttributeValue) error {
		return func(it map[string]types.AttributeValue) error {
			n, ok := it["version"].(*types.AttributeValueMemberN)
			if !ok {
				return nil
			}
			v, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				return fmt.Errorf("a member index item's version: %w", err)
			}
			refs = append(refs, groupRecordRef{group: attrS(it, "group_key"), version: v, pending: pending})
			return nil
		}
	}
	for _, id := range sortedKeys(subj.IDs) {
		if err := x.query(ctx, table, "id", dynamo.MemberIndexID(id), collect(false)); err != nil {
			return err
		}
	}
	if err := x.query(ctx, table, "id", dynamo.MemberIndexPending, collect(true)); err != nil {
		return err
	}
	found := map[string]bool{}
	for chunk := range slices.Chunk(refs, 100) {
		byKey := map[string]groupRecordRef{}
		keys := make([]map[string]types.AttributeValue, 0, len(chunk))
		for _, r := range chunk {
			id, sk := dynamo.GroupID(r.group), dynamo.HistorySK(r.version)
			if _, dup := byKey[id+"/"+sk]; dup {
				continue
			}
			byKey[id+"/"+sk] = r
			keys = append(keys, map[string]types.AttributeValue{"id": s(id), "sk": s(sk)})
		}
		items, err := x.batchGet(ctx, table, keys)
		if err != nil {
			return err
		}
		var mu sync.Mutex
		rs, rctx := errgroup.WithContext(ctx)
		rs.SetLimit(rewriteWorkers)
		for _, it := range items {
			r := byKey[attrS(it, "id")+"/"+attrS(it, "sk")]
			rs.Go(func() error {
				changed, err := x.rewriteRecord(rctx, table, it, subj)
				if err != nil {
					return err
				}
				// The index points at the record's version: its parts
				// (dynamo.PartSK) list members as the record does.
				parts, err := dynamo.ReadParts(rctx, x.db, table, it)
				if err != nil {
					return err
				}
				for _, part := range parts {
					c, err := x.rewriteRecord(rctx, table, part, subj)
					if err != nil {
						return err
					}
					changed = changed || c
				}
				if changed || !r.pending {
					mu.Lock()
					found[r.group] = true
					mu.Unlock()
				}
				return nil
			})
		}
		if err := rs.Wait(); err != nil {
			return err
		}
	}
	addAll(groups, sortedKeys(found))
	var memberships []map[string]types.AttributeValue
	for _, g := range sortedKeys(groups) {
		memberships = append(memberships, map[string]types.AttributeValue{"id": s(dynamo.GroupID(g)), "sk": s(dynamo.MemberSK(subj.Username))})
	}
	if err := x.batchDelete(bounded.WithDeadline(ctx, time.Time{}), table, memberships); err != nil {
		return err
	}
	if p.save != nil && len(found) > 0 {
		return x.ledger.AddGroups(ctx, row.SystemID, row.TenantID, erasureID, sortedKeys(found))
	}
	return nil
}

// rewriteRecord rewrites a group history record, or a part of one, that names the
// subject (an erased member in its place); changed is false when it names them no more.
func (x *Eraser) rewriteRecord(ctx context.Context, table string, it map[string]types.AttributeValue, subj *Subject) (bool, error) {
	id, sk := attrS(it, "id"), attrS(it, "sk")
	out, changed, err := RewriteHistoryItem(x.reg, it, subj)
	if err != nil {
		return false, fmt.Errorf("rewrite %s/%s: %w", id, sk, err)
	}
	if !changed {
		return false, nil
	}
	_, err = x.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(table), Item: out, ConditionExpression: aws.String("attribute_exists(id)"),
	})
	if err != nil && !sdkerr.ConditionFailed(err) {
		return false, fmt.Errorf("rewrite %s/%s: %w", id, sk, dynamo.Translate(err))
	}
	return true, nil
}

// batchGet reads keys (at most 100) consistently, retrying what is unprocessed.
func (x *Eraser) batchGet(ctx context.Context, table string, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	req := map[string]types.KeysAndAttributes{table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for len(req) > 0 && len(req[table].Keys) > 0 {
		res, err := x.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", table, dynamo.Translate(err))
		}
		out = append(out, res.Responses[table]...)
		req = res.UnprocessedKeys
	}
	return out, nil
}

// deleteMemberIndex deletes the index items of the subject's ids: they name the person
// (by id) and point at records that name them no more.
func (x *Eraser) deleteMemberIndex(ctx context.Context, table string, subj *Subject) error {
	for _, id := range sortedKeys(subj.IDs) {
		if err := x.deletePartition(ctx, table, "id", dynamo.MemberIndexID(id), func(string) bool { return true }); err != nil {
			return err
		}
	}
	return nil
}
