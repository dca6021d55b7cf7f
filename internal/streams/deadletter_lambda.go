package streams

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// What a stream reader other than the Subscriber (Lambda's event source mapping, through
// internal/esm) needs of the dead-letter store, so that both modes share one store, one
// `dead-letters list|redrive` and one parking rule.

// Store stores a dead letter: a record that failed its attempts (BlockedBehind empty) or
// one parked behind its aggregate's first dead letter.
func (d *DeadLetters) Store(ctx context.Context, dl DeadLetter) error {
	dl.Consumer = d.consumer
	return d.put(ctx, dl)
}

// FirstOf is the oldest dead letter of an aggregate, if any.
func (d *DeadLetters) FirstOf(ctx context.Context, system, tenant, table, aggregate string) (DeadLetter, bool, error) {
	return d.firstOf(ctx, system, tenant, table, aggregate)
}

// BlockedAggregates are the aggregates of a table that have dead letters, each with its
// first one's sequence number.
func (d *DeadLetters) BlockedAggregates(ctx context.Context, system, tenant, table string) (map[string]string, error) {
	m, _, err := d.blockedAggregates(ctx, system, tenant, table)
	return m, err
}

// attemptsPartition holds the failed-attempt counts of records read by Lambda, beside
// (never in) the consumer's dead letters, which List and Redrive read.
func (d *DeadLetters) attemptsPartition() string { return d.consumer + "#attempts" }

func attemptKey(r Record) string { return r.StreamARN + "#" + padSeq(r.SequenceNumber) }

// NoteFailedAttempt counts one more failed attempt of r and returns the count. A reader
// whose deliveries cross processes (an event source mapping retrying a batch in another
// invocation) keeps the count here.
func (d *DeadLetters) NoteFailedAttempt(ctx context.Context, r Record) (int, error) {
	out, err := d.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(d.table),
		Key: map[string]types.AttributeValue{
			attrConsumer: str(d.attemptsPartition()), attrEntryKey: str(attemptKey(r)),
		},
		UpdateExpression:          aws.String("ADD #a :one"),
		ExpressionAttributeNames:  map[string]string{"#a": attrAttempts},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("count a failed attempt of %s: %w", r.SequenceNumber, err)
	}
	n, _ := strconv.Atoi(getN(out.Attributes, attrAttempts))
	return n, nil
}

// ForgetAttempts deletes r's failed-attempt count (r was applied or dead-lettered).
func (d *DeadLetters) ForgetAttempts(ctx context.Context, r Record) error {
	_, err := d.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(d.table),
		Key: map[string]types.AttributeValue{
			attrConsumer: str(d.attemptsPartition()), attrEntryKey: str(attemptKey(r)),
		},
	})
	if err != nil {
		return fmt.Errorf("forget the attempts of %s: %w", r.SequenceNumber, err)
	}
	return nil
}

// CompareSequenceNumbers orders two sequence numbers of one shard (-1, 0, 1).
func CompareSequenceNumbers(a, b string) int { return compareSeq(a, b) }
