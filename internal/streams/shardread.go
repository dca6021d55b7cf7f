package streams

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"go.uber.org/zap"
)

// read is the reader goroutine: it turns GetRecords pages into entries for the loop.
//
// Position: last is the sequence number of the last record handed to the loop (at first
// the checkpoint). Records handed over are applied or dead-lettered before the checkpoint
// passes them, so after an expired iterator reading resumes right after last: nothing is
// lost and nothing is delivered twice.
func (w *shardWorker) read(ctx context.Context) {
	api, limit := w.s.cfg.Streams, w.s.cfg.GetRecordsLimit
	last := w.start
	fromHorizon := last == ""
	var it string
	failures := 0
	interval := w.s.cfg.shardReadInterval()
	var nextRead time.Time
	idle := 0 // empty pages in a row
	retry := func(err error) bool {
		failures++
		kind := readErrorKind(err)
		w.s.m.readRetries.WithLabelValues(w.s.cfg.Consumer, kind).Inc()
		if kind != "throttled" || failures > 3 {
			w.log.Warn("stream read failed; retrying", zap.String("kind", kind), zap.Int("attempt", failures), zap.Error(err))
		}
		return sleep(ctx, backoff(w.s.cfg.RetryBackoff, w.s.cfg.MaxRetryBackoff, failures))
	}
	for ctx.Err() == nil {
		if !w.waitUnparked(ctx) {
			return
		}
		if it == "" {
			in := &dynamodbstreams.GetShardIteratorInput{
				StreamArn: aws.String(w.stream.StreamARN), ShardId: aws.String(w.shardID),
				ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon,
			}
			if !fromHorizon {
				in.ShardIteratorType = stypes.ShardIteratorTypeAfterSequenceNumber
				in.SequenceNumber = aws.String(last)
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			out, err := api.GetShardIterator(cctx, in)
			cancel()
			switch {
			case err == nil:
				it = aws.ToString(out.ShardIterator)
				if it == "" {
					w.send(ctx, page{end: true})
					return
				}
			case ctx.Err() != nil:
				return
			case isTrimmed(err) && !fromHorizon:
				if !w.gap(ctx, last, "the checkpoint is older than the stream's retention") {
					return
				}
				fromHorizon = true
				continue
			case isResourceNotFound(err):
				w.shardGone(ctx, last)
				return
			default:
				if !retry(err) {
					return
				}
				continue
			}
		}

		// The shard's GetRecords budget holds even for a busy shard: its pages then carry
		// up to `limit` records each.
		if !sleep(ctx, time.Until(nextRead)) {
			return
		}
		nextRead = time.Now().Add(interval)
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		out, err := api.GetRecords(cctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String(it), Limit: aws.Int32(limit)})
		cancel()
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return
			case isExpiredIterator(err):
				w.s.m.readRetries.WithLabelValues(w.s.cfg.Consumer, "expired").Inc()
				w.log.Info("shard iterator expired; resuming after the last record read", zap.String("sequence_number", last))
				it = ""
			case isTrimmed(err) && last == "":
				// DynamoDB Local trap 2: an iterator taken while the shard was empty fails
				// after the first write. Nothing of the shard was read, so starting again
				// at the trim horizon loses nothing.
				w.s.m.readRetries.WithLabelValues(w.s.cfg.Consumer, "trimmed").Inc()
				it, fromHorizon = "", true
				if !sleep(ctx, w.s.cfg.PollInterval) {
					return
				}
			case isTrimmed(err):
				if !w.gap(ctx, last, "records after the checkpoint were trimmed before they were read") {
					return
				}
				it, fromHorizon = "", true
			case isResourceNotFound(err):
				w.shardGone(ctx, last)
				return
			default:
				if !retry(err) {
					return
				}
			}
			continue
		}
		failures = 0

		entries := w.entries(out.Records, last)
		if len(entries) > 0 {
			if !w.send(ctx, page{entries: entries}) {
				return
			}
			lastRec := entries[len(entries)-1].rec
			last, fromHorizon = lastRec.SequenceNumber, false
			if !lastRec.ApproximateCreationDateTime.IsZero() {
				w.s.m.iteratorAge.WithLabelValues(w.s.cfg.Consumer).
					Observe(time.Since(lastRec.ApproximateCreationDateTime).Seconds())
			}
		}
		// Only a missing next iterator ends a shard; an empty page does not, not even
		// several in a row.
		if out.NextShardIterator == nil || *out.NextShardIterator == "" {
			w.send(ctx, page{end: true})
			return
		}
		it = *out.NextShardIterator
		if len(out.Records) > 0 {
			idle = 0
			w.s.m.getRecords.WithLabelValues(w.s.cfg.Consumer, "records").Inc()
			continue
		}
		// An idle shard backs off; the first page with records ends the back-off, and
		// the pages after it are read as fast as the budget allows.
		idle++
		w.s.m.getRecords.WithLabelValues(w.s.cfg.Consumer, "empty").Inc()
		if !sleep(ctx, w.s.cfg.idlePause(idle)) {
			return
		}
	}
}

// entries converts a page's records, dropping any at or before last (a resumed iterator
// never repeats records, but a position is cheap to defend).
func (w *shardWorker) entries(recs []stypes.Record, last string) []*entry {
	out := make([]*entry, 0, len(recs))
	for _, rec := range recs {
		if rec.Dynamodb == nil || rec.Dynamodb.SequenceNumber == nil {
			w.log.Error("stream record without a sequence number skipped", zap.String("event_id", aws.ToString(rec.EventID)))
			continue
		}
		seq := *rec.Dynamodb.SequenceNumber
		if last != "" && compareSeq(seq, last) <= 0 {
			continue
		}
		last = seq
		r, err := fromStreamRecord(w.stream, w.shardID, rec, w.s.cfg.AggregateAttribute)
		e := &entry{rec: r, uuid: MessageUUID(w.stream.StreamARN, seq)}
		if err == nil && w.s.cfg.Payloads {
			e.payload, err = json.Marshal(r)
		}
		if err != nil {
			e.poison = "record cannot be encoded: " + err.Error()
		}
		out = append(out, e)
	}
	return out
}

func (w *shardWorker) send(ctx context.Context, p page) bool {
	select {
	case w.pages <- p:
		return true
	case <-ctx.Done():
		return false
	}
}

// gap reports records lost before they were applied: metric, error log, a mark on the
// lease row and OnGap, retried until it succeeds. Only then may the shard move on.
func (w *shardWorker) gap(ctx context.Context, after, reason string) bool {
	w.s.m.gaps.WithLabelValues(w.s.cfg.Consumer, w.stream.System, w.stream.Tenant).Inc()
	w.log.Error("stream records lost before they were applied; the tenant needs a replay",
		zap.String("after_sequence_number", after), zap.String("reason", reason))
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	err := w.s.leases.markGap(cctx, w.stream.StreamARN, w.shardID, w.s.cfg.Owner, w.token, after)
	cancel()
	switch {
	case errors.Is(err, errLeaseLost):
		w.send(ctx, page{lost: true})
		return false
	case err != nil:
		w.log.Warn("noting the gap on the lease row failed", zap.Error(err))
	}
	g := Gap{Stream: w.stream, ShardID: w.shardID, After: after, Reason: reason}
	for attempt := 1; ; attempt++ {
		err := w.s.cfg.OnGap(ctx, g)
		if err == nil {
			return true
		}
		w.log.Error("recording the gap failed; the shard waits until it is recorded", zap.Int("attempt", attempt), zap.Error(err))
		if !sleep(ctx, backoff(w.s.cfg.RetryBackoff, w.s.cfg.MaxRetryBackoff, attempt)) {
			return false
		}
	}
}

// shardGone handles a shard the service no longer knows. If the whole stream is gone
// (table deleted, stream disabled) the shard is just let go. Otherwise the shard was
// trimmed before it was read to its end: a gap, after which it counts as finished so its
// children can start.
func (w *shardWorker) shardGone(ctx context.Context, last string) {
	for attempt := 1; ; attempt++ {
		if !w.s.limits.describe.wait(ctx) {
			return
		}
		w.s.m.apiCalls.WithLabelValues(w.s.cfg.Consumer, "DescribeStream").Inc()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := w.s.cfg.Streams.DescribeStream(cctx, &dynamodbstreams.DescribeStreamInput{
			StreamArn: aws.String(w.stream.StreamARN), Limit: aws.Int32(1),
		})
		cancel()
		switch {
		case err == nil:
			if w.gap(ctx, last, "the shard was trimmed before it was read to its end") {
				w.send(ctx, page{end: true})
			}
			return
		case isResourceNotFound(err):
			w.log.Warn("stream no longer exists; letting the shard go")
			w.send(ctx, page{gone: true})
			return
		}
		if !sleep(ctx, backoff(w.s.cfg.RetryBackoff, w.s.cfg.MaxRetryBackoff, attempt)) {
			return
		}
	}
}

// defaultConsumers is Config.Consumers's default: the projector and keycloak-sync.
const defaultConsumers = 2

// localReadInterval is the least time between two GetRecords calls of a busy shard against
// a Streams endpoint on this machine: DynamoDB Local has no per-shard limit, so a shard
// whose pages bring records is read again at once, and only an empty page pauses (for
// PollInterval).
const localReadInterval = time.Millisecond

// ShardReadRateFor is Config.ShardReadRate for a process against AWS (local false: 0, AWS's
// default budget) or against a Streams endpoint on this machine (local true: a busy shard
// is read again without pause, see localReadInterval). Without it a busy shard of DynamoDB
// Local would be read every 400 ms (5 calls per second shared by two consumers) whatever
// SSO_STREAM_POLL says, and the lag of `make run` and the tests would be that.
func ShardReadRateFor(local bool) float64 {
	if !local {
		return 0
	}
	return float64(defaultConsumers) / localReadInterval.Seconds()
}
