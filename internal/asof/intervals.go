package asof

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Interval is one membership interval of a pair. To is Open while it lasts.
type Interval struct {
	From, To           int64
	AddedBy, RemovedBy string
	// ExpiresAt is the expiry (epoch ms) the membership had last within the interval
	// (set by its addition or a later expiry change); 0 when none.
	ExpiresAt int64
}

type edgeRec struct {
	version int64
	op      byte
	at      int64
	actor   string
	// expires is an expiry record's expiry (op 't'; 0: cleared).
	expires int64
}

// intervals derives a pair's intervals from its edges: ordered by time (then version), an
// addition opens an interval unless one is open, a removal closes the open one. An
// interval that ends where it began held no instant and is left out.
func intervals(item map[string]types.AttributeValue) []Interval {
	var es []edgeRec
	for a, v := range item {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			continue
		}
		if isExpiryAttr(a) {
			if r, ok := expiryRec(a, sv.Value); ok {
				es = append(es, r)
			}
			continue
		}
		if !isEdgeAttr(a) {
			continue
		}
		parts := strings.SplitN(sv.Value, "|", 3)
		if len(parts) != 3 || len(parts[0]) != 1 {
			continue
		}
		ver, _ := strconv.ParseInt(a[1:], 10, 64)
		at, _ := strconv.ParseInt(parts[1], 10, 64)
		es = append(es, edgeRec{version: ver, op: parts[0][0], at: at, actor: parts[2]})
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].at != es[j].at {
			return es[i].at < es[j].at
		}
		if es[i].version != es[j].version {
			return es[i].version < es[j].version
		}
		return es[i].op != 't' && es[j].op == 't' // an addition before the expiry it set
	})
	var out []Interval
	var cur *Interval
	for _, e := range es {
		switch {
		case e.op == 't' && cur != nil:
			cur.ExpiresAt = e.expires
		case e.op == '+' && cur == nil:
			cur = &Interval{From: e.at, To: Open, AddedBy: e.actor}
		case e.op == '-' && cur != nil:
			cur.To, cur.RemovedBy = e.at, e.actor
			if cur.To > cur.From {
				out = append(out, *cur)
			}
			cur = nil
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// treeItems are the four items of each interval: under the group's node and the user's,
// sorted by start and by end.
func treeItems(gid, h string, ivs []Interval) (map[string]map[string]types.AttributeValue, map[int]bool) {
	out := map[string]map[string]types.AttributeValue{}
	levels := map[int]bool{}
	for _, iv := range ivs {
		l, i := node(iv.From, iv.To)
		levels[l] = true
		attrs := func(id, sk string, other map[string]types.AttributeValue) {
			it := map[string]types.AttributeValue{"id": s(id), "sk": s(sk), "from": n(iv.From), "added_by": s(iv.AddedBy)}
			if iv.To != Open {
				it["to"] = n(iv.To)
				it["removed_by"] = s(iv.RemovedBy)
			}
			for k, v := range other {
				it[k] = v
			}
			out[itemRef(id, sk)] = it
		}
		gn, un := groupNode(gid, l, i), userNode(h, l, i)
		attrs(gn, startSK(iv.From, iv.To, h), map[string]types.AttributeValue{"h": s(h)})
		attrs(gn, endSK(iv.From, iv.To, h), map[string]types.AttributeValue{"h": s(h)})
		attrs(un, startSK(iv.From, iv.To, gid), map[string]types.AttributeValue{"g": s(gid)})
		attrs(un, endSK(iv.From, iv.To, gid), map[string]types.AttributeValue{"g": s(gid)})
	}
	return out, levels
}

// maxTx is DynamoDB's limit of items in one transaction.
const maxTx = 100

// reconcile writes the pair's tree items for the edges in item, conditioned on the pair
// item still being what was read: errRace if it changed.
func (x *Index) reconcile(ctx context.Context, table, gid, h string, item map[string]types.AttributeValue) error {
	want, levels := treeItems(gid, h, intervals(item))
	have := map[string]bool{}
	if ss, ok := item["items"].(*types.AttributeValueMemberSS); ok {
		for _, r := range ss.Value {
			have[r] = true
		}
	}
	var puts, dels []string
	for r := range want {
		if !have[r] {
			puts = append(puts, r)
		}
	}
	for r := range have {
		if _, ok := want[r]; !ok {
			dels = append(dels, r)
		}
	}
	if len(puts) == 0 && len(dels) == 0 {
		return nil
	}
	if len(puts)+len(dels)+1 > maxTx {
		return fmt.Errorf("as-of index: a pair of group %s needs %d item changes at once (at most %d)", gid, len(puts)+len(dels), maxTx-1)
	}
	if err := x.noteLevels(ctx, table, gid, h, levels); err != nil {
		return err
	}
	rv := int64(0)
	if v, ok := item["rv"].(*types.AttributeValueMemberN); ok {
		rv, _ = strconv.ParseInt(v.Value, 10, 64)
	}
	nv, _ := item["n"].(*types.AttributeValueMemberN)
	if nv == nil {
		return errRace // not written yet (read before the edge's update): read again
	}
	refs := make([]string, 0, len(want))
	for r := range want {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	upd := &types.Update{
		TableName: aws.String(table), Key: key(groupRoot(gid), pairPfx+h),
		ConditionExpression:       aws.String("n = :n AND (attribute_not_exists(rv) OR rv = :rv)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": nv, ":rv": n(rv), ":next": n(rv + 1)},
	}
	if len(refs) > 0 {
		upd.UpdateExpression = aws.String("SET rv = :next, #items = :items")
		upd.ExpressionAttributeValues[":items"] = &types.AttributeValueMemberSS{Value: refs}
	} else {
		upd.UpdateExpression = aws.String("SET rv = :next REMOVE #items")
	}
	upd.ExpressionAttributeNames = map[string]string{"#items": "items"}
	tx := []types.TransactWriteItem{{Update: upd}}
	sort.Strings(puts)
	for _, r := range puts {
		tx = append(tx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: want[r]}})
	}
	sort.Strings(dels)
	for _, r := range dels {
		id, sk := splitRef(r)
		tx = append(tx, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: key(id, sk)}})
	}
	_, err := x.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	var tce *types.TransactionCanceledException
	var tc *types.TransactionConflictException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tce):
		for _, r := range tce.CancellationReasons {
			if c := aws.ToString(r.Code); c == "ConditionalCheckFailed" || c == "TransactionConflict" {
				return errRace
			}
		}
	case errors.As(err, &tc):
		return errRace
	}
	return fmt.Errorf("as-of index: write pair of group %s: %w", gid, err)
}

// noteLevels adds the tree levels below the root that the pair's items use to the group's
// and the user's `levels` items (only ever added: a level noted but unused costs a read).
func (x *Index) noteLevels(ctx context.Context, table, gid, h string, levels map[int]bool) error {
	for _, id := range []string{groupRoot(gid), userRoot(h)} {
		var ls []string
		for l := range levels {
			if _, done := x.noted.Load(table + "/" + id + "/" + strconv.Itoa(l)); l != Depth && !done {
				ls = append(ls, strconv.Itoa(l))
			}
		}
		if len(ls) == 0 {
			continue
		}
		if _, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key(id, levelsSK),
			UpdateExpression:          aws.String("ADD l :l"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":l": &types.AttributeValueMemberNS{Value: ls}},
		}); err != nil {
			return fmt.Errorf("as-of index: levels: %w", err)
		}
		for _, l := range ls {
			x.noted.Store(table+"/"+id+"/"+l, true)
		}
	}
	return nil
}
