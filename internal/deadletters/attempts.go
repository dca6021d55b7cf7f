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
	"github.com/ssodir/ssodir/internal/streams"
)

// A reader whose deliveries cross processes (an event source mapping retrying a batch in
// another invocation) counts a record's failed attempts here: one row per aggregate of a
// stream, naming the record it counts, so a count belongs to one record only. The row is
// deleted when that record is applied or dead-lettered, and expires after attemptsTTL in
// any case (the stream keeps records 24 hours).
const attemptsTTL = 48 * time.Hour

// Attempt is a record's count of failed attempts.
type Attempt struct {
	SequenceNumber string
	N              int
	// Parked counts the invocations that returned the record because its handler parked
	// its tenant (NoteParked): not failed attempts.
	Parked int
}

func attemptKey(r streams.Record) string {
	return aggregateKey(r.System, r.Tenant, r.Table, r.Aggregate) + escapeKeyPart(r.StreamARN)
}

// BatchState is what a batch needs to know of its aggregates before it applies them.
type BatchState struct {
	// Blocked are the aggregates with dead letters, each with its first one's sequence number.
	Blocked map[Aggregate]string
	// Attempts are the failed-attempt counts kept for the aggregates, by aggregate.
	Attempts map[Aggregate]Attempt
}

// Lookup reads, for the aggregates of one stream's batch, their markers and attempt counts:
// keyed reads of small items (one BatchGetItem per 50 aggregates), whatever the number of
// dead letters stored.
func (s *Store) Lookup(ctx context.Context, streamARN string, aggs []Aggregate) (BatchState, error) {
	st := BatchState{Blocked: map[Aggregate]string{}, Attempts: map[Aggregate]Attempt{}}
	type ref struct {
		agg     Aggregate
		attempt bool
	}
	refs := map[[2]string]ref{}
	var keys []map[string]types.AttributeValue
	for _, a := range aggs {
		mk := a.key()
		if _, dup := refs[[2]string{s.markers(), mk}]; dup {
			continue
		}
		ak := mk + escapeKeyPart(streamARN)
		refs[[2]string{s.markers(), mk}] = ref{agg: a}
		refs[[2]string{s.attempts(), ak}] = ref{agg: a, attempt: true}
		keys = append(keys, s.key(s.markers(), mk), s.key(s.attempts(), ak))
	}
	for len(keys) > 0 {
		n := min(len(keys), batchGetMax)
		items, err := s.batchGet(ctx, keys[:n], fmt.Sprintf("%s, %s, %s, %s, %s", attrConsumer, attrEntryKey, attrSeq, attrAttempts, attrParked))
		if err != nil {
			return BatchState{}, err
		}
		for _, item := range items {
			r, ok := refs[[2]string{getS(item, attrConsumer), getS(item, attrEntryKey)}]
			switch {
			case !ok:
			case r.attempt:
				n, _ := strconv.Atoi(getN(item, attrAttempts))
				p, _ := strconv.Atoi(getN(item, attrParked))
				st.Attempts[r.agg] = Attempt{SequenceNumber: getS(item, attrSeq), N: n, Parked: p}
			default:
				st.Blocked[r.agg] = getS(item, attrSeq)
			}
		}
		keys = keys[n:]
	}
	return st, nil
}

// NoteFailedAttempt counts one more failed attempt of r and returns the count. A count
// kept for another record of the aggregate (one that failed, then was applied) is replaced.
func (s *Store) NoteFailedAttempt(ctx context.Context, r streams.Record) (int, error) {
	return s.note(ctx, r, attrAttempts)
}

// NoteParked counts one more invocation that returned r because its handler parked its
// tenant, and returns the count; it shares r's row with its failed attempts (and is
// forgotten with them), but not their count.
func (s *Store) NoteParked(ctx context.Context, r streams.Record) (int, error) {
	return s.note(ctx, r, attrParked)
}

func (s *Store) note(ctx context.Context, r streams.Record, attr string) (int, error) {
	key := s.key(s.attempts(), attemptKey(r))
	expires := num(int(s.now().Add(attemptsTTL).Unix()))
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key,
		UpdateExpression:          aws.String("SET #x = :x ADD #a :one"),
		ConditionExpression:       aws.String("#s = :s"),
		ExpressionAttributeNames:  map[string]string{"#a": attr, "#s": attrSeq, "#x": TTLAttr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":s": str(r.SequenceNumber), ":x": expires},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err == nil {
		n, _ := strconv.Atoi(getN(out.Attributes, attr))
		return n, nil
	}
	if !sdkerr.ConditionFailed(err) {
		return 0, fmt.Errorf("count a failed attempt of %s: %w", r.SequenceNumber, err)
	}
	key[attrSeq], key[attr], key[TTLAttr] = str(r.SequenceNumber), num(1), expires
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: key}); err != nil {
		return 0, fmt.Errorf("count a failed attempt of %s: %w", r.SequenceNumber, err)
	}
	return 1, nil
}

// ForgetAttempts deletes r's failed-attempt count (r was applied or dead-lettered); a
// count of another record of the aggregate stays.
func (s *Store) ForgetAttempts(ctx context.Context, r streams.Record) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(s.attempts(), attemptKey(r)),
		ConditionExpression:       aws.String("#s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": attrSeq},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str(r.SequenceNumber)},
	})
	if err != nil && !sdkerr.ConditionFailed(err) {
		return fmt.Errorf("forget the attempts of %s: %w", r.SequenceNumber, err)
	}
	return nil
}
