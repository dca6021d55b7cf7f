package deadletters

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/identity"
)

// An aggregate's marker says it has dead letters: the first one's sequence number (what
// later records are parked behind) and about how many (a re-drive keeps the count up to
// date; it only feeds a metric). It is written after the dead letter and deleted by the
// re-drive that empties the aggregate, so a marker may outlive its dead letters for a
// moment (records then park behind it and the next re-drive applies them) but an
// aggregate with dead letters always has one.

// Aggregate names one aggregate of one tenant's table.
type Aggregate struct {
	System, Tenant, Table, Aggregate string
}

func (a Aggregate) key() string { return aggregateKey(a.System, a.Tenant, a.Table, a.Aggregate) }

// batchGetMax is BatchGetItem's limit of keys per request.
const batchGetMax = 100

// Blocked answers which of aggs have dead letters, each with its first one's sequence
// number: keyed reads of the markers (one BatchGetItem per 100 aggregates), whatever the
// number of dead letters stored.
func (s *Store) Blocked(ctx context.Context, aggs []Aggregate) (map[Aggregate]string, error) {
	byKey := make(map[string]Aggregate, len(aggs))
	keys := make([]map[string]types.AttributeValue, 0, len(aggs))
	for _, a := range aggs {
		k := a.key()
		if _, dup := byKey[k]; dup {
			continue
		}
		byKey[k] = a
		keys = append(keys, s.key(s.markers(), k))
	}
	out := map[Aggregate]string{}
	for len(keys) > 0 {
		n := min(len(keys), batchGetMax)
		items, err := s.batchGet(ctx, keys[:n], attrEntryKey+", "+attrSeq)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			out[byKey[getS(item, attrEntryKey)]] = getS(item, attrSeq)
		}
		keys = keys[n:]
	}
	return out, nil
}

// batchGet reads keys (at most 100) consistently, asking again for unprocessed keys.
func (s *Store) batchGet(ctx context.Context, keys []map[string]types.AttributeValue, projection string) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	req := map[string]types.KeysAndAttributes{s.table: {
		Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String(projection),
	}}
	pause := 20 * time.Millisecond
	for {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("read dead-letter markers of %s: %w", s.consumer, err)
		}
		items = append(items, out.Responses[s.table]...)
		left, ok := out.UnprocessedKeys[s.table]
		if !ok || len(left.Keys) == 0 {
			return items, nil
		}
		req = out.UnprocessedKeys
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// FirstOf is the sequence number of an aggregate's first dead letter, as its marker says.
func (s *Store) FirstOf(ctx context.Context, system, tenant, table, aggregate string) (string, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:            aws.String(s.table),
		Key:                  s.key(s.markers(), aggregateKey(system, tenant, table, aggregate)),
		ConsistentRead:       aws.Bool(true),
		ProjectionExpression: aws.String(attrSeq),
	})
	if err != nil {
		return "", false, fmt.Errorf("read the dead-letter marker of %s: %w", identity.LogKey(aggregate), err)
	}
	if out.Item == nil {
		return "", false, nil
	}
	return getS(out.Item, attrSeq), true, nil
}

// BlockedIn reads which aggregates of a table have dead letters (with the first one's
// sequence number) and about how many dead letters they hold: a Query of the table's
// markers, as a consumer does once when it starts on a stream.
func (s *Store) BlockedIn(ctx context.Context, system, tenant, table string) (map[string]string, int, error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table),
		KeyConditionExpression: aws.String("#c = :c AND begins_with(#k, :p)"),
		ProjectionExpression:   aws.String("#a, #s, #n"),
		ExpressionAttributeNames: map[string]string{"#c": attrConsumer, "#k": attrEntryKey, "#a": attrAggregate,
			"#s": attrSeq, "#n": attrCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": str(s.markers()), ":p": str(Filter{System: system, Tenant: tenant, Table: table}.mustPrefix()),
		},
		ConsistentRead: aws.Bool(true),
	}
	blocked := map[string]string{}
	n := 0
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("query dead-letter markers of %s/%s/%s: %w", system, tenant, table, err)
		}
		for _, item := range page.Items {
			blocked[getS(item, attrAggregate)] = getS(item, attrSeq)
			c, _ := strconv.Atoi(getN(item, attrCount))
			n += max(c, 1)
		}
	}
	return blocked, n, nil
}

func (f Filter) mustPrefix() string {
	p, err := f.prefix()
	if err != nil {
		panic(err)
	}
	return p
}

// mark records that an aggregate has one more (n) dead letter(s), the first at seq unless
// it has one already.
func (s *Store) mark(ctx context.Context, system, tenant, table, aggregate, seq string, n int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              s.key(s.markers(), aggregateKey(system, tenant, table, aggregate)),
		UpdateExpression: aws.String("SET #s = if_not_exists(#s, :s), #sys = :sys, #t = :t, #tab = :tab, #a = :a ADD #n :n"),
		ExpressionAttributeNames: map[string]string{"#s": attrSeq, "#sys": attrSystem, "#t": attrTenant, "#tab": attrTable,
			"#a": attrAggregate, "#n": attrCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(seq), ":sys": str(system), ":t": str(tenant),
			":tab": str(table), ":a": str(aggregate), ":n": num(n)},
	})
	if err != nil {
		return fmt.Errorf("mark %s blocked: %w", identity.LogKey(aggregate), err)
	}
	return nil
}

// setMarker states an aggregate's first dead letter and count as a re-drive found them.
func (s *Store) setMarker(ctx context.Context, a Aggregate, first string, count int) error {
	item := s.key(s.markers(), a.key())
	item[attrSeq] = str(first)
	item[attrSystem], item[attrTenant], item[attrTable], item[attrAggregate] = str(a.System), str(a.Tenant), str(a.Table), str(a.Aggregate)
	item[attrCount] = num(max(count, 1))
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("mark %s blocked: %w", identity.LogKey(a.Aggregate), err)
	}
	return nil
}

// advanceMarker moves a marker's first dead letter to first after applied were applied.
func (s *Store) advanceMarker(ctx context.Context, a Aggregate, first string, applied int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(s.markers(), a.key()),
		UpdateExpression:          aws.String("SET #s = :s ADD #n :n"),
		ConditionExpression:       aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames:  map[string]string{"#s": attrSeq, "#n": attrCount, "#k": attrEntryKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(first), ":n": num(-applied)},
	})
	if sdkerr.ConditionFailed(err) {
		return s.setMarker(ctx, a, first, 1)
	}
	if err != nil {
		return fmt.Errorf("update the dead-letter marker of %s: %w", identity.LogKey(a.Aggregate), err)
	}
	return nil
}

// unmark deletes an aggregate's marker once the re-drive found no dead letter left; the
// caller looks again afterwards (a consumer may have parked one in between).
func (s *Store) unmark(ctx context.Context, a Aggregate) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: s.key(s.markers(), a.key())})
	if err != nil {
		return fmt.Errorf("delete the dead-letter marker of %s: %w", identity.LogKey(a.Aggregate), err)
	}
	return nil
}

// refreshMarker makes an aggregate's marker say what its dead letters are, reading their
// keys (a tool's path: an erasure's rewrite, a backfill of markers).
func (s *Store) refreshMarker(ctx context.Context, a Aggregate) error {
	in := s.queryEntries(a.key(), 0)
	in.ProjectionExpression = aws.String("#s")
	in.ExpressionAttributeNames["#s"] = attrSeq
	first, n := "", 0
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("query dead letters of %s: %w", identity.LogKey(a.Aggregate), err)
		}
		for _, item := range page.Items {
			if n == 0 {
				first = getS(item, attrSeq)
			}
			n++
		}
	}
	if n == 0 {
		return s.unmark(ctx, a)
	}
	return s.setMarker(ctx, a, first, n)
}

// Backfill writes the markers of dead letters stored before markers existed (an upgrade):
// it reads every dead letter's key once. `dead-letters backfill` runs it.
func (s *Store) Backfill(ctx context.Context) (int, error) {
	in := s.queryEntries("", 0)
	in.ProjectionExpression = aws.String("#sys, #t, #tab, #a")
	in.ExpressionAttributeNames["#sys"], in.ExpressionAttributeNames["#t"] = attrSystem, attrTenant
	in.ExpressionAttributeNames["#tab"], in.ExpressionAttributeNames["#a"] = attrTable, attrAggregate
	var last Aggregate
	n := 0
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return n, fmt.Errorf("query dead letters of %s: %w", s.consumer, err)
		}
		for _, item := range page.Items {
			a := Aggregate{getS(item, attrSystem), getS(item, attrTenant), getS(item, attrTable), getS(item, attrAggregate)}
			if n > 0 && a == last {
				continue
			}
			if err := s.refreshMarker(ctx, a); err != nil {
				return n, err
			}
			last = a
			n++
		}
	}
	return n, nil
}

// Counts reads about how many dead letters each tenant matching f holds, from the
// markers (one small item per blocked aggregate), for a status report.
func (s *Store) Counts(ctx context.Context, f Filter) (map[Tenant]int, error) {
	prefix, err := f.prefix()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#c = :c AND #k BETWEEN :lo AND :hi"),
		ProjectionExpression:     aws.String("#sys, #t, #n"),
		ExpressionAttributeNames: map[string]string{"#c": attrConsumer, "#k": attrEntryKey, "#sys": attrSystem, "#t": attrTenant, "#n": attrCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": str(s.markers()), ":lo": str(prefix + keyFloor), ":hi": str(prefix + keyCeiling),
		},
	}
	out := map[Tenant]int{}
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query dead-letter markers of %s: %w", s.consumer, err)
		}
		for _, item := range page.Items {
			c, _ := strconv.Atoi(getN(item, attrCount))
			out[Tenant{getS(item, attrSystem), getS(item, attrTenant)}] += max(c, 1)
		}
	}
	return out, nil
}
