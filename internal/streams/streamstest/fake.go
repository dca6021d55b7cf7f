// Package streamstest is an in-memory fake of the four DynamoDB Streams calls the
// streams package uses (ListStreams, DescribeStream, GetShardIterator, GetRecords), for
// the faults DynamoDB Local cannot be made to show: shard splits, a parent listed open
// while its child exists, empty pages, expired iterators, trimmed data, throttling, and
// AWS's rate limits (EnforceLimits).
package streamstest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// Fake holds streams in memory. Its methods are safe for concurrent use.
type Fake struct {
	mu        sync.Mutex
	streams   map[string]*stream
	order     []string
	iterators map[string]iterator
	nextIter  int
	seq       uint64
	throttle  int
	calls     map[string]int
	iterTypes map[types.ShardIteratorType]int
	reads     map[string]int // GetRecords calls by stream ARN
	limits    *Limits
	buckets   map[string]*bucket // by shard ("<arn>#<id>") and by account call
	throttled map[string]int
}

// Limits are AWS's Streams rates, which EnforceLimits makes the fake keep: a call over
// them fails with LimitExceededException, as AWS throttles, and is counted by Throttled.
// Each is a token bucket holding one second of calls.
type Limits struct {
	// ShardReads is GetRecords calls per second per shard, by every caller together.
	ShardReads float64
	// DescribeStream and ListStreams are calls per second per account.
	DescribeStream float64
	ListStreams    float64
}

// AWSLimits are the rates the streams package budgets for on AWS.
var AWSLimits = Limits{ShardReads: 5, DescribeStream: 10, ListStreams: 5}

type bucket struct {
	tokens float64
	last   time.Time
}

// EnforceLimits makes the fake throttle calls over l.
func (f *Fake) EnforceLimits(l Limits) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = &l
	f.buckets = map[string]*bucket{}
}

// Throttled is how many calls of op were refused for exceeding the enforced limits.
func (f *Fake) Throttled(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.throttled[op]
}

// take spends a token of the bucket key refilled at rate; the caller holds mu.
func (f *Fake) take(op, key string, rate float64) error {
	if rate <= 0 {
		return nil
	}
	now := time.Now()
	b, ok := f.buckets[key]
	if !ok {
		b = &bucket{tokens: rate, last: now}
		f.buckets[key] = b
	}
	b.tokens = min(rate, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens < 1 {
		f.throttled[op]++
		return &types.LimitExceededException{Message: aws.String(op + " rate exceeded (streamstest limits)")}
	}
	b.tokens--
	return nil
}

type stream struct {
	arn, table, label string
	shards            []*shard
}

type shard struct {
	id, parent string
	records    []types.Record
	// trimmed records are gone: records[:trimmed] can no longer be read.
	trimmed    int
	closed     bool
	listedOpen bool
	removed    bool
	emptyPages int
	// generation invalidates iterators on ExpireIterators.
	generation int
	// staleEmpty makes iterators taken while the shard is empty fail with
	// TrimmedDataAccessException once it has a record, as DynamoDB Local does.
	staleEmpty bool
}

type iterator struct {
	arn, shard string
	pos        int
	generation int
	takenEmpty bool
}

// New returns an empty fake.
func New() *Fake {
	return &Fake{
		streams:   map[string]*stream{},
		iterators: map[string]iterator{},
		calls:     map[string]int{},
		iterTypes: map[types.ShardIteratorType]int{},
		reads:     map[string]int{},
		throttled: map[string]int{},
		seq:       100_000_000_000_000_000,
	}
}

// AddStream adds a stream for table and returns its ARN.
func (f *Fake) AddStream(table string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	label := time.Now().UTC().Format("2006-01-02T15:04:05.000000000")
	arn := fmt.Sprintf("arn:aws:dynamodb:us-east-1:000000000000:table/%s/stream/%s", table, label)
	f.streams[arn] = &stream{arn: arn, table: table, label: label}
	f.order = append(f.order, arn)
	return arn
}

// AddShard adds an open shard; parent may be empty.
func (f *Fake) AddShard(arn, id, parent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.mustStream(arn)
	st.shards = append(st.shards, &shard{id: id, parent: parent})
}

// Put appends records to a shard, giving them increasing sequence numbers (21 digits,
// from one counter for all streams, as DynamoDB Local does). It returns the numbers.
func (f *Fake) Put(arn, shardID string, recs ...types.Record) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	sh := f.mustShard(arn, shardID)
	if sh.closed {
		panic("streamstest: Put on closed shard " + shardID)
	}
	seqs := make([]string, len(recs))
	for i, r := range recs {
		f.seq += 1 + uint64(i%3) // gaps within a shard are normal
		seq := strconv.FormatUint(f.seq, 10)
		seqs[i] = seq
		var sr types.StreamRecord
		if r.Dynamodb != nil {
			sr = *r.Dynamodb
		}
		sr.SequenceNumber = aws.String(seq)
		if sr.ApproximateCreationDateTime == nil {
			sr.ApproximateCreationDateTime = aws.Time(time.Now().Truncate(time.Second))
		}
		sr.StreamViewType = types.StreamViewTypeNewAndOldImages
		r.Dynamodb = &sr
		if r.EventID == nil {
			r.EventID = aws.String("ev-" + seq)
		}
		r.EventSource = aws.String("aws:dynamodb")
		sh.records = append(sh.records, r)
	}
	return seqs
}

// CloseShard closes a shard: once a reader has all its records, GetRecords returns no
// next iterator.
func (f *Fake) CloseShard(arn, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustShard(arn, id).closed = true
}

// Split closes parent and adds two children.
func (f *Fake) Split(arn, parent, childA, childB string) {
	f.CloseShard(arn, parent)
	f.AddShard(arn, childA, parent)
	f.AddShard(arn, childB, parent)
}

// ListOpen makes DescribeStream show a shard without an ending sequence number even when
// it is closed, as DescribeStream on AWS may for a while after a split.
func (f *Fake) ListOpen(arn, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustShard(arn, id).listedOpen = true
}

// EmptyPages makes the next n GetRecords calls on a shard return no records (with a next
// iterator at the same position), as GetRecords on AWS does on sparse shards.
func (f *Fake) EmptyPages(arn, id string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustShard(arn, id).emptyPages += n
}

// ExpireIterators makes every iterator handed out so far fail with
// ExpiredIteratorException.
func (f *Fake) ExpireIterators() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.streams {
		for _, sh := range st.shards {
			sh.generation++
		}
	}
}

// Trim drops the oldest n records of a shard, as the 24-hour retention does. A reader
// positioned before them gets TrimmedDataAccessException.
func (f *Fake) Trim(arn, id string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sh := f.mustShard(arn, id)
	sh.trimmed = min(sh.trimmed+n, len(sh.records))
}

// RemoveShard makes a shard unknown to every call, as a shard trimmed entirely is.
func (f *Fake) RemoveShard(arn, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustShard(arn, id).removed = true
}

// StaleEmptyIterators makes iterators taken while the shard is empty fail with
// TrimmedDataAccessException after the shard's first record (DynamoDB Local's trap 2).
func (f *Fake) StaleEmptyIterators(arn, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustShard(arn, id).staleEmpty = true
}

// Throttle makes the next n calls (of any kind) fail with LimitExceededException.
func (f *Fake) Throttle(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.throttle += n
}

// Calls is how often op ("GetRecords", ...) was called, throttled calls included.
func (f *Fake) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// StreamReads is how often GetRecords was called on a stream's shards.
func (f *Fake) StreamReads(arn string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[arn]
}

// IteratorTypes is how often GetShardIterator was asked for each iterator type.
func (f *Fake) IteratorTypes(t types.ShardIteratorType) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.iterTypes[t]
}

// Sequences is the sequence numbers of a shard's records, trimmed ones included.
func (f *Fake) Sequences(arn, id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	sh := f.mustShard(arn, id)
	out := make([]string, len(sh.records))
	for i, r := range sh.records {
		out[i] = *r.Dynamodb.SequenceNumber
	}
	return out
}

func (f *Fake) mustStream(arn string) *stream {
	st, ok := f.streams[arn]
	if !ok {
		panic("streamstest: unknown stream " + arn)
	}
	return st
}

func (f *Fake) mustShard(arn, id string) *shard {
	for _, sh := range f.mustStream(arn).shards {
		if sh.id == id {
			return sh
		}
	}
	panic("streamstest: unknown shard " + id)
}

func (f *Fake) shard(arn, id string) (*shard, error) {
	st, ok := f.streams[arn]
	if !ok {
		return nil, notFound("stream " + arn)
	}
	for _, sh := range st.shards {
		if sh.id == id && !sh.removed {
			return sh, nil
		}
	}
	return nil, notFound("shard " + id)
}

// enter counts a call and applies throttling; the caller holds mu.
func (f *Fake) enter(op string) error {
	f.calls[op]++
	if f.throttle > 0 {
		f.throttle--
		return &types.LimitExceededException{Message: aws.String("rate exceeded (streamstest)")}
	}
	return nil
}

func notFound(what string) error {
	return &types.ResourceNotFoundException{Message: aws.String(what + " not found (streamstest)")}
}

// ListStreams implements the Streams API call.
func (f *Fake) ListStreams(_ context.Context, in *dynamodbstreams.ListStreamsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.ListStreamsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("ListStreams"); err != nil {
		return nil, err
	}
	if f.limits != nil {
		if err := f.take("ListStreams", "ListStreams", f.limits.ListStreams); err != nil {
			return nil, err
		}
	}
	out := &dynamodbstreams.ListStreamsOutput{}
	for _, arn := range f.order {
		st := f.streams[arn]
		if in.TableName != nil && *in.TableName != st.table {
			continue
		}
		out.Streams = append(out.Streams, types.Stream{
			StreamArn: aws.String(st.arn), TableName: aws.String(st.table), StreamLabel: aws.String(st.label),
		})
	}
	return out, nil
}

// DescribeStream implements the Streams API call, paging by Limit.
func (f *Fake) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeStream"); err != nil {
		return nil, err
	}
	if f.limits != nil {
		if err := f.take("DescribeStream", "DescribeStream", f.limits.DescribeStream); err != nil {
			return nil, err
		}
	}
	st, ok := f.streams[aws.ToString(in.StreamArn)]
	if !ok {
		return nil, notFound("stream " + aws.ToString(in.StreamArn))
	}
	var listed []*shard
	for _, sh := range st.shards {
		if !sh.removed {
			listed = append(listed, sh)
		}
	}
	if start := aws.ToString(in.ExclusiveStartShardId); start != "" {
		i := slices.IndexFunc(listed, func(sh *shard) bool { return sh.id == start })
		listed = listed[i+1:]
	}
	limit := int(aws.ToInt32(in.Limit))
	if limit <= 0 {
		limit = 100
	}
	desc := &types.StreamDescription{
		StreamArn: aws.String(st.arn), TableName: aws.String(st.table), StreamLabel: aws.String(st.label),
		StreamStatus: types.StreamStatusEnabled, StreamViewType: types.StreamViewTypeNewAndOldImages,
	}
	for i, sh := range listed {
		if i == limit {
			desc.LastEvaluatedShardId = desc.Shards[len(desc.Shards)-1].ShardId
			break
		}
		rng := &types.SequenceNumberRange{StartingSequenceNumber: aws.String("100000000000000000000")}
		if len(sh.records) > 0 {
			rng.StartingSequenceNumber = sh.records[0].Dynamodb.SequenceNumber
		}
		if sh.closed && !sh.listedOpen && len(sh.records) > 0 {
			rng.EndingSequenceNumber = sh.records[len(sh.records)-1].Dynamodb.SequenceNumber
		}
		s := types.Shard{ShardId: aws.String(sh.id), SequenceNumberRange: rng}
		if sh.parent != "" {
			s.ParentShardId = aws.String(sh.parent)
		}
		desc.Shards = append(desc.Shards, s)
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: desc}, nil
}

// GetShardIterator implements the Streams API call.
func (f *Fake) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("GetShardIterator"); err != nil {
		return nil, err
	}
	f.iterTypes[in.ShardIteratorType]++
	arn, id := aws.ToString(in.StreamArn), aws.ToString(in.ShardId)
	sh, err := f.shard(arn, id)
	if err != nil {
		return nil, err
	}
	var pos int
	switch in.ShardIteratorType {
	case types.ShardIteratorTypeTrimHorizon:
		pos = sh.trimmed
	case types.ShardIteratorTypeLatest:
		pos = len(sh.records)
	case types.ShardIteratorTypeAfterSequenceNumber, types.ShardIteratorTypeAtSequenceNumber:
		seq, err := strconv.ParseUint(aws.ToString(in.SequenceNumber), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("streamstest: bad sequence number %q", aws.ToString(in.SequenceNumber))
		}
		pos = len(sh.records)
		for i, r := range sh.records {
			rs, _ := strconv.ParseUint(*r.Dynamodb.SequenceNumber, 10, 64)
			if rs > seq || (rs == seq && in.ShardIteratorType == types.ShardIteratorTypeAtSequenceNumber) {
				pos = i
				break
			}
		}
		if pos < sh.trimmed {
			return nil, &types.TrimmedDataAccessException{Message: aws.String("sequence number beyond the trim horizon (streamstest)")}
		}
	default:
		return nil, fmt.Errorf("streamstest: iterator type %s not supported", in.ShardIteratorType)
	}
	return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(f.newIterator(arn, sh, pos))}, nil
}

func (f *Fake) newIterator(arn string, sh *shard, pos int) string {
	f.nextIter++
	id := "it-" + strconv.Itoa(f.nextIter)
	f.iterators[id] = iterator{arn: arn, shard: sh.id, pos: pos, generation: sh.generation,
		takenEmpty: sh.staleEmpty && len(sh.records) == 0}
	return id
}

// GetRecords implements the Streams API call.
func (f *Fake) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("GetRecords"); err != nil {
		return nil, err
	}
	it, ok := f.iterators[aws.ToString(in.ShardIterator)]
	if !ok {
		return nil, fmt.Errorf("streamstest: unknown iterator %q", aws.ToString(in.ShardIterator))
	}
	f.reads[it.arn]++
	if f.limits != nil {
		if err := f.take("GetRecords", it.arn+"#"+it.shard, f.limits.ShardReads); err != nil {
			return nil, err
		}
	}
	sh, err := f.shard(it.arn, it.shard)
	if err != nil {
		return nil, err
	}
	switch {
	case it.generation != sh.generation:
		return nil, &types.ExpiredIteratorException{Message: aws.String("iterator expired (streamstest)")}
	case it.takenEmpty && len(sh.records) > 0:
		return nil, &types.TrimmedDataAccessException{Message: aws.String("iterator taken on an empty shard (streamstest)")}
	case it.pos < sh.trimmed:
		return nil, &types.TrimmedDataAccessException{Message: aws.String("records trimmed (streamstest)")}
	}
	out := &dynamodbstreams.GetRecordsOutput{}
	pos := it.pos
	if sh.emptyPages > 0 {
		sh.emptyPages--
	} else {
		limit := int(aws.ToInt32(in.Limit))
		if limit <= 0 {
			limit = 1000
		}
		end := min(pos+limit, len(sh.records))
		out.Records = slices.Clone(sh.records[pos:end])
		pos = end
	}
	if !(sh.closed && pos == len(sh.records)) {
		out.NextShardIterator = aws.String(f.newIterator(it.arn, sh, pos))
	}
	// Answered: the reader goes on with the next iterator, so this one is forgotten
	// (thousands of idle shards would otherwise pile up iterators).
	delete(f.iterators, aws.ToString(in.ShardIterator))
	return out, nil
}
