package streams_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/streams"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const stampAttr = "recorded_at_ms"

// harness is one test's lease and dead-letter tables on DynamoDB Local.
type harness struct {
	t          *testing.T
	db         *dynamodb.Client
	consumer   string
	leaseTable string
	dlqTable   string
	dlq        *deadletters.Store

	mu   sync.Mutex
	gaps []streams.Gap
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	db := dynamotest.Current(t).DynamoDB()
	h := &harness{
		t: t, db: db, consumer: "projector",
		leaseTable: dynamotest.UniqueName("leases"),
		dlqTable:   dynamotest.UniqueName("deadletters"),
	}
	if err := streams.EnsureTables(context.Background(), db, h.leaseTable, h.dlqTable); err != nil {
		t.Fatal(err)
	}
	h.dlq = deadletters.New(db, h.dlqTable, h.consumer)
	// A second call finds both tables and must not fail.
	if err := streams.EnsureTables(context.Background(), db, h.leaseTable, h.dlqTable); err != nil {
		t.Fatalf("EnsureTables is not idempotent: %v", err)
	}
	t.Cleanup(func() {
		for _, name := range []string{h.leaseTable, h.dlqTable} {
			_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	return h
}

var ownerSeq atomic.Int64

// subscriber is a Subscriber under test with its own metrics registry.
type subscriber struct {
	*streams.Subscriber
	owner string
	reg   *prometheus.Registry
}

// newSubscriber starts nothing yet; cfg gets short test timings unless mod changes them.
func (h *harness) newSubscriber(src streams.Source, api streams.StreamsAPI, db streams.DynamoDB, mod ...func(*streams.Config)) *subscriber {
	h.t.Helper()
	owner := fmt.Sprintf("owner-%d", ownerSeq.Add(1))
	reg := prometheus.NewRegistry()
	if db == nil {
		db = h.db
	}
	cfg := streams.Config{
		Consumer:           h.consumer,
		Owner:              owner,
		LeaseTable:         h.leaseTable,
		DeadLetters:        h.dlq,
		Source:             src,
		Streams:            api,
		DB:                 db,
		OnGap:              h.onGap,
		Logger:             zaptest.NewLogger(h.t, zaptest.Level(zap.InfoLevel)).With(zap.String("test_owner", owner)),
		Registerer:         reg,
		LeaseDuration:      time.Second,
		PollInterval:       10 * time.Millisecond,
		IdlePollMax:        40 * time.Millisecond,
		ShardReadRate:      400,
		DescribeStreamRate: 400,
		ListStreamsRate:    400, // fast budgets; the scale test keeps AWS's
		SourceInterval:     100 * time.Millisecond,
		ShardSyncInterval:  200 * time.Millisecond,
		CheckpointInterval: 50 * time.Millisecond,
		MaxAttempts:        3,
		RetryBackoff:       5 * time.Millisecond,
		MaxRetryBackoff:    50 * time.Millisecond,
		ShutdownTimeout:    5 * time.Second,
		TimestampAttribute: stampAttr,
	}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := streams.NewSubscriber(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = s.Close() })
	return &subscriber{Subscriber: s, owner: owner, reg: reg}
}

func (h *harness) onGap(_ context.Context, g streams.Gap) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gaps = append(h.gaps, g)
	return nil
}

func (h *harness) recordedGaps() []streams.Gap {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.gaps)
}

// leaseItem reads a shard's lease row as stored.
func (h *harness) leaseItem(arn, shardID string) map[string]dtypes.AttributeValue {
	h.t.Helper()
	out, err := h.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(h.leaseTable),
		ConsistentRead: aws.Bool(true),
		Key: map[string]dtypes.AttributeValue{
			"consumer":  &dtypes.AttributeValueMemberS{Value: h.consumer},
			"lease_key": &dtypes.AttributeValueMemberS{Value: "shard#" + arn + "#" + shardID},
		},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out.Item
}

func attrS(item map[string]dtypes.AttributeValue, k string) string {
	if v, ok := item[k].(*dtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// owners maps each shard of arn to the owner of its lease ("" when free).
func (h *harness) owners(arn string, shards ...string) map[string]string {
	out := map[string]string{}
	for _, id := range shards {
		out[id] = attrS(h.leaseItem(arn, id), "lease_owner")
	}
	return out
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// delivery is one record a handler applied.
type delivery struct {
	owner string
	rec   streams.Record
	msg   *message.Message
}

// recorder collects applied records in the order their handlers ran.
type recorder struct {
	mu  sync.Mutex
	got []delivery
}

func (r *recorder) add(d delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, d)
}

func (r *recorder) all() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

func (r *recorder) waitFor(t *testing.T, n int, timeout time.Duration) []delivery {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d records are applied (have %d)", n, r.len()), func() bool { return r.len() >= n })
	return r.all()
}

// consume subscribes s and runs handle for every message in its own goroutine, as
// watermill's router does, behind the FailureReason middleware: a nil error acks and
// records the delivery, an error nacks.
func consume(t *testing.T, s *subscriber, rec *recorder, handle func(streams.Record) error) {
	t.Helper()
	ch, err := s.Subscribe(context.Background(), "records")
	if err != nil {
		t.Fatal(err)
	}
	h := streams.FailureReason(func(msg *message.Message) ([]*message.Message, error) {
		r, err := streams.DecodeRecord(msg)
		if err != nil {
			return nil, err
		}
		if handle != nil {
			if err := handle(r); err != nil {
				return nil, err
			}
		}
		rec.add(delivery{owner: s.owner, rec: r, msg: msg})
		return nil, nil
	})
	go func() {
		for msg := range ch {
			go func() {
				if _, err := h(msg); err != nil {
					msg.Nack()
					return
				}
				msg.Ack()
			}()
		}
	}()
}

// runRouter consumes s through a watermill router with handler; the returned func closes
// the router (which closes s) and waits for it.
func runRouter(t *testing.T, s *subscriber, handler message.NoPublishHandlerFunc) (stop func()) {
	t.Helper()
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	router.AddMiddleware(streams.FailureReason)
	router.AddConsumerHandler("projector", "user_commands", s, handler)
	done := make(chan error, 1)
	go func() { done <- router.Run(context.Background()) }()
	select {
	case <-router.Running():
	case err := <-done:
		t.Fatalf("router stopped at start: %v", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			if err := router.Close(); err != nil {
				t.Errorf("close router: %v", err)
			}
			if err := <-done; err != nil {
				t.Errorf("router: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// metric sums the samples of a metric whose labels include want.
func (s *subscriber) metric(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	families, err := s.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

// item builds a stream record of version v of aggregate id.
func item(id string, v int) stypes.Record {
	event := stypes.OperationTypeModify
	if v == 1 {
		event = stypes.OperationTypeInsert
	}
	return stypes.Record{
		EventName: event,
		Dynamodb: &stypes.StreamRecord{
			Keys: map[string]stypes.AttributeValue{"id": &stypes.AttributeValueMemberS{Value: id}},
			NewImage: map[string]stypes.AttributeValue{
				"id":      &stypes.AttributeValueMemberS{Value: id},
				"v":       &stypes.AttributeValueMemberN{Value: strconv.Itoa(v)},
				stampAttr: &stypes.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)},
			},
		},
	}
}

// version reads the "v" attribute of a record's new image.
func version(r streams.Record) int {
	n, ok := r.NewImage["v"].(*dtypes.AttributeValueMemberN)
	if !ok {
		return -1
	}
	v, _ := strconv.Atoi(n.Value)
	return v
}

// assertOnce fails if any sequence number was applied twice, and returns them as a set.
func assertOnce(t *testing.T, ds []delivery) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.rec.SequenceNumber] {
			t.Errorf("record %s (%s v%d) applied twice", d.rec.SequenceNumber, d.rec.Aggregate, version(d.rec))
		}
		seen[d.rec.SequenceNumber] = true
	}
	return seen
}

// assertOrderPerAggregate fails if an aggregate's versions were applied out of order.
func assertOrderPerAggregate(t *testing.T, ds []delivery) {
	t.Helper()
	last := map[string]int{}
	for _, d := range ds {
		v := version(d.rec)
		if v <= last[d.rec.Aggregate] {
			t.Errorf("%s: v%d applied after v%d", d.rec.Aggregate, v, last[d.rec.Aggregate])
		}
		last[d.rec.Aggregate] = v
	}
}

var errKilled = errors.New("process killed (test)")

// killSwitch cuts a subscriber off from DynamoDB and Streams, as a crash or a network
// partition does; the process goes on running but can neither read nor write.
type killSwitch struct{ dead atomic.Bool }

type killableDB struct {
	streams.DynamoDB
	k *killSwitch
}

func (d killableDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if d.k.dead.Load() {
		return nil, errKilled
	}
	return d.DynamoDB.Query(ctx, in, o...)
}

func (d killableDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if d.k.dead.Load() {
		return nil, errKilled
	}
	return d.DynamoDB.PutItem(ctx, in, o...)
}

func (d killableDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.k.dead.Load() {
		return nil, errKilled
	}
	return d.DynamoDB.UpdateItem(ctx, in, o...)
}

func (d killableDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if d.k.dead.Load() {
		return nil, errKilled
	}
	return d.DynamoDB.DeleteItem(ctx, in, o...)
}

type killableStreams struct {
	streams.StreamsAPI
	k *killSwitch
}

func (s killableStreams) ListStreams(ctx context.Context, in *dynamodbstreams.ListStreamsInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.ListStreamsOutput, error) {
	if s.k.dead.Load() {
		return nil, errKilled
	}
	return s.StreamsAPI.ListStreams(ctx, in, o...)
}

func (s killableStreams) DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	if s.k.dead.Load() {
		return nil, errKilled
	}
	return s.StreamsAPI.DescribeStream(ctx, in, o...)
}

func (s killableStreams) GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	if s.k.dead.Load() {
		return nil, errKilled
	}
	return s.StreamsAPI.GetShardIterator(ctx, in, o...)
}

func (s killableStreams) GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, o ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	if s.k.dead.Load() {
		return nil, errKilled
	}
	return s.StreamsAPI.GetRecords(ctx, in, o...)
}
