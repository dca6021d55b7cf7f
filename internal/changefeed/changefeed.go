// Package changefeed is a tenant's change feed (API.md "Changes out", docs/events.md): the
// projector appends every change it has projected, as a CloudEvent, to one shared system
// table; the query API reads it by cursor.
//
// Positions are given out by a per-tenant head item in the same transaction that writes the
// changes, so a change is visible exactly when the head has moved past it. A reader reads
// the head first (the watermark) and never reads or moves a cursor beyond it: no cursor
// passes a change that becomes visible later. A guard item per aggregate (immutable id)
// holds the last version in the feed, so a record projected twice is appended once and an
// aggregate's changes enter the feed in version order.
package changefeed

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
)

// DefaultRetention is SSO_EVENTS_RETENTION's default: how long the feed keeps a change.
const DefaultRetention = 720 * time.Hour

// Item attributes and keys of the feed table (docs/events.md).
const (
	attrPK        = "pk"
	attrSK        = "sk"
	attrNext      = "next"
	attrFedAt     = "fed_at_ms"
	attrStartedAt = "started_at_ms"
	attrEvent     = "event"
	attrAggregate = "aggregate"
	attrVersion   = "version"
	attrExpiresAt = "expires_at"

	skHead  = "head"
	skGuard = "last"
	// positionPrefix sorts after skHead, so a Query for positions never meets the head.
	positionPrefix = "p#"
)

// TableName is the shared feed table of a prefix: `{p}_events`. One table for every
// tenant, so the feed adds nothing to the per-tenant table count.
func TableName(n dynamo.Names) string { return n.Prefix + "_events" }

// Table is the feed table's spec for dynamo.EnsureSystemTables.
func Table(name string) dynamo.TableSpec {
	return dynamo.TableSpec{Input: &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		BillingMode: types.BillingModePayPerRequest,
	}, TTLAttr: attrExpiresAt}
}

// feedPK is the partition of a tenant's changes and head.
func feedPK(system, tenant string) string { return "feed#" + system + "/" + tenant }

// guardPK is the partition of one aggregate's guard.
func guardPK(system, tenant, aggregate string) string {
	return "agg#" + system + "/" + tenant + "#" + aggregate
}

func positionSK(p int64) string { return fmt.Sprintf("%s%020d", positionPrefix, p) }

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func numAttr(item map[string]types.AttributeValue, name string) int64 {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(v.Value, 10, 64)
	return n
}

// positionOf is the position a feed item's sort key names.
func positionOf(sk string) (int64, error) {
	digits, ok := strings.CutPrefix(sk, positionPrefix)
	if !ok {
		return 0, fmt.Errorf("not a position: %q", sk)
	}
	return strconv.ParseInt(digits, 10, 64)
}

func strAttr(item map[string]types.AttributeValue, name string) string {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return ""
	}
	return v.Value
}
