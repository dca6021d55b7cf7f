// Package esmtest plays Lambda's event source mapping over a real DynamoDB stream
// (DynamoDB Local's) for tests: it reads the shards in order from TRIM_HORIZON, hands
// batches in ESM's event shape to a function, and honours what ESM honours —
// BatchItemFailures (the shard restarts at the lowest failed sequence number), bisection
// of a batch on a function error, a finite number of retries, and the failure destination
// (here a list of what was sent to it). The real ESM is AWS's; this is test code.
package esmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/ssodir/ssodir/internal/mappings"
)

// Invoke calls the function with one batch.
type Invoke func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// Failure is what the failure destination received: a batch ESM gave up on.
type Failure struct {
	StreamARN string
	ShardID   string
	Records   int
	// FirstSequenceNumber and LastSequenceNumber bound the records given up.
	FirstSequenceNumber, LastSequenceNumber string
	Reason                                  string
}

// Player is one mapping: a stream and a function.
type Player struct {
	Streams   *dynamodbstreams.Client
	StreamARN string
	Invoke    Invoke
	// BatchSize and MaxRetries as in the mapping (defaults: mappings.BatchSize,
	// mappings.MaximumRetryAttempts).
	BatchSize, MaxRetries int

	mu       sync.Mutex
	failures []Failure
	// Invocations counts the function's invocations.
	invocations int
	pending     map[string][]events.DynamoDBEventRecord // by shard: read, not yet done
	iterators   map[string]*string
	finished    map[string]bool
	seen        map[string]bool // shards a record was read from
}

// Failures is what reached the failure destination.
func (p *Player) Failures() []Failure {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Failure(nil), p.failures...)
}

// Invocations is how many batches the function was given.
func (p *Player) Invocations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.invocations
}

// Drain reads and plays every record written so far, and returns once every shard is
// caught up (a read came back empty after all its records were done).
func (p *Player) Drain(ctx context.Context) error {
	if p.BatchSize <= 0 {
		p.BatchSize = mappings.BatchSize
	}
	if p.MaxRetries <= 0 {
		p.MaxRetries = mappings.MaximumRetryAttempts
	}
	if p.pending == nil {
		p.pending, p.iterators, p.finished, p.seen = map[string][]events.DynamoDBEventRecord{}, map[string]*string{}, map[string]bool{}, map[string]bool{}
	}
	shards, err := p.shards(ctx)
	if err != nil {
		return err
	}
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		if p.finished[id] {
			continue
		}
		if err := p.drainShard(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// shards lists the stream's shards, parents before children.
func (p *Player) shards(ctx context.Context) ([]stypes.Shard, error) {
	var all []stypes.Shard
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(p.StreamARN)}
	for {
		out, err := p.Streams.DescribeStream(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("describe stream: %w", err)
		}
		all = append(all, out.StreamDescription.Shards...)
		if out.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		in.ExclusiveStartShardId = out.StreamDescription.LastEvaluatedShardId
	}
	// Shard ids sort by creation; a parent is older than its children.
	sort.SliceStable(all, func(i, j int) bool { return aws.ToString(all[i].ShardId) < aws.ToString(all[j].ShardId) })
	return all, nil
}

// drainShardFromStart takes a TRIM_HORIZON iterator of the shard.
func (p *Player) drainShardFromStart(ctx context.Context, shard string) error {
	out, err := p.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(p.StreamARN),
		ShardId: aws.String(shard), ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		return fmt.Errorf("shard iterator: %w", err)
	}
	p.iterators[shard] = out.ShardIterator
	return nil
}

func (p *Player) drainShard(ctx context.Context, shard string) error {
	if _, started := p.iterators[shard]; !started {
		if err := p.drainShardFromStart(ctx, shard); err != nil {
			return err
		}
	}
	for {
		it := p.iterators[shard]
		if it == nil {
			p.finished[shard] = len(p.pending[shard]) == 0
			return p.play(ctx, shard)
		}
		out, err := p.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it, Limit: aws.Int32(1000)})
		var trimmed *stypes.TrimmedDataAccessException
		if errors.As(err, &trimmed) && !p.seen[shard] {
			// DynamoDB Local: an iterator taken while the shard was empty fails once the
			// table is written (DYNAMODB-LOCAL.md, trap 2). Nothing was read from the
			// shard yet, so a fresh TRIM_HORIZON iterator loses nothing.
			p.iterators[shard] = nil
			if err := p.drainShardFromStart(ctx, shard); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("get records: %w", err)
		}
		if len(out.Records) > 0 {
			p.seen[shard] = true
		}
		p.iterators[shard] = out.NextShardIterator
		for _, r := range out.Records {
			er, err := eventRecord(p.StreamARN, r)
			if err != nil {
				return err
			}
			p.pending[shard] = append(p.pending[shard], er)
		}
		if err := p.play(ctx, shard); err != nil {
			return err
		}
		if len(out.Records) == 0 {
			return nil
		}
	}
}

// play hands the shard's pending records to the function until they are all done.
func (p *Player) play(ctx context.Context, shard string) error {
	retries := 0
	size := p.BatchSize
	for len(p.pending[shard]) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs := p.pending[shard]
		batch := recs[:min(size, len(recs))]
		p.mu.Lock()
		p.invocations++
		p.mu.Unlock()
		resp, err := p.Invoke(ctx, events.DynamoDBEvent{Records: batch})
		if err != nil {
			// A function error: bisect (the first half is tried alone), count a retry.
			retries++
			if retries > p.MaxRetries {
				p.giveUp(shard, batch, err.Error())
				p.pending[shard] = recs[len(batch):]
				retries, size = 0, p.BatchSize
				continue
			}
			if len(batch) > 1 {
				size = (len(batch) + 1) / 2
			}
			continue
		}
		lowest := ""
		for _, f := range resp.BatchItemFailures {
			if lowest == "" || lessSeq(f.ItemIdentifier, lowest) {
				lowest = f.ItemIdentifier
			}
		}
		if lowest == "" {
			p.pending[shard] = recs[len(batch):]
			retries, size = 0, p.BatchSize
			continue
		}
		at := -1
		for i, r := range batch {
			if r.Change.SequenceNumber == lowest {
				at = i
				break
			}
		}
		if at < 0 {
			// ESM treats an identifier it does not know as a failure of the whole batch.
			at = 0
		}
		if at > 0 {
			retries = 0
		} else {
			retries++
		}
		p.pending[shard] = recs[at:]
		if retries > p.MaxRetries {
			p.giveUp(shard, batch[at:], "records failed after the maximum retries")
			p.pending[shard] = recs[len(batch):]
			retries, size = 0, p.BatchSize
		}
	}
	return nil
}

func (p *Player) giveUp(shard string, batch []events.DynamoDBEventRecord, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, Failure{StreamARN: p.StreamARN, ShardID: shard, FirstSequenceNumber: batch[0].Change.SequenceNumber,
		LastSequenceNumber: batch[len(batch)-1].Change.SequenceNumber, Records: len(batch), Reason: reason})
}

// Message is the failure destination's message for f, as AWS writes it (the record
// itself is not in it: only its place in the stream).
func (f Failure) Message() events.SQSMessage {
	body, _ := json.Marshal(map[string]any{
		"requestContext": map[string]any{"functionArn": "arn:aws:lambda:local:000000000000:function:test",
			"condition": "RetryAttemptsExhausted", "approximateInvokeCount": 1},
		"responseContext": map[string]any{"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
		"version":         "1.0",
		"timestamp":       time.Now().UTC().Format(time.RFC3339Nano),
		"DDBStreamBatchInfo": map[string]any{"shardId": f.ShardID, "startSequenceNumber": f.FirstSequenceNumber,
			"endSequenceNumber": f.LastSequenceNumber, "batchSize": f.Records, "streamArn": f.StreamARN},
	})
	return events.SQSMessage{MessageId: f.ShardID + "/" + f.FirstSequenceNumber, EventSource: "aws:sqs", Body: string(body)}
}

func lessSeq(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// eventRecord is a stream record in ESM's event shape: the JSON AWS sends, decoded by
// aws-lambda-go, with the attribute values converted by the SDK.
func eventRecord(streamARN string, r stypes.Record) (events.DynamoDBEventRecord, error) {
	change := map[string]any{
		"SequenceNumber": aws.ToString(r.Dynamodb.SequenceNumber),
		"StreamViewType": string(r.Dynamodb.StreamViewType),
	}
	if r.Dynamodb.SizeBytes != nil {
		change["SizeBytes"] = *r.Dynamodb.SizeBytes
	}
	if t := r.Dynamodb.ApproximateCreationDateTime; t != nil {
		change["ApproximateCreationDateTime"] = t.Unix()
	}
	for name, m := range map[string]map[string]stypes.AttributeValue{"Keys": r.Dynamodb.Keys, "NewImage": r.Dynamodb.NewImage, "OldImage": r.Dynamodb.OldImage} {
		if len(m) == 0 {
			continue
		}
		av, err := attributevalue.FromDynamoDBStreamsMap(m)
		if err != nil {
			return events.DynamoDBEventRecord{}, err
		}
		raw, err := attributevalue.MarshalMapJSON(av)
		if err != nil {
			return events.DynamoDBEventRecord{}, err
		}
		change[name] = json.RawMessage(raw)
	}
	rec := map[string]any{
		"eventID": aws.ToString(r.EventID), "eventName": string(r.EventName), "eventVersion": aws.ToString(r.EventVersion),
		"eventSource": "aws:dynamodb", "awsRegion": aws.ToString(r.AwsRegion), "eventSourceARN": streamARN, "dynamodb": change,
	}
	if id := r.UserIdentity; id != nil {
		rec["userIdentity"] = map[string]string{"type": aws.ToString(id.Type), "principalId": aws.ToString(id.PrincipalId)}
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return events.DynamoDBEventRecord{}, err
	}
	var out events.DynamoDBEventRecord
	if err := json.Unmarshal(raw, &out); err != nil {
		return events.DynamoDBEventRecord{}, fmt.Errorf("the event record does not decode as aws-lambda-go's: %w", err)
	}
	return out, nil
}

// Settle drains until the stream stays caught up for quiet.
func (p *Player) Settle(ctx context.Context, quiet time.Duration) error {
	for {
		before := p.Invocations()
		if err := p.Drain(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(quiet):
		}
		if err := p.Drain(ctx); err != nil {
			return err
		}
		if p.Invocations() == before {
			return nil
		}
	}
}
