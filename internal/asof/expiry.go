package asof

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Expiries of memberships (docs/expiry.md) are kept on the pair item beside its edges: one
// attribute per group version that set one (`t<version>` = `<at>|<expiry ms>`, 0 for an
// expiry cleared), written whatever order the records come in. An interval's expiry is the
// one set last (by instant, then version) within it: its addition's, or a later change's
// (intervals). They change no tree item, so they are written without a reconcile.

func expiryAttr(version int64) string { return fmt.Sprintf("t%012d", version) }
func isExpiryAttr(a string) bool      { return len(a) == 13 && a[0] == 't' }

// expiryRec parses an expiry attribute into an edge record of op 't'.
func expiryRec(attr, v string) (edgeRec, bool) {
	ver, err := strconv.ParseInt(attr[1:], 10, 64)
	if err != nil {
		return edgeRec{}, false
	}
	a, b, ok := strings.Cut(v, "|")
	if !ok {
		return edgeRec{}, false
	}
	at, err1 := strconv.ParseInt(a, 10, 64)
	exp, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil {
		return edgeRec{}, false
	}
	return edgeRec{version: ver, op: 't', at: at, expires: exp}, true
}

// expiry records that the group's version `version`, at instant at, set the pair's
// membership to expire at expires (nil: cleared).
func (x *Index) expiry(ctx context.Context, table, gid, h string, version, at int64, expires *time.Time) error {
	if gid == "" {
		return nil
	}
	exp := int64(0)
	if expires != nil {
		exp = Millis(*expires)
	}
	_, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(groupRoot(gid), pairPfx+h),
		UpdateExpression:         aws.String("SET #t = :t, g = :g, h = :h"),
		ExpressionAttributeNames: map[string]string{"#t": expiryAttr(version)},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": s(strconv.FormatInt(at, 10) + "|" + strconv.FormatInt(exp, 10)), ":g": s(gid), ":h": s(h),
		},
	})
	if err != nil {
		return fmt.Errorf("as-of index: expiry of group %s: %w", gid, err)
	}
	return nil
}
