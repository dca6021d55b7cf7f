// Package esm is the port through which a Lambda event source mapping (ESM) feeds a
// DynamoDB stream to a consumer's handler: it turns an events.DynamoDBEvent into the
// stream records the long-running consumer delivers (internal/streams), hands them to
// the same watermill handler, and answers which record stopped the batch.
//
// The rules are those of the long-running consumer:
//   - Records of one aggregate are applied in order; a record that fails stops its
//     aggregate for the rest of the batch, and is reported in BatchItemFailures (ESM
//     restarts the shard at the lowest failed sequence number; records applied after it
//     come again and change nothing, every effect being "only if newer").
//   - Other aggregates go on in the same invocation, so one failing aggregate holds the
//     others back by at most ESM's retries of the batch.
//   - A record that has failed MaxAttempts invocations becomes a dead letter in the
//     consumer's dead-letter store (internal/deadletters), the one `dead-letters
//     list|redrive` reads, and the stream moves on; later records of its aggregate are
//     parked behind it there, keeping the order until it is re-driven. A failure that
//     says "later" (the store answered unavailable or throttled) is not an attempt: the
//     batch comes again without counting it.
//   - A record whose handler parked its tenant (a hung or failing realm) is returned at
//     once, never waited on: the invocation ends and frees its concurrent execution for
//     other tenants. ESM sends the batch again without waiting, so these invocations are
//     counted (apart from failed attempts); at maxParkedInvocations, below the
//     mapping's retries, the record becomes a dead letter, re-driven once the realm
//     answers, rather than going to ESM's failure destination.
//   - What a batch reads of the store before it applies anything is one BatchGetItem of
//     small items per 50 aggregates (their dead-letter markers and attempt counts),
//     whatever the number of dead letters.
//
// Attribute values are converted by the SDK (attributevalue.UnmarshalMapJSON over the
// event's DynamoDB JSON), not by hand.
package esm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/mappings"
	"github.com/ssodir/ssodir/internal/streams"
)

// Config configures a Batch.
type Config struct {
	// Labels reads a tenant's system and tenant ids from its write table's name.
	Labels func(table string) (system, tenant string, ok bool)
	// DeadLetters is the consumer's dead-letter store (deadletters.New).
	DeadLetters *deadletters.Store
	// Handle is the consumer's watermill handler, the one the long-running consumer runs.
	Handle message.NoPublishHandlerFunc
	// MaxAttempts is how many invocations a record may fail before it becomes a dead
	// letter (default 3); keep it below the mapping's MaximumRetryAttempts.
	MaxAttempts int
	// Tries are the tries of a record within one invocation (default 3), Backoff the
	// first pause between them (default 200ms, doubling).
	Tries   int
	Backoff time.Duration
	// Concurrency bounds the aggregates applied at once (default 16).
	Concurrency int
	// AggregateAttribute is the key attribute that names the aggregate (default "id").
	AggregateAttribute string
	// TimestampAttribute, when set, is the writer's time (epoch ms) in new images, for
	// the lag in the log.
	Log *zap.Logger
}

// Batch handles the invocations of one consumer function.
type Batch struct{ cfg Config }

// New is a Batch.
func New(cfg Config) *Batch {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.MaxAttempts >= mappings.MaximumRetryAttempts {
		cfg.MaxAttempts = mappings.MaximumRetryAttempts - 1
	}
	if cfg.Tries <= 0 {
		cfg.Tries = 3
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 200 * time.Millisecond
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	if cfg.AggregateAttribute == "" {
		cfg.AggregateAttribute = "id"
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Batch{cfg: cfg}
}

// entry is one record of the batch: converted, or not (poison, with why).
type entry struct {
	rec    streams.Record
	poison string
}

// Handle applies one batch and answers the records that stopped their aggregate.
func (b *Batch) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	// Aggregates in the order of their first record, each with its records in order.
	type group struct{ entries []entry }
	var order []string
	groups := map[string]*group{}
	aggs := map[string][]deadletters.Aggregate{} // by stream ARN (a batch is one shard: one stream)
	for _, r := range ev.Records {
		e := b.convert(r)
		key := e.rec.StreamARN + "\x00" + e.rec.Aggregate
		g, ok := groups[key]
		if !ok {
			g = &group{}
			groups[key] = g
			order = append(order, key)
			aggs[e.rec.StreamARN] = append(aggs[e.rec.StreamARN], aggregateOf(e.rec))
		}
		g.entries = append(g.entries, e)
	}
	// Which aggregates have dead letters, and which records carry a count of failed
	// attempts: keyed reads of small items, whatever the store holds.
	states := map[string]deadletters.BatchState{}
	for arn, list := range aggs {
		st, err := b.cfg.DeadLetters.Lookup(ctx, arn, list)
		if err != nil {
			// Nothing applied: the whole batch comes again.
			return events.DynamoDBEventResponse{}, err
		}
		states[arn] = st
	}

	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
		slots    = make(chan struct{}, b.cfg.Concurrency)
	)
	for _, key := range order {
		g := groups[key]
		first := g.entries[0].rec
		st, a := states[first.StreamARN], aggregateOf(first)
		behind, counted := st.Blocked[a], st.Attempts[a]
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			if seq, stopped := b.aggregate(ctx, g.entries, behind, counted); stopped {
				mu.Lock()
				failures = append(failures, seq)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var resp events.DynamoDBEventResponse
	for _, seq := range failures {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq})
	}
	return resp, nil
}

func aggregateOf(r streams.Record) deadletters.Aggregate {
	return deadletters.Aggregate{System: r.System, Tenant: r.Tenant, Table: r.Table, Aggregate: r.Aggregate}
}

// aggregate applies one aggregate's records in order; behind is the aggregate's first dead
// letter, if it has one, and counted the failed attempts kept for one of its records.
// stopped reports the record at which it stopped (its sequence number), to be delivered
// again.
func (b *Batch) aggregate(ctx context.Context, entries []entry, behind string, counted deadletters.Attempt) (seq string, stopped bool) {
	for _, e := range entries {
		r := e.rec
		if behind != "" {
			if err := b.deadLetter(ctx, r, 0, "blocked behind "+behind, behind); err != nil {
				return r.SequenceNumber, true
			}
			continue
		}
		if e.poison != "" {
			if err := b.deadLetter(ctx, r, 1, e.poison, ""); err != nil {
				return r.SequenceNumber, true
			}
			behind = r.SequenceNumber
			continue
		}
		later, err := b.apply(ctx, r)
		if errors.Is(err, errGivenUp) {
			// The handler gave the record up (streams.GiveUp: a tenant parked too long):
			// a dead letter now, as the long-running consumer makes it.
			if derr := b.deadLetter(ctx, r, 1, err.Error(), ""); derr != nil {
				return r.SequenceNumber, true
			}
			_ = b.cfg.DeadLetters.ForgetAttempts(ctx, r)
			behind = r.SequenceNumber
			continue
		}
		if err == nil {
			if counted.N+counted.Parked > 0 && counted.SequenceNumber == r.SequenceNumber {
				// It failed in an earlier invocation: its count must not make a later
				// failure of a redelivery dead-letter early. (A count left by a failed
				// delete expires.)
				_ = b.cfg.DeadLetters.ForgetAttempts(ctx, r)
			}
			continue
		}
		if later == laterParked {
			// The batch comes again at once (ESM does not wait), and each time counts
			// toward the mapping's MaximumRetryAttempts: before ESM would give the record up
			// to its failure destination, it becomes a dead letter of ours, re-driven in
			// order once its downstream answers (as the long-running consumer does past
			// ParkMax).
			n, cerr := b.cfg.DeadLetters.NoteParked(ctx, r)
			if cerr != nil || n < maxParkedInvocations || ctx.Err() != nil {
				b.cfg.Log.Warn("record waits: its handler parked its tenant; the batch is returned to come again", zap.String("aggregate", identity.LogKey(r.Aggregate)),
					zap.String("sequence_number", r.SequenceNumber), zap.Int("parked_invocations", n), zap.Error(err))
				return r.SequenceNumber, true
			}
			if derr := b.deadLetter(ctx, r, n, err.Error(), ""); derr != nil {
				return r.SequenceNumber, true
			}
			_ = b.cfg.DeadLetters.ForgetAttempts(ctx, r)
			behind = r.SequenceNumber
			continue
		}
		if later == laterUnavailable {
			b.cfg.Log.Warn("record waits: its downstream asked for later; not counted as an attempt", zap.String("aggregate", identity.LogKey(r.Aggregate)),
				zap.String("sequence_number", r.SequenceNumber), zap.Error(err))
			return r.SequenceNumber, true
		}
		attempts, cerr := b.cfg.DeadLetters.NoteFailedAttempt(ctx, r)
		if cerr != nil || attempts < b.cfg.MaxAttempts || ctx.Err() != nil {
			b.cfg.Log.Warn("record failed; its aggregate waits for the batch to be retried", zap.String("aggregate", identity.LogKey(r.Aggregate)),
				zap.String("sequence_number", r.SequenceNumber), zap.Int("attempt", attempts), zap.Error(err))
			return r.SequenceNumber, true
		}
		if derr := b.deadLetter(ctx, r, attempts, err.Error(), ""); derr != nil {
			return r.SequenceNumber, true
		}
		_ = b.cfg.DeadLetters.ForgetAttempts(ctx, r)
		behind = r.SequenceNumber
	}
	return "", false
}

// errGivenUp marks a record its handler gave up (streams.GiveUp).
var errGivenUp = errors.New("given up by its handler")

// margin is the time an invocation keeps for storing a dead letter and answering.
const margin = 3 * time.Second

// laterKind says why a record's failure is no fault of its own.
type laterKind int

const (
	laterNo          laterKind = iota
	laterUnavailable           // the store answered unavailable or throttled
	laterParked                // the handler parked the record's tenant (its realm fails)
)

// maxParkedInvocations is how many invocations a record of a parked tenant is returned in
// before it becomes a dead letter: below the mapping's retries, which ESM makes without
// waiting.
const maxParkedInvocations = mappings.MaximumRetryAttempts - 1

// apply runs the handler on r up to Tries times within the invocation's time. later says
// whether its last failure was the downstream asking for later (an unavailable or
// throttled store), or the handler parking its tenant: no fault of the record's. A park
// is never waited out here: an invocation that waited for a hung realm's park would hold
// one of the function's concurrent executions, which every tenant shares, for as long as
// the park lasts; the record is returned to come again instead.
func (b *Batch) apply(ctx context.Context, r streams.Record) (later laterKind, err error) {
	pause := b.cfg.Backoff
	for try := 1; ; try++ {
		var msg *message.Message
		msg, err = streams.NewRecordMessage(r)
		if err != nil {
			return laterNo, err
		}
		msg.SetContext(ctx)
		err = b.handle(msg)
		if err == nil {
			return laterNo, nil
		}
		if msg.Metadata.Get(streams.MetaGiveUp) != "" {
			return laterNo, fmt.Errorf("%w: %w", errGivenUp, err)
		}
		if msg.Metadata.Get(streams.MetaParkUntil) != "" {
			return laterParked, err
		}
		later = laterNo
		if apperr.KindOf(err) == apperr.KindUnavailable {
			later = laterUnavailable
		}
		if try >= b.cfg.Tries {
			return later, err
		}
		wait := pause
		pause *= 2
		if d, ok := ctx.Deadline(); ok && time.Until(d)-margin < wait {
			return later, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return later, err
		case <-t.C:
		}
	}
}

// handle runs the handler, a panic included as an error.
func (b *Batch) handle(msg *message.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panic: %v", p)
		}
	}()
	return b.cfg.Handle(msg)
}

func (b *Batch) deadLetter(ctx context.Context, r streams.Record, attempts int, reason, behind string) error {
	if err := b.cfg.DeadLetters.Add(ctx, r, attempts, reason, behind); err != nil {
		b.cfg.Log.Error("could not store a dead letter; the batch is retried", zap.String("aggregate", identity.LogKey(r.Aggregate)),
			zap.String("sequence_number", r.SequenceNumber), zap.Error(err))
		return err
	}
	if behind == "" {
		b.cfg.Log.Error("record dead-lettered; later records of its aggregate are parked until it is re-driven",
			zap.String("tenant", r.System+"/"+r.Tenant), zap.String("aggregate", identity.LogKey(r.Aggregate)),
			zap.String("sequence_number", r.SequenceNumber), zap.Int("attempts", attempts), zap.String("reason", reason))
	} else {
		b.cfg.Log.Warn("record parked behind a dead letter of its aggregate", zap.String("aggregate", identity.LogKey(r.Aggregate)),
			zap.String("sequence_number", r.SequenceNumber), zap.String("blocked_behind", behind))
	}
	return nil
}

// convert turns an ESM record into the consumer's record; a record that cannot be
// converted keeps what could be read (labels, aggregate) and says why.
func (b *Batch) convert(er events.DynamoDBEventRecord) entry {
	table := mappings.StreamTable(er.EventSourceArn)
	r := streams.Record{Table: table, StreamARN: er.EventSourceArn, EventID: er.EventID, EventName: er.EventName,
		SequenceNumber: er.Change.SequenceNumber, ApproximateCreationDateTime: er.Change.ApproximateCreationDateTime.UTC()}
	if id := er.UserIdentity; id != nil && r.EventName == streams.EventRemove && id.Type == "Service" && id.PrincipalID == "dynamodb.amazonaws.com" {
		r.TTLDeletion = true
	}
	var errs []error
	system, tenant, ok := b.cfg.Labels(table)
	if !ok {
		errs = append(errs, fmt.Errorf("stream %s is not of a tenant's command table", er.EventSourceArn))
	}
	r.System, r.Tenant = system, tenant
	var err error
	if r.Keys, err = sdkMap(er.Change.Keys); err != nil {
		errs = append(errs, fmt.Errorf("keys: %w", err))
	}
	if s, ok := r.Keys[b.cfg.AggregateAttribute].(*types.AttributeValueMemberS); ok {
		r.Aggregate = s.Value
	}
	if r.NewImage, err = sdkMap(er.Change.NewImage); err != nil {
		errs = append(errs, fmt.Errorf("new image: %w", err))
	}
	if r.OldImage, err = sdkMap(er.Change.OldImage); err != nil {
		errs = append(errs, fmt.Errorf("old image: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return entry{rec: r, poison: fmt.Sprintf("record %s cannot be read: %v", r.SequenceNumber, err)}
	}
	return entry{rec: r}
}

// sdkMap converts an event's attribute values through their DynamoDB JSON, which both
// aws-lambda-go and the SDK speak.
func sdkMap(m map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	if len(m) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return attributevalue.UnmarshalMapJSON(raw)
}
