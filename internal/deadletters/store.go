// Package deadletters is a stream consumer's dead-letter store, shared by the lease-based
// consumer (internal/streams) and Lambda mode (internal/esm): the records a consumer gave
// up, the records parked behind them to keep each aggregate's order, and the re-drive that
// applies them again.
//
// One table holds, per consumer, a partition for each kind of item:
//
//	<consumer>           the dead letters, sorted by system, tenant, table, aggregate, sequence
//	<consumer>#blocked   a small marker per aggregate that has dead letters (its first
//	                     one's sequence number and a count)
//	<consumer>#attempts  failed-attempt counts of records read by Lambda (they expire)
//	<consumer>#redrive   where a re-drive cut short by its time budget goes on next time
//
// The markers make "is this aggregate blocked?" a keyed read of a few hundred bytes, so a
// batch costs the same whether the store holds no dead letters or a hundred thousand; the
// dead letters themselves (up to 300 KB each) are read only by a re-drive, a page at a time.
package deadletters

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

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/streams"
)

// DB is what the store needs of DynamoDB; *dynamodb.Client implements it.
type DB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Letter is a record that was not applied: either its handler kept failing (Reason is
// the handler's last error), or it was parked because an earlier record of the same
// aggregate is a dead letter (BlockedBehind names that record), so the aggregate's order
// holds until the dead letters are re-driven.
type Letter struct {
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
	Record          streams.Record
}

// Filter narrows List and Redrive; a field may be set only if the ones before it are
// (System, then Tenant, then Table). The zero filter means all.
type Filter struct {
	System string
	Tenant string
	Table  string
}

// Store is a consumer's dead-letter store.
type Store struct {
	db       DB
	table    string
	consumer string
	now      func() time.Time
}

// New opens the dead letters of consumer in table.
func New(db DB, table, consumer string) *Store {
	return &Store{db: db, table: table, consumer: consumer, now: time.Now}
}

var _ streams.DeadLetterStore = (*Store)(nil)

// Attribute names of the dead-letter table (the key is the lease table's: streams.EnsureTables
// and dynamo.StreamTables create both alike).
const (
	attrConsumer      = "consumer"
	attrEntryKey      = "entry_key"
	attrSystem        = "system_id"
	attrTenant        = "tenant_id"
	attrTable         = "table_name"
	attrStreamARN     = "stream_arn"
	attrShardID       = "shard_id"
	attrSeq           = "sequence_number"
	attrAggregate     = "aggregate"
	attrAttempts      = "attempts"
	attrParked        = "parked_invocations"
	attrReason        = "reason"
	attrBlockedBehind = "blocked_behind"
	attrDeadAt        = "dead_lettered_at"
	attrRecord        = "record"
	attrRecordGzip    = "record_gz"
	attrRedriveErrors = "redrive_failures"
	attrCount         = "dead_letters"
	attrNext          = "next"
	// TTLAttr is the table's time-to-live attribute (epoch seconds): attempt counts expire.
	TTLAttr = "expires_at"
)

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

// aggregateKey is the sort key prefix of one aggregate's dead letters, and its marker's key.
// Every part is written, an empty one too (a record without the aggregate attribute is an
// aggregate of its own).
func aggregateKey(system, tenant, table, aggregate string) string {
	var b strings.Builder
	for _, p := range []string{system, tenant, table, aggregate} {
		b.WriteString(escapeKeyPart(p))
		b.WriteByte('#')
	}
	return b.String()
}

func entryKey(system, tenant, table, aggregate, seq string) string {
	return aggregateKey(system, tenant, table, aggregate) + streams.PadSequenceNumber(seq)
}

func (f Filter) prefix() (string, error) {
	if (f.Tenant != "" && f.System == "") || (f.Table != "" && f.Tenant == "") {
		return "", errors.New("dead letter filter: set System before Tenant and Tenant before Table")
	}
	var b strings.Builder
	for _, p := range []string{f.System, f.Tenant, f.Table} {
		if p == "" {
			break
		}
		b.WriteString(escapeKeyPart(p))
		b.WriteByte('#')
	}
	return b.String(), nil
}

func (s *Store) markers() string  { return s.consumer + "#blocked" }
func (s *Store) attempts() string { return s.consumer + "#attempts" }
func (s *Store) cursors() string  { return s.consumer + "#redrive" }

// List returns the dead letters matching f, ordered by system, tenant, table, aggregate
// and sequence number. It reads them all: an operator's tool (and tests); the consumers
// and the re-drive never call it.
func (s *Store) List(ctx context.Context, f Filter) ([]Letter, error) {
	var out []Letter
	err := s.Each(ctx, f, func(l Letter) error { out = append(out, l); return nil })
	return out, err
}

// Each passes the dead letters matching f to fn in List's order, a page at a time.
func (s *Store) Each(ctx context.Context, f Filter, fn func(Letter) error) error {
	prefix, err := f.prefix()
	if err != nil {
		return err
	}
	in := s.queryEntries(prefix, 0)
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("query dead letters of %s under %q: %w", s.consumer, prefix, err)
		}
		for _, item := range page.Items {
			l, err := s.decode(item)
			if err != nil {
				return err
			}
			if err := fn(l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) queryEntries(prefix string, limit int32) *dynamodb.QueryInput {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": attrConsumer},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": str(s.consumer)},
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
	return in
}

// firstEntries reads up to n dead letters of one aggregate, oldest first.
func (s *Store) firstEntries(ctx context.Context, aggKey string, n int32) ([]Letter, error) {
	out, err := s.db.Query(ctx, s.queryEntries(aggKey, n))
	if err != nil {
		return nil, fmt.Errorf("query dead letters of %s under %q: %w", s.consumer, aggKey, err)
	}
	letters := make([]Letter, 0, len(out.Items))
	for _, item := range out.Items {
		l, err := s.decode(item)
		if err != nil {
			return nil, err
		}
		letters = append(letters, l)
	}
	return letters, nil
}

// Add stores rec as a dead letter after attempts: one that failed itself (behind empty)
// or one parked behind its aggregate's first dead letter (behind is its sequence number).
func (s *Store) Add(ctx context.Context, rec streams.Record, attempts int, reason, behind string) error {
	return s.Put(ctx, Letter{System: rec.System, Tenant: rec.Tenant, Table: rec.Table, StreamARN: rec.StreamARN,
		ShardID: rec.ShardID, SequenceNumber: rec.SequenceNumber, Aggregate: rec.Aggregate, Attempts: attempts,
		Reason: reason, BlockedBehind: behind, At: s.now(), Record: rec})
}

// Put stores a dead letter and marks its aggregate blocked: as a consumer does when it
// gives a record up, for tools that move dead letters, and for tests.
func (s *Store) Put(ctx context.Context, l Letter) error {
	if err := s.putEntry(ctx, l); err != nil {
		return err
	}
	// The entry first, then the marker: a re-drive that deletes the marker and then finds
	// no entry left has seen every entry whose marker write it may have deleted.
	return s.mark(ctx, l.System, l.Tenant, l.Table, l.Aggregate, l.SequenceNumber, 1)
}

func (s *Store) putEntry(ctx context.Context, l Letter) error {
	item := map[string]types.AttributeValue{
		attrConsumer:  str(s.consumer),
		attrEntryKey:  str(entryKey(l.System, l.Tenant, l.Table, l.Aggregate, l.SequenceNumber)),
		attrSystem:    str(l.System),
		attrTenant:    str(l.Tenant),
		attrTable:     str(l.Table),
		attrStreamARN: str(l.StreamARN),
		attrShardID:   str(l.ShardID),
		attrSeq:       str(l.SequenceNumber),
		attrAggregate: str(l.Aggregate),
		attrAttempts:  num(l.Attempts),
		attrReason:    str(truncate(l.Reason, maxReason)),
		attrDeadAt:    str(l.At.UTC().Format(time.RFC3339Nano)),
	}
	if l.BlockedBehind != "" {
		item[attrBlockedBehind] = str(l.BlockedBehind)
	}
	if l.RedriveFailures > 0 {
		item[attrRedriveErrors] = num(l.RedriveFailures)
	}
	rec, err := json.Marshal(l.Record)
	if err != nil {
		return fmt.Errorf("encode dead letter %s: %w", l.SequenceNumber, err)
	}
	if len(rec) > gzipAbove {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(rec); err != nil {
			return fmt.Errorf("compress dead letter %s: %w", l.SequenceNumber, err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("compress dead letter %s: %w", l.SequenceNumber, err)
		}
		item[attrRecordGzip] = &types.AttributeValueMemberB{Value: buf.Bytes()}
	} else {
		item[attrRecord] = str(string(rec))
	}
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("store dead letter %s of %s: %w", l.SequenceNumber, identity.LogKey(l.Aggregate), err)
	}
	return nil
}

func (s *Store) decode(item map[string]types.AttributeValue) (Letter, error) {
	attempts, _ := strconv.Atoi(getN(item, attrAttempts))
	failures, _ := strconv.Atoi(getN(item, attrRedriveErrors))
	at, _ := time.Parse(time.RFC3339Nano, getS(item, attrDeadAt))
	l := Letter{
		Consumer: s.consumer, System: getS(item, attrSystem), Tenant: getS(item, attrTenant),
		Table: getS(item, attrTable), StreamARN: getS(item, attrStreamARN), ShardID: getS(item, attrShardID),
		SequenceNumber: getS(item, attrSeq), Aggregate: getS(item, attrAggregate), Attempts: attempts,
		Reason: getS(item, attrReason), BlockedBehind: getS(item, attrBlockedBehind), At: at,
		RedriveFailures: failures,
	}
	raw := []byte(getS(item, attrRecord))
	if b, ok := item[attrRecordGzip].(*types.AttributeValueMemberB); ok {
		zr, err := gzip.NewReader(bytes.NewReader(b.Value))
		if err != nil {
			return Letter{}, fmt.Errorf("decompress dead letter %s: %w", l.SequenceNumber, err)
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return Letter{}, fmt.Errorf("decompress dead letter %s: %w", l.SequenceNumber, err)
		}
	}
	if err := json.Unmarshal(raw, &l.Record); err != nil {
		return Letter{}, fmt.Errorf("decode dead letter %s: %w", l.SequenceNumber, err)
	}
	return l, nil
}

func (s *Store) deleteEntry(ctx context.Context, l Letter) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table),
		Key:       s.key(s.consumer, entryKey(l.System, l.Tenant, l.Table, l.Aggregate, l.SequenceNumber)),
	})
	if err != nil {
		return fmt.Errorf("delete dead letter %s of %s: %w", l.SequenceNumber, identity.LogKey(l.Aggregate), err)
	}
	return nil
}

func (s *Store) noteRedriveFailure(ctx context.Context, l Letter) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(s.consumer, entryKey(l.System, l.Tenant, l.Table, l.Aggregate, l.SequenceNumber)),
		UpdateExpression:         aws.String("SET #r = :r ADD #f :one"),
		ConditionExpression:      aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#r": attrReason, "#f": attrRedriveErrors, "#k": attrEntryKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":r": str(l.Reason), ":one": num(1),
		},
	})
	if err != nil && !sdkerr.ConditionFailed(err) {
		return fmt.Errorf("note re-drive failure of %s: %w", l.SequenceNumber, err)
	}
	return nil
}

func (s *Store) key(partition, sortKey string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrConsumer: str(partition), attrEntryKey: str(sortKey)}
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

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(n)} }

func getS(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}
