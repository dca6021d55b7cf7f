package streams

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DeadLetter is a record that was not applied: either its handler kept failing (Reason is
// the handler's last error), or it was parked because an earlier record of the same
// aggregate is a dead letter (BlockedBehind names that record), so the aggregate's order
// holds until the dead letters are re-driven.
type DeadLetter struct {
	Consumer       string
	System         string
	Tenant         string
	Table          string
	StreamARN      string
	ShardID        string
	SequenceNumber string
	Aggregate      string
	Attempts       int
	Reason         string
	// BlockedBehind is the sequence number of the aggregate's first dead letter when this
	// record was parked rather than tried; empty for a record that failed itself.
	BlockedBehind string
	At            time.Time
	// RedriveFailures counts failed re-drives.
	RedriveFailures int
	Record          Record
}

// DeadLetterFilter narrows List and Redrive; a field may be set only if the ones before
// it are (System, then Tenant, then Table). The zero filter means all.
type DeadLetterFilter struct {
	System string
	Tenant string
	Table  string
}

// RedriveResult says what a Redrive did.
type RedriveResult struct {
	// Applied is the number of dead letters applied and deleted.
	Applied int
	// Failed holds, per aggregate that stopped, the dead letter that failed again (its
	// Reason is the new error); the aggregate's later dead letters stay in place.
	Failed []DeadLetter
}

// DeadLetters is a consumer's dead-letter store.
type DeadLetters struct {
	db       DynamoDB
	table    string
	consumer string
}

// NewDeadLetters opens the dead letters of consumer in table.
func NewDeadLetters(db DynamoDB, table, consumer string) *DeadLetters {
	return &DeadLetters{db: db, table: table, consumer: consumer}
}

// maxReason bounds a stored reason: a handler error can embed a whole response body.
const maxReason = 4000

// gzipAbove is the encoded record size above which it is stored compressed: a record holds
// two images of an item of up to 400 KB, more than a DynamoDB item may hold.
const gzipAbove = 300 << 10

// escapeKeyPart keeps "#" (the sort key separator) out of key parts: aggregate ids such
// as "user#alice" contain it, and "user#alice#" must not be a prefix of another id.
func escapeKeyPart(s string) string {
	return strings.NewReplacer("%", "%25", "#", "%23").Replace(s)
}

func entryKey(system, tenant, table, aggregate, seq string) string {
	return entryPrefixAll(system, tenant, table, aggregate) + padSeq(seq)
}

// entryPrefix is the sort key prefix of everything under the given parts of a filter; the
// first empty part ends it, widening the match.
func entryPrefix(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			break
		}
		b.WriteString(escapeKeyPart(p))
		b.WriteByte('#')
	}
	return b.String()
}

func (f DeadLetterFilter) prefix() (string, error) {
	if (f.Tenant != "" && f.System == "") || (f.Table != "" && f.Tenant == "") {
		return "", errors.New("dead letter filter: set System before Tenant and Tenant before Table")
	}
	return entryPrefix(f.System, f.Tenant, f.Table), nil
}

// List returns the dead letters matching f, ordered by system, tenant, table, aggregate
// and sequence number.
func (d *DeadLetters) List(ctx context.Context, f DeadLetterFilter) ([]DeadLetter, error) {
	prefix, err := f.prefix()
	if err != nil {
		return nil, err
	}
	return d.query(ctx, prefix, 0)
}

func (d *DeadLetters) query(ctx context.Context, prefix string, limit int32) ([]DeadLetter, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.table),
		KeyConditionExpression:    aws.String("#c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": attrConsumer},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": str(d.consumer)},
		// Parking decisions and re-drives must see deletions made a moment ago.
		ConsistentRead: aws.Bool(true),
	}
	if prefix != "" { // begins_with on an empty string is rejected
		in.KeyConditionExpression = aws.String("#c = :c AND begins_with(#k, :p)")
		in.ExpressionAttributeNames["#k"] = attrEntryKey
		in.ExpressionAttributeValues[":p"] = str(prefix)
	}
	if limit > 0 {
		in.Limit = aws.Int32(limit)
	}
	var out []DeadLetter
	p := dynamodb.NewQueryPaginator(d.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query dead letters of %s under %q: %w", d.consumer, prefix, err)
		}
		for _, item := range page.Items {
			dl, err := d.decode(item)
			if err != nil {
				return nil, err
			}
			out = append(out, dl)
		}
		if limit > 0 {
			break
		}
	}
	return out, nil
}

// Redrive applies dead letters matching f, aggregate by aggregate in sequence order,
// deleting each one applied. The first failure of an aggregate stops that aggregate (its
// later dead letters stay, keeping order) and is recorded on the dead letter; other
// aggregates go on. Records parked by a running consumer while the re-drive works are
// picked up too. It returns an error only when the store itself fails or ctx ends.
func (d *DeadLetters) Redrive(ctx context.Context, f DeadLetterFilter, apply func(context.Context, Record) error) (RedriveResult, error) {
	var res RedriveResult
	all, err := d.List(ctx, f)
	if err != nil {
		return res, err
	}
	for len(all) > 0 {
		agg := all[0]
		n := 1
		for n < len(all) && sameAggregate(all[n], agg) {
			n++
		}
		group := all[:n]
		all = all[n:]
		for len(group) > 0 {
			failed, applied, err := d.redriveGroup(ctx, group, apply)
			res.Applied += applied
			if err != nil {
				return res, err
			}
			if failed != nil {
				res.Failed = append(res.Failed, *failed)
				break
			}
			// A consumer may have parked more records of this aggregate meanwhile.
			group, err = d.query(ctx, entryPrefixAll(agg.System, agg.Tenant, agg.Table, agg.Aggregate), 0)
			if err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

func sameAggregate(a, b DeadLetter) bool {
	return a.System == b.System && a.Tenant == b.Tenant && a.Table == b.Table && a.Aggregate == b.Aggregate
}

func (d *DeadLetters) redriveGroup(ctx context.Context, group []DeadLetter, apply func(context.Context, Record) error) (*DeadLetter, int, error) {
	applied := 0
	for _, dl := range group {
		if err := ctx.Err(); err != nil {
			return nil, applied, err
		}
		if aerr := apply(ctx, dl.Record); aerr != nil {
			dl.Reason = truncate(aerr.Error(), maxReason)
			dl.RedriveFailures++
			if err := d.noteRedriveFailure(ctx, dl); err != nil {
				return nil, applied, err
			}
			return &dl, applied, nil
		}
		if err := d.delete(ctx, dl); err != nil {
			return nil, applied, err
		}
		applied++
	}
	return nil, applied, nil
}

// put stores a dead letter.
func (d *DeadLetters) put(ctx context.Context, dl DeadLetter) error {
	item := map[string]types.AttributeValue{
		attrConsumer:  str(d.consumer),
		attrEntryKey:  str(entryKey(dl.System, dl.Tenant, dl.Table, dl.Aggregate, dl.SequenceNumber)),
		attrSystem:    str(dl.System),
		attrTenant:    str(dl.Tenant),
		attrTable:     str(dl.Table),
		attrStreamARN: str(dl.StreamARN),
		attrShardID:   str(dl.ShardID),
		attrSeq:       str(dl.SequenceNumber),
		attrAggregate: str(dl.Aggregate),
		attrAttempts:  &types.AttributeValueMemberN{Value: strconv.Itoa(dl.Attempts)},
		attrReason:    str(truncate(dl.Reason, maxReason)),
		attrDeadAt:    str(dl.At.UTC().Format(time.RFC3339Nano)),
	}
	if dl.BlockedBehind != "" {
		item[attrBlockedBehind] = str(dl.BlockedBehind)
	}
	rec, err := json.Marshal(dl.Record)
	if err != nil {
		return fmt.Errorf("encode dead letter %s: %w", dl.SequenceNumber, err)
	}
	if len(rec) > gzipAbove {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(rec); err != nil {
			return fmt.Errorf("compress dead letter %s: %w", dl.SequenceNumber, err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("compress dead letter %s: %w", dl.SequenceNumber, err)
		}
		item[attrRecordGzip] = &types.AttributeValueMemberB{Value: buf.Bytes()}
	} else {
		item[attrRecord] = str(string(rec))
	}
	if _, err := d.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(d.table), Item: item}); err != nil {
		return fmt.Errorf("store dead letter %s of %s: %w", dl.SequenceNumber, dl.Aggregate, err)
	}
	return nil
}

func (d *DeadLetters) decode(item map[string]types.AttributeValue) (DeadLetter, error) {
	attempts, _ := strconv.Atoi(getN(item, attrAttempts))
	failures, _ := strconv.Atoi(getN(item, attrRedriveErrors))
	at, _ := time.Parse(time.RFC3339Nano, getS(item, attrDeadAt))
	dl := DeadLetter{
		Consumer: d.consumer, System: getS(item, attrSystem), Tenant: getS(item, attrTenant),
		Table: getS(item, attrTable), StreamARN: getS(item, attrStreamARN), ShardID: getS(item, attrShardID),
		SequenceNumber: getS(item, attrSeq), Aggregate: getS(item, attrAggregate), Attempts: attempts,
		Reason: getS(item, attrReason), BlockedBehind: getS(item, attrBlockedBehind), At: at,
		RedriveFailures: failures,
	}
	raw := []byte(getS(item, attrRecord))
	if b, ok := item[attrRecordGzip].(*types.AttributeValueMemberB); ok {
		zr, err := gzip.NewReader(bytes.NewReader(b.Value))
		if err != nil {
			return DeadLetter{}, fmt.Errorf("decompress dead letter %s: %w", dl.SequenceNumber, err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return DeadLetter{}, fmt.Errorf("decompress dead letter %s: %w", dl.SequenceNumber, err)
		}
	}
	if err := json.Unmarshal(raw, &dl.Record); err != nil {
		return DeadLetter{}, fmt.Errorf("decode dead letter %s: %w", dl.SequenceNumber, err)
	}
	return dl, nil
}

func (d *DeadLetters) delete(ctx context.Context, dl DeadLetter) error {
	_, err := d.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(d.table),
		Key: map[string]types.AttributeValue{
			attrConsumer: str(d.consumer),
			attrEntryKey: str(entryKey(dl.System, dl.Tenant, dl.Table, dl.Aggregate, dl.SequenceNumber)),
		},
	})
	if err != nil {
		return fmt.Errorf("delete dead letter %s of %s: %w", dl.SequenceNumber, dl.Aggregate, err)
	}
	return nil
}

func (d *DeadLetters) noteRedriveFailure(ctx context.Context, dl DeadLetter) error {
	_, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.table),
		Key: map[string]types.AttributeValue{
			attrConsumer: str(d.consumer),
			attrEntryKey: str(entryKey(dl.System, dl.Tenant, dl.Table, dl.Aggregate, dl.SequenceNumber)),
		},
		UpdateExpression:         aws.String("SET #r = :r ADD #f :one"),
		ConditionExpression:      aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#r": attrReason, "#f": attrRedriveErrors, "#k": attrEntryKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":r": str(dl.Reason), ":one": &types.AttributeValueMemberN{Value: "1"},
		},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("note re-drive failure of %s: %w", dl.SequenceNumber, err)
	}
	return nil
}

// firstOf returns the oldest dead letter of an aggregate, if any.
func (d *DeadLetters) firstOf(ctx context.Context, system, tenant, table, aggregate string) (DeadLetter, bool, error) {
	// The aggregate prefix is complete: the key part after it is the padded sequence
	// number, so no other aggregate can share it (see escapeKeyPart).
	dls, err := d.query(ctx, entryPrefixAll(system, tenant, table, aggregate), 1)
	if err != nil || len(dls) == 0 {
		return DeadLetter{}, false, err
	}
	return dls[0], true, nil
}

// entryPrefixAll is entryPrefix without stopping at empty parts: an empty aggregate (a
// record without the aggregate attribute) is a key of its own.
func entryPrefixAll(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(escapeKeyPart(p))
		b.WriteByte('#')
	}
	return b.String()
}

// blockedAggregates reads which aggregates of a table have dead letters (with the first
// one's sequence number) and how many dead letters the table has.
func (d *DeadLetters) blockedAggregates(ctx context.Context, system, tenant, table string) (map[string]string, int, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(d.table),
		KeyConditionExpression:    aws.String("#c = :c AND begins_with(#k, :p)"),
		ProjectionExpression:      aws.String("#a, #s"),
		ExpressionAttributeNames:  map[string]string{"#c": attrConsumer, "#k": attrEntryKey, "#a": attrAggregate, "#s": attrSeq},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": str(d.consumer), ":p": str(entryPrefixAll(system, tenant, table))},
		ConsistentRead:            aws.Bool(true),
	}
	blocked := map[string]string{}
	n := 0
	p := dynamodb.NewQueryPaginator(d.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("query dead letters of %s/%s/%s: %w", system, tenant, table, err)
		}
		for _, item := range page.Items {
			n++
			agg := getS(item, attrAggregate)
			if _, ok := blocked[agg]; !ok { // sorted by sequence within an aggregate
				blocked[agg] = getS(item, attrSeq)
			}
		}
	}
	return blocked, n, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// Rewrite passes each dead letter of one tenant to fn, which may change it: drop deletes
// it, changed stores it again as fn left it (its key unchanged). An erasure uses it
// (internal/erasure): the dead letters of an erased user go, and those naming them as a
// member are rewritten as their history records are. It returns how many it dropped and
// rewrote.
func (d *DeadLetters) Rewrite(ctx context.Context, system, tenant string, fn func(*DeadLetter) (drop, changed bool, err error)) (dropped, rewritten int, err error) {
	prefix, err := DeadLetterFilter{System: system, Tenant: tenant}.prefix()
	if err != nil {
		return 0, 0, err
	}
	all, err := d.query(ctx, prefix, 0)
	if err != nil {
		return 0, 0, err
	}
	for i := range all {
		dl := &all[i]
		drop, changed, err := fn(dl)
		if err != nil {
			return dropped, rewritten, err
		}
		switch {
		case drop:
			if err := d.delete(ctx, *dl); err != nil {
				return dropped, rewritten, err
			}
			dropped++
		case changed:
			failures := dl.RedriveFailures
			if err := d.put(ctx, *dl); err != nil {
				return dropped, rewritten, err
			}
			for range failures {
				if err := d.noteRedriveFailure(ctx, *dl); err != nil {
					return dropped, rewritten, err
				}
			}
			rewritten++
		}
	}
	return dropped, rewritten, nil
}

// Put stores a dead letter as a consumer does when it gives a record up: for tools that
// move dead letters, and for tests that need one without failing a handler for minutes.
func (d *DeadLetters) Put(ctx context.Context, dl DeadLetter) error { return d.put(ctx, dl) }
