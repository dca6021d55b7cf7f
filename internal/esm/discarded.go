package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/mappings"
	"github.com/ssodir/ssodir/internal/streams"
)

// Discarded is what an event source mapping sends to its failure destination when it
// gives records up (out of retries, or older than the mapping's maximum record age): the
// records themselves are gone, only their place in the stream is told.
type Discarded struct {
	RequestContext struct {
		FunctionARN string `json:"functionArn"`
		Condition   string `json:"condition"`
	} `json:"requestContext"`
	Timestamp string `json:"timestamp"`
	Batch     struct {
		ShardID             string `json:"shardId"`
		StartSequenceNumber string `json:"startSequenceNumber"`
		EndSequenceNumber   string `json:"endSequenceNumber"`
		BatchSize           int    `json:"batchSize"`
		StreamARN           string `json:"streamArn"`
	} `json:"DDBStreamBatchInfo"`
}

// ParseDiscarded reads a failure destination's message body.
func ParseDiscarded(body string) (Discarded, error) {
	var d Discarded
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		return Discarded{}, fmt.Errorf("not an event source mapping's failure record: %w", err)
	}
	if d.Batch.StreamARN == "" {
		return Discarded{}, errors.New("not an event source mapping's failure record of a DynamoDB stream")
	}
	return d, nil
}

// Recovery consumes a consumer's failure destination (an SQS queue read by the consumer's
// function): records ESM gave up on are a gap in what the consumer applied, repaired as
// the long-running consumer repairs a gap in a stream — the projector marks the tenant for
// replay, keycloak-sync reconciles it at once. Each one is an alert: an error log and
// ssodir_stream_records_discarded_total.
type Recovery struct {
	// Consumer names the consumer in the log and the metric.
	Consumer string
	// Labels reads a tenant's system and tenant ids from its write table's name.
	Labels func(table string) (system, tenant string, ok bool)
	// OnGap is the consumer's gap repair (streams.Config.OnGap).
	OnGap func(ctx context.Context, gap streams.Gap) error
	Log   *zap.Logger

	discarded *prometheus.CounterVec
}

// NewRecovery registers the metric with reg (nil: the default registerer).
func NewRecovery(r Recovery, reg prometheus.Registerer) (*Recovery, error) {
	if r.Log == nil {
		r.Log = zap.NewNop()
	}
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	r.discarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ssodir_stream_records_discarded_total",
		Help: "Batches of stream records an event source mapping gave up on (the tenant is then replayed or reconciled).",
	}, []string{"consumer", "system", "tenant"})
	if err := reg.Register(r.discarded); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		r.discarded = are.ExistingCollector.(*prometheus.CounterVec)
	}
	return &r, nil
}

// Handle repairs the tenant of each message; a message whose repair fails is reported
// back to SQS, to come again.
func (r *Recovery) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for _, msg := range ev.Records {
		if err := r.one(ctx, msg.Body); err != nil {
			r.Log.Error("could not repair after records the event source mapping gave up; the message comes again",
				zap.String("message_id", msg.MessageId), zap.Error(err))
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
		}
	}
	return resp, nil
}

func (r *Recovery) one(ctx context.Context, body string) error {
	d, err := ParseDiscarded(body)
	if err != nil {
		// Retrying would not make it readable: say so loudly and let it go.
		r.Log.Error("a message on the failure destination is not an event source mapping's failure record; dropped", zap.Error(err))
		r.discarded.WithLabelValues(r.Consumer, "", "").Inc()
		return nil
	}
	table := mappings.StreamTable(d.Batch.StreamARN)
	system, tenant, ok := r.Labels(table)
	if !ok {
		r.Log.Error("the event source mapping gave up records of a stream that is no tenant's", zap.String("stream", d.Batch.StreamARN))
		r.discarded.WithLabelValues(r.Consumer, "", "").Inc()
		return nil
	}
	r.discarded.WithLabelValues(r.Consumer, system, tenant).Inc()
	r.Log.Error("the event source mapping gave up stream records: repairing the tenant",
		zap.String("tenant", system+"/"+tenant), zap.String("shard", d.Batch.ShardID),
		zap.String("first_sequence_number", d.Batch.StartSequenceNumber), zap.String("last_sequence_number", d.Batch.EndSequenceNumber),
		zap.Int("records", d.Batch.BatchSize), zap.String("condition", d.RequestContext.Condition))
	gap := streams.Gap{
		Stream:  streams.Stream{System: system, Tenant: tenant, Table: table, StreamARN: d.Batch.StreamARN},
		ShardID: d.Batch.ShardID,
		Reason: fmt.Sprintf("event source mapping gave up records %s..%s (%d, %s) at %s", d.Batch.StartSequenceNumber,
			d.Batch.EndSequenceNumber, d.Batch.BatchSize, d.RequestContext.Condition, d.Timestamp),
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return r.OnGap(cctx, gap)
}

// Metric is ssodir_stream_records_discarded_total (consumer, system, tenant).
func (r *Recovery) Metric() *prometheus.CounterVec { return r.discarded }
