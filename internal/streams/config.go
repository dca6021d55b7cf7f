package streams

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// StreamsAPI is the part of the DynamoDB Streams API the Subscriber uses;
// *dynamodbstreams.Client implements it, and so does streamstest.Fake.
type StreamsAPI interface {
	ListStreams(ctx context.Context, in *dynamodbstreams.ListStreamsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.ListStreamsOutput, error)
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// DynamoDB is the part of the DynamoDB API used for leases, checkpoints and dead letters;
// *dynamodb.Client implements it.
type DynamoDB interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Gap describes stream data that was lost before it was applied: the shard's checkpoint
// had fallen behind the stream's 24-hour retention.
type Gap struct {
	Stream  Stream
	ShardID string
	// After is the last sequence number applied before the gap; empty when nothing of the
	// shard had been applied yet but the whole shard is gone.
	After  string
	Reason string
}

// Config configures a Subscriber.
type Config struct {
	// Consumer names the consuming application ("projector", "keycloak-sync"). Each
	// consumer has its own leases, checkpoints and dead letters, so two consumers each see
	// every record.
	Consumer string
	// Owner identifies this process among the consumer's processes; it must be unique per
	// process (and per run). Default: host name, process id and a random suffix.
	Owner string
	// Address, when set, is what this process publishes in its heartbeat row for others
	// to reach it by (the projector's progress feed URL; OwnerAddresses reads them). It is
	// called at every heartbeat; empty publishes nothing.
	Address func() string

	// LeaseTable is a full table name (the caller adds its prefix); EnsureTables creates
	// it, with the dead-letter table.
	LeaseTable string
	// DeadLetters is the consumer's dead-letter store (internal/deadletters).
	DeadLetters DeadLetterStore

	Source  Source
	Streams StreamsAPI
	DB      DynamoDB

	// OnGap is called when a shard's checkpoint has fallen behind the stream's retention,
	// before the shard moves on to the oldest data still available. It must record that
	// the stream's views need a replay; until it returns nil it is retried and the shard
	// does not move on, so a gap is never skipped silently.
	OnGap func(ctx context.Context, gap Gap) error

	Logger     *zap.Logger
	Registerer prometheus.Registerer

	// LeaseDuration is how long a process may stay silent before its leases are taken
	// over. Heartbeats go out every LeaseDuration/5. Default 10s, so a dead process's
	// shards move within about 12s.
	LeaseDuration time.Duration
	// PollInterval is the pause after the first empty page; the pause doubles with every
	// further empty page in a row up to IdlePollMax, and a page with records ends it. It is
	// never shorter than the shard's GetRecords budget allows (ShardReadRate). Default
	// 500ms.
	PollInterval time.Duration
	// IdlePollMax is the longest pause between reads of an idle shard: the delay before a
	// write to an idle stream is seen, and what an idle shard costs (one GetRecords per
	// IdlePollMax per consumer). Default 1s.
	IdlePollMax time.Duration
	// Consumers is how many consumer applications read every stream (ssodir: the projector
	// and keycloak-sync). The Streams limits are shared by all of them, so each takes
	// 1/Consumers of every budget. Default 2.
	Consumers int
	// ShardReadRate is the GetRecords calls per second on one shard that all consumers
	// together may make; AWS does not publish the limit, Kinesis allows 5. Default 5.
	ShardReadRate float64
	// DescribeStreamRate and ListStreamsRate are the account's limits on those calls
	// (AWS: 10/s and 5/s). Each process takes rate / Consumers / live processes of its
	// consumer. Defaults 10 and 5.
	DescribeStreamRate float64
	ListStreamsRate    float64
	// LeaseScanInterval is how often a process reads its consumer's whole lease partition
	// to find free shards and balance. In between, each lease round reads only the
	// heartbeat rows; a peer joining, leaving or dying, a handover asked of us, or new
	// shards trigger a full read at once. Default 30s.
	LeaseScanInterval time.Duration
	// SourceInterval is how often the Source is polled. Default 5s.
	SourceInterval time.Duration
	// ShardSyncInterval is how often the shards of the streams this process reads (or
	// that nobody reads) are listed. DescribeStream is limited to 10 calls per second per
	// account on AWS, and a shard that ends lists its stream at once (its children must
	// start), so this only catches shards that appear otherwise. Default 60s.
	ShardSyncInterval time.Duration
	// CheckpointInterval is how often a shard's progress is written while records flow.
	// A crash redelivers at most this much (handlers are idempotent). Default 1s.
	CheckpointInterval time.Duration
	// MaxInFlight bounds the messages delivered and not yet acked or nacked, over all
	// shards. Default 32.
	MaxInFlight int
	// MaxInFlightPerShard bounds the messages of one shard in flight, so one stream —
	// one tenant, whose handler may be slow or failing — never takes every slot of
	// MaxInFlight from the others. Default MaxInFlight/4 (at least 1).
	MaxInFlightPerShard int
	// MaxAttempts is how often a record is delivered before it becomes a dead letter.
	// Default 5.
	MaxAttempts int
	// RetryBackoff is the pause before the first redelivery of a nacked record; it doubles
	// up to MaxRetryBackoff. Defaults 200ms and 10s.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// ShutdownTimeout bounds how long Close waits for in-flight messages. Default 15s.
	ShutdownTimeout time.Duration
	// AggregateAttribute is the key attribute whose value orders records: records with
	// the same value are delivered one after the other. Default "id".
	AggregateAttribute string
	// TimestampAttribute is a number attribute of new images holding the writer's time in
	// epoch milliseconds; it feeds the lag metric. Empty: no lag metric.
	TimestampAttribute string
	// GetRecordsLimit is the page size of GetRecords. Default 1000 (the maximum).
	GetRecordsLimit int32
	// Payloads makes every message carry its Record as JSON in its payload, for consumers
	// whose messages leave the process (a watermill Publisher, a forwarder). Without it
	// the payload is empty and handlers read the record with DecodeRecord, from the
	// message's context: encoding each record was a sixth of the projector's CPU in
	// make bench's catch-up, for bytes that nothing in ssodir reads.
	Payloads bool
}

func (c *Config) setDefaults() {
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	setDefault(&c.LeaseDuration, 10*time.Second)
	setDefault(&c.PollInterval, 500*time.Millisecond)
	setDefault(&c.IdlePollMax, max(time.Second, c.PollInterval))
	setDefault(&c.Consumers, defaultConsumers)
	setDefault(&c.ShardReadRate, 5)
	setDefault(&c.DescribeStreamRate, 10)
	setDefault(&c.ListStreamsRate, 5)
	setDefault(&c.SourceInterval, 5*time.Second)
	setDefault(&c.LeaseScanInterval, 30*time.Second)
	setDefault(&c.ShardSyncInterval, time.Minute)
	setDefault(&c.CheckpointInterval, time.Second)
	setDefault(&c.MaxInFlight, 32)
	setDefault(&c.MaxInFlightPerShard, max(1, c.MaxInFlight/4))
	setDefault(&c.MaxAttempts, 5)
	setDefault(&c.RetryBackoff, 200*time.Millisecond)
	setDefault(&c.MaxRetryBackoff, 10*time.Second)
	setDefault(&c.ShutdownTimeout, 15*time.Second)
	setDefault(&c.AggregateAttribute, "id")
	setDefault(&c.GetRecordsLimit, 1000)
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.Consumer == "" {
		errs = append(errs, errors.New("streams: Consumer is required"))
	}
	if c.LeaseTable == "" {
		errs = append(errs, errors.New("streams: LeaseTable is required"))
	}
	if c.DeadLetters == nil {
		errs = append(errs, errors.New("streams: DeadLetters is required"))
	}
	if c.Source == nil {
		errs = append(errs, errors.New("streams: Source is required"))
	}
	if c.Streams == nil {
		errs = append(errs, errors.New("streams: Streams is required"))
	}
	if c.DB == nil {
		errs = append(errs, errors.New("streams: DB is required"))
	}
	if c.OnGap == nil {
		errs = append(errs, errors.New("streams: OnGap is required (a gap must be recorded, never skipped)"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"LeaseDuration", c.LeaseDuration}, {"PollInterval", c.PollInterval}, {"IdlePollMax", c.IdlePollMax},
		{"SourceInterval", c.SourceInterval}, {"ShardSyncInterval", c.ShardSyncInterval}, {"LeaseScanInterval", c.LeaseScanInterval},
		{"CheckpointInterval", c.CheckpointInterval}, {"RetryBackoff", c.RetryBackoff},
		{"MaxRetryBackoff", c.MaxRetryBackoff}, {"ShutdownTimeout", c.ShutdownTimeout},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("streams: %s must not be negative", d.name))
		}
	}
	if c.LeaseDuration > 0 && c.LeaseDuration < 500*time.Millisecond {
		errs = append(errs, errors.New("streams: LeaseDuration must be at least 500ms"))
	}
	if c.IdlePollMax > 0 && c.IdlePollMax < c.PollInterval {
		errs = append(errs, errors.New("streams: IdlePollMax must not be shorter than PollInterval"))
	}
	if c.Consumers < 0 {
		errs = append(errs, errors.New("streams: Consumers must not be negative"))
	}
	if c.ShardReadRate < 0 || c.DescribeStreamRate < 0 || c.ListStreamsRate < 0 {
		errs = append(errs, errors.New("streams: ShardReadRate, DescribeStreamRate and ListStreamsRate must not be negative"))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, errors.New("streams: MaxInFlight must not be negative"))
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, errors.New("streams: MaxAttempts must not be negative"))
	}
	if c.GetRecordsLimit < 0 || c.GetRecordsLimit > 1000 {
		errs = append(errs, errors.New("streams: GetRecordsLimit must be between 1 and 1000"))
	}
	return errors.Join(errs...)
}

// leaseTick is the heartbeat and lease-balancing period: five beats per lease duration,
// so a few lost writes do not make a live process look dead.
func (c Config) leaseTick() time.Duration { return c.LeaseDuration / 5 }
