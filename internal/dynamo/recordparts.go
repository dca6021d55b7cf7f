package dynamo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/events"
)

// Record parts (docs/storage.md, "Record parts"): a record whose member list passes
// events.PartBytes (a group rename or delete of a large group) is written as its
// `config#<version>` item, holding the payload with the first members and `parts` = n,
// and n part items `config#<version>#part#<i>` (i from 1), each with the record's
// event_type, schema_version, kind, key, version and ttl and a `data` payload of the
// record's type holding only members. They are written in the record's transaction, so
// whoever sees the record (on the stream, in a scan, by a read) finds its parts, and an
// erasure rewrites a part as it rewrites a record (its `data` names members the same
// way). Part items are not records: IsHistorySK is false for them, so the stream's
// consumers and a replay pass over them, and read them with their record (JoinParts).
const partInfix = "#part#"

// PartSK is the sort key of the i-th part of version v's record.
func PartSK(v int64, i int) string { return fmt.Sprintf("%s%s%03d", HistorySK(v), partInfix, i) }

// IsPartSK reports whether sk names a part of a record.
func IsPartSK(sk string) bool {
	return strings.HasPrefix(sk, skHistory) && strings.Contains(sk, partInfix)
}

// RecordParts is how many parts a record item has (0 for an item that is not split).
func RecordParts(item map[string]types.AttributeValue) int {
	n, err := getN(item, "parts")
	if err != nil {
		return 0
	}
	return int(n)
}

// EncodeRecordParts is the `config#<version>` item of an event and the items of its
// parts (none when its payload fits in the record). An event whose member list passes
// events.MemberListBytes is events.ErrMemberListTooLong.
func EncodeRecordParts(e events.Envelope, recordedAt time.Time, ttl int64) (map[string]types.AttributeValue, []map[string]types.AttributeValue, error) {
	head, parts, err := events.SplitMembers(e.Payload)
	if err != nil {
		return nil, nil, err
	}
	whole := e
	whole.Payload = head
	record, err := EncodeRecord(whole, recordedAt, ttl)
	if err != nil || len(parts) == 0 {
		return record, nil, err
	}
	record["parts"] = num(int64(len(parts)))
	out := make([]map[string]types.AttributeValue, 0, len(parts))
	for i, p := range parts {
		data, err := events.Encode(p)
		if err != nil {
			return nil, nil, err
		}
		it := map[string]types.AttributeValue{
			"id":             str(AggregateID(e.Kind, e.Key)),
			"sk":             str(PartSK(e.Version, i+1)),
			"event_type":     str(string(e.Type)),
			"schema_version": num(int64(e.SchemaVersion)),
			"kind":           str(string(e.Kind)),
			"key":            str(e.Key),
			"version":        num(e.Version),
			"part":           num(int64(i + 1)),
			"data":           str(string(data)),
		}
		if ttl > 0 {
			it["ttl"] = num(ttl)
		}
		out = append(out, it)
	}
	return record, out, nil
}

// QueryAPI is the read JoinParts needs.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// ReadParts are the part items of a record item of table, in order (none when it has
// none), read strongly consistently.
func ReadParts(ctx context.Context, db QueryAPI, table string, record map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	n := RecordParts(record)
	if n == 0 {
		return nil, nil
	}
	v, err := getN(record, "version")
	if err != nil {
		return nil, err
	}
	id := getS(record, "id")
	var out []map[string]types.AttributeValue
	p := dynamodb.NewQueryPaginator(db, &dynamodb.QueryInput{
		TableName:              aws.String(table),
		KeyConditionExpression: aws.String("id = :id AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id": str(id), ":p": str(HistorySK(v) + partInfix),
		},
		ConsistentRead: aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the parts of %s v%d: %w", logID(id), v, translate(err))
		}
		out = append(out, page.Items...)
	}
	if len(out) != n {
		return nil, fmt.Errorf("record %s v%d has %d of its %d parts", logID(id), v, len(out), n)
	}
	return out, nil
}

// JoinParts reads the parts of a record item of table, if it has any, and joins their
// members into env, the record's decoded event.
func JoinParts(ctx context.Context, db QueryAPI, reg *events.Registry, table string, record map[string]types.AttributeValue, env *events.Envelope) error {
	parts, err := ReadParts(ctx, db, table, record)
	if err != nil {
		return err
	}
	return JoinPartItems(reg, env, parts)
}

// JoinPartItems joins the members of part items, in order, into env.
func JoinPartItems(reg *events.Registry, env *events.Envelope, parts []map[string]types.AttributeValue) error {
	for _, it := range parts {
		p, err := reg.Decode(env.Type, env.SchemaVersion, []byte(getS(it, "data")))
		if err != nil {
			return fmt.Errorf("record %s v%d, part %s: %w", logAgg(env.Kind, env.Key), env.Version, getS(it, "sk")[len(HistorySK(env.Version)):], err)
		}
		if err := events.JoinMembers(env.Payload, p); err != nil {
			return err
		}
	}
	return nil
}

// JoinRecordParts is JoinParts for a record of the tenant's write table (a stream image).
func (t *Tenants) JoinRecordParts(ctx context.Context, reg *events.Registry, system, tenant string, record map[string]types.AttributeValue, env *events.Envelope) error {
	if RecordParts(record) == 0 {
		return nil
	}
	row, err := t.Get(ctx, system, tenant)
	if err != nil {
		return fmt.Errorf("tenant %s/%s: %w", system, tenant, err)
	}
	return JoinParts(ctx, t.db, reg, row.CommandsTable, record, env)
}
