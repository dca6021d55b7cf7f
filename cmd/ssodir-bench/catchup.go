package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// writeConcurrency is how many BatchWriteItem calls the raw baselines of the projector keep
// in flight: as many writes as the projector may have in flight (32 records at once live;
// 4 scan segments of ApplyBatch with 8 writers each in a replay).
const writeConcurrency = 32

// recordsPerCreate is the stream records a create writes: config, history record, email guard.
const recordsPerCreate = 3

func benchCatchup(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	e, api, _, err := writeEnv(ctx, b, sc)
	if err != nil {
		return nil, err
	}
	defer e.close()
	raw := projections.Tables{Users: e.prefix + "_raw_users", Activities: e.prefix + "_raw_activities"}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(raw.Users), dynamo.ActivitiesTable(raw.Activities)} {
		if err := dynamo.EnsureTable(ctx, e.db, spec); err != nil {
			return nil, err
		}
	}
	var seq atomic.Int64
	create := func(ctx context.Context, _ int) error {
		u := benchUser("cu", int(seq.Add(1)), time.Now().UTC())
		_, _, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+tenantPath()+"/users", createBody(u))
		return err
	}
	proj, err := e.start(ctx, "projector")
	if err != nil {
		return nil, err
	}
	// Warm-up: creates with the projector following, until it has applied them all; then
	// the raw reader drains the same records.
	if _, err := closed(ctx, 8, sc.Warmup, create); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	written := 1 + recordsPerCreate*int(seq.Load()) // the prime record, then the creates
	if err := waitApplied(ctx, b, proj, written, time.Minute); err != nil {
		return nil, err
	}
	d, err := newRawDrain(ctx, e)
	if err != nil {
		return nil, err
	}
	if _, err := d.run(ctx, raw, written); err != nil {
		return nil, err
	}

	r := &result{
		Name: "projector catch-up", Unit: "records/s", BaselineUnit: "records/s",
		What: fmt.Sprintf("projector stopped, %d creates accepted, projector started: history records applied per second, from its start until every record is applied",
			sc.CatchupCommands),
		BaselineWhat: fmt.Sprintf("GetRecords drain of the same stream records, then BatchWriteItem of the same read items (user view, activity) on %d workers", writeConcurrency),
		Target:       atLeast("per_s", 0.85),
		Notes: []string{fmt.Sprintf("each create is %d stream records, one of them a history record; records/s counts history records", recordsPerCreate),
			"ready_ms: until /readyz; first_record_ms: until the first record is applied; after_first_per_s: the rate from then on"},
	}
	for range sc.Reps {
		if err := proj.stop(); err != nil {
			return nil, err
		}
		if _, err := count(ctx, 8, sc.CatchupCommands, func(ctx context.Context, _ int) error { return create(ctx, 0) }); err != nil {
			return nil, err
		}
		want := recordsPerCreate * sc.CatchupCommands
		before := e.cpu()
		t := time.Now()
		history, err := d.run(ctx, raw, want)
		if err != nil {
			return nil, err
		}
		base := map[string]float64{"per_s": float64(history) / time.Since(t).Seconds(), "wall_s": time.Since(t).Seconds()}
		e.addCPU(base, before, history)

		before = e.cpu()
		t = time.Now()
		if proj, err = e.start(ctx, "projector"); err != nil {
			return nil, err
		}
		ready := time.Since(t)
		var first time.Duration
		// A scrape costs the projector CPU that the raw drain does not pay: every 25 ms it
		// is about 1 % of a core, and the wall time is known to 25 ms in 6 s or more.
		err = waitFor(ctx, 5*time.Minute, 25*time.Millisecond, "the projector catches up", func() (bool, error) {
			got, err := appliedRecords(ctx, b, proj)
			if got > 0 && first == 0 {
				first = time.Since(t)
			}
			return got >= float64(want), err
		})
		if err != nil {
			return nil, err
		}
		wall := time.Since(t)
		fig := map[string]float64{"per_s": float64(sc.CatchupCommands) / wall.Seconds(), "wall_s": wall.Seconds(),
			"ready_ms": ms(ready), "first_record_ms": ms(first), "after_first_per_s": float64(sc.CatchupCommands) / (wall - first).Seconds()}
		e.addCPU(fig, before, sc.CatchupCommands)
		r.add(fig, base)
	}
	w, err := benchProjectorWrites(ctx, e, sc)
	if err != nil {
		return nil, err
	}
	return []*result{r, w}, nil
}

// liveHistoryInFlight is how many history records the live projector applies at once in
// the catch-up: 64 records of a shard in flight, one in three of them a history record.
const liveHistoryInFlight = 64 / recordsPerCreate

// benchProjectorWrites measures the catch-up's writes without the stream: the user views
// and activity items of sc.CatchupCommands creates, applied through the live projector's
// Committer by liveHistoryInFlight callers at once, against BatchWriteItem of the same items
// as the raw drain writes them. Both run in this process into empty tables, so the
// difference is what DynamoDB Local spends on the projector's conditional writes ("only
// if newer", which BatchWriteItem cannot carry) and on its grouping.
func benchProjectorWrites(ctx context.Context, e *env, sc scale) (*result, error) {
	r := &result{
		Name: "projector writes", Unit: "records/s", BaselineUnit: "records/s",
		What: fmt.Sprintf("the user views and activity items of %d creates applied by projections.Committer (views: TransactWriteItems of conditional puts; activities: BatchWriteItem), %d callers at once, into empty tables",
			sc.CatchupCommands, liveHistoryInFlight),
		BaselineWhat: fmt.Sprintf("BatchWriteItem of the same items, unconditional, on %d workers", writeConcurrency),
		Notes:        []string{"no stream and no projector process: the bench process writes both; no target, it bounds the catch-up's ratio"},
	}
	p := projections.New(e.db, projections.Options{})
	for rep := range sc.Reps {
		at := time.Now().UTC()
		evs := make([]events.Envelope, sc.CatchupCommands)
		var views, activities []item
		for i := range evs {
			evs[i] = userCreated(benchUser(fmt.Sprintf("wp%d-", rep), i, at))
			fx, err := p.Effects(evs[i])
			if err != nil {
				return nil, err
			}
			for _, u := range fx.Upserts {
				views = append(views, u.Item)
			}
			activities = append(activities, fx.Activities...)
		}
		var tables [2]projections.Tables
		for i, name := range []string{"raw", "committer"} {
			tables[i] = projections.Tables{Users: fmt.Sprintf("%s_wp%d_%s_users", e.prefix, rep, name),
				Activities: fmt.Sprintf("%s_wp%d_%s_activities", e.prefix, rep, name)}
			for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(tables[i].Users), dynamo.ActivitiesTable(tables[i].Activities)} {
				if err := dynamo.EnsureTable(ctx, e.db, spec); err != nil {
					return nil, err
				}
			}
		}

		before, t := e.cpu(), time.Now()
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return batchWrite(gctx, e.db, tables[0].Users, writeConcurrency/2, views) })
		g.Go(func() error { return batchWrite(gctx, e.db, tables[0].Activities, writeConcurrency/2, activities) })
		if err := g.Wait(); err != nil {
			return nil, err
		}
		base := map[string]float64{"per_s": float64(len(evs)) / time.Since(t).Seconds()}
		e.addCPU(base, before, len(evs))

		c := p.Committer(tables[1])
		var next atomic.Int64
		before, t = e.cpu(), time.Now()
		g, gctx = errgroup.WithContext(ctx)
		for range liveHistoryInFlight {
			g.Go(func() error {
				for i := next.Add(1) - 1; i < int64(len(evs)); i = next.Add(1) - 1 {
					if err := c.Apply(gctx, evs[i], nil); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		fig := map[string]float64{"per_s": float64(len(evs)) / time.Since(t).Seconds()}
		e.addCPU(fig, before, len(evs))
		r.add(fig, base)
	}
	return r, nil
}

// waitApplied waits until the projector process has applied (acked) n stream records, as
// its ssodir_stream_records_total says (per consumer: the bench tenant is the only one
// written to).
func waitApplied(ctx context.Context, b *bench, proj *service, n int, timeout time.Duration) error {
	return waitFor(ctx, timeout, 10*time.Millisecond, fmt.Sprintf("projector applies %d records", n), func() (bool, error) {
		got, err := appliedRecords(ctx, b, proj)
		return got >= float64(n), err
	})
}

// appliedRecords is the projector's count of applied stream records.
func appliedRecords(ctx context.Context, b *bench, proj *service) (float64, error) {
	return metricSum(ctx, b, proj, "ssodir_stream_records_total")
}

// scrape hands every line of a service's /metrics to f.
func scrape(ctx context.Context, b *bench, s *service, f func(line string) error) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url()+"/metrics", nil)
	// Uncompressed: gzip was most of what a scrape cost the measured process.
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if err := f(sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// rawDrain reads the bench tenant's stream with GetRecords and writes the read items of its
// history records with BatchWriteItem, continuing where its last run ended.
type rawDrain struct {
	e         *env
	arn       *string
	shard     *string
	last      string
	projector *projections.Projector
	registry  *events.Registry
}

func newRawDrain(ctx context.Context, e *env) (*rawDrain, error) {
	dt, err := e.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(e.commandsTable())})
	if err != nil {
		return nil, err
	}
	ds, err := e.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: dt.Table.LatestStreamArn})
	if err != nil {
		return nil, err
	}
	if len(ds.StreamDescription.Shards) != 1 {
		return nil, fmt.Errorf("the tenant's stream has %d shards; the raw drain reads one", len(ds.StreamDescription.Shards))
	}
	return &rawDrain{e: e, arn: dt.Table.LatestStreamArn, shard: ds.StreamDescription.Shards[0].ShardId,
		projector: projections.New(e.db, projections.Options{}), registry: events.NewRegistry()}, nil
}

// run reads the next want records, then writes their read items into t; it returns the
// number of history records among them.
func (d *rawDrain) run(ctx context.Context, t projections.Tables, want int) (int, error) {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: d.arn, ShardId: d.shard, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon}
	if d.last != "" {
		in.ShardIteratorType, in.SequenceNumber = stypes.ShardIteratorTypeAfterSequenceNumber, aws.String(d.last)
	}
	out, err := d.e.streams.GetShardIterator(ctx, in)
	if err != nil {
		return 0, err
	}
	it := out.ShardIterator
	now := dynamo.FormatTime(time.Now())
	var users, activities []item
	for read, empty := 0, 0; read < want; {
		page, err := d.e.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
		if err != nil {
			return 0, fmt.Errorf("raw drain: %w", err)
		}
		if empty = empty + 1; len(page.Records) > 0 {
			empty = 0
		} else if empty > 1000 {
			return 0, fmt.Errorf("raw drain: %d of %d records, then nothing", read, want)
		}
		for _, rec := range page.Records {
			read++
			d.last = aws.ToString(rec.Dynamodb.SequenceNumber)
			img := fromStream(rec.Dynamodb.NewImage)
			if rec.EventName != stypes.OperationTypeInsert || !dynamo.IsHistorySK(dynamo.StringAttr(img, "sk")) {
				continue
			}
			ev, err := dynamo.DecodeRecord(d.registry, img)
			if err != nil {
				return 0, err
			}
			fx, err := d.projector.Effects(ev)
			if err != nil {
				return 0, err
			}
			for _, u := range fx.Upserts {
				v := maps.Clone(u.Item)
				v["updated_at"] = s(now)
				users = append(users, v)
			}
			activities = append(activities, fx.Activities...)
		}
		it = page.NextShardIterator
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return batchWrite(gctx, d.e.db, t.Users, writeConcurrency/2, users) })
	g.Go(func() error { return batchWrite(gctx, d.e.db, t.Activities, writeConcurrency/2, activities) })
	return len(activities), g.Wait()
}

// fromStream converts a stream image to the DynamoDB API's attribute values (the two SDK
// packages have separate types of the same shape).
func fromStream(img map[string]stypes.AttributeValue) item {
	out := make(item, len(img))
	for k, v := range img {
		out[k] = fromStreamValue(v)
	}
	return out
}

func fromStreamValue(v stypes.AttributeValue) types.AttributeValue {
	switch x := v.(type) {
	case *stypes.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: x.Value}
	case *stypes.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: x.Value}
	case *stypes.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: bytes.Clone(x.Value)}
	case *stypes.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: x.Value}
	case *stypes.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: x.Value}
	case *stypes.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: x.Value}
	case *stypes.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: x.Value}
	case *stypes.AttributeValueMemberBS:
		return &types.AttributeValueMemberBS{Value: x.Value}
	case *stypes.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(x.Value))
		for i, e := range x.Value {
			l[i] = fromStreamValue(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *stypes.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: fromStream(x.Value)}
	}
	return &types.AttributeValueMemberNULL{Value: true}
}

// histogram is a Prometheus histogram's cumulative bucket counts by upper bound (seconds).
type histogram map[float64]float64

// applyHistogram reads the projector's ssodir_stream_apply_seconds.
func applyHistogram(ctx context.Context, b *bench, proj *service) (histogram, error) {
	h := histogram{}
	err := scrape(ctx, b, proj, func(line string) error {
		rest, ok := strings.CutPrefix(line, "ssodir_stream_apply_seconds_bucket{")
		if !ok {
			return nil
		}
		_, le, _ := strings.Cut(rest, `le="`)
		le, _, _ = strings.Cut(le, `"`)
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil {
			return fmt.Errorf("metric line %q: %w", line, err)
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		h[bound] += v
		return err
	})
	return h, err
}

// since is the histogram of what was observed after before.
func (h histogram) since(before histogram) histogram {
	out := histogram{}
	for le, v := range h {
		out[le] = v - before[le]
	}
	return out
}

// quantile is the upper bound, in milliseconds, of the bucket holding the q-th percentile
// (NaN when nothing was observed).
func (h histogram) quantile(q float64) float64 {
	bounds := slices.Sorted(maps.Keys(h))
	if len(bounds) == 0 || h[bounds[len(bounds)-1]] == 0 {
		return math.NaN()
	}
	total := h[bounds[len(bounds)-1]]
	for _, le := range bounds {
		if h[le] >= q/100*total {
			return le * 1000
		}
	}
	return math.Inf(1)
}
