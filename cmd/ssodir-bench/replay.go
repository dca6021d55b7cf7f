package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/sync/errgroup"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/projector"
)

// activityRetention is the projector's default SSO_ACTIVITY_RETENTION, so that activity
// items carry their TTL as in production.
const activityRetention = 2160 * time.Hour

// seedChunk is how many users are generated and written at a time.
const seedChunk = 1000

func benchReplay(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	e, api, err := apiEnv(ctx, b, sc, true)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if err := api.stop(); err != nil {
		return nil, err
	}
	records := sc.ReplayUsers * sc.ReplayHistory
	t := time.Now()
	if err := seedHistory(ctx, e, sc); err != nil {
		return nil, err
	}
	b.logf("   seeded %d users with %d history records in %.0fs", sc.ReplayUsers, records, time.Since(t).Seconds())

	tenants := dynamo.NewTenants(e.db, e.names)
	p := projections.New(e.db, projections.Options{Retention: activityRetention})
	replayer := projector.NewReplayer(e.db, e.names, tenants, p, events.NewRegistry(), zap.NewNop())
	r := &result{
		Name: fmt.Sprintf("replay %s users, %s records", quantity(sc.ReplayUsers), quantity(records)), Unit: "records/s", BaselineUnit: "records/s",
		What: "projector.Replayer.Run in-process: scan, apply, rebuild from state, verify, switch; history records per second of wall time",
		BaselineWhat: fmt.Sprintf("BatchWriteItem of the same read items (one user view and %d activities per user) into fresh tables, %d workers",
			sc.ReplayHistory, writeConcurrency),
		Target: atLeast("per_s", 0.90),
		Notes: []string{"rebuild_s (one scan of the log, applying history and state) and verify_s are the replay's phases; the baseline's scan_s is one raw Scan of the command table in the replay's segments, 4 at a time",
			"the baseline's read_and_write_per_s counts that scan too: a rebuild cannot write what it has not read",
			"SwitchWait is 1ms: no live projector runs in this scenario"},
	}
	for rep := range sc.Reps {
		row, err := tenants.Get(ctx, benchSystem, benchTenant)
		if err != nil {
			return nil, err
		}
		clock := &replayClock{log: b.log, start: time.Now(), at: map[string]time.Time{}}
		before := e.cpu()
		out, err := replayer.Run(ctx, benchSystem, benchTenant, projector.ReplayOptions{SwitchWait: time.Millisecond, Progress: clock, Out: clock})
		if err != nil {
			return nil, err
		}
		wall := time.Since(clock.start)
		if out.HistoryRecords != int64(records) || len(out.Mismatches) > 0 || !out.Switched {
			return nil, fmt.Errorf("replay applied %d of %d records, %d mismatches, switched %v", out.HistoryRecords, records, len(out.Mismatches), out.Switched)
		}
		fig := map[string]float64{"per_s": float64(records) / wall.Seconds(), "wall_s": wall.Seconds(),
			"rebuild_s": clock.between("start rebuild", "finish rebuild"), "verify_s": clock.between("applied", "verified"),
			"segments": float64(out.Segments)}
		e.addCPU(fig, before, records)
		for _, old := range []string{row.UsersTable, row.ActivitiesTable} {
			if err := dynamo.DeleteTable(ctx, e.db, old); err != nil {
				return nil, err
			}
		}
		base, err := rawReplay(ctx, e, sc, rep, out.Segments)
		if err != nil {
			return nil, err
		}
		r.add(fig, base)
	}
	return []*result{r}, nil
}

// replayUser is the history of the i-th user: a create and ReplayHistory-1 updates.
func replayUser(sc scale, i int, at time.Time) (events.User, []events.Envelope) {
	u := benchUser("rp", i, at)
	es := []events.Envelope{userCreated(u)}
	for v := 1; v < sc.ReplayHistory; v++ {
		var e events.Envelope
		u, e = renamed(u, at.Add(time.Duration(v)*time.Second))
		es = append(es, e)
	}
	return u, es
}

// seedHistory writes the command log of ReplayUsers users straight into the tenant's
// command table: every history record, the latest config and the email guard.
func seedHistory(ctx context.Context, e *env, sc scale) error {
	at := time.Now().UTC().Truncate(time.Millisecond)
	for start := 0; start < sc.ReplayUsers; start += seedChunk {
		var items []item
		for i := start; i < min(start+seedChunk, sc.ReplayUsers); i++ {
			u, es := replayUser(sc, i, at)
			for _, ev := range es {
				items = append(items, history(ev))
			}
			items = append(items, userConfig(u), emailGuard(u))
		}
		if err := batchWrite(ctx, e.db, e.commandsTable(), writeConcurrency, items); err != nil {
			return err
		}
	}
	return nil
}

// rawReplay writes what a replay writes — each user's final view and the activity item of
// every history record — with BatchWriteItem into fresh tables, and drops them again.
func rawReplay(ctx context.Context, e *env, sc scale, rep, segments int) (map[string]float64, error) {
	t := projections.Tables{Users: fmt.Sprintf("%s_raw_users_%d", e.prefix, rep), Activities: fmt.Sprintf("%s_raw_activities_%d", e.prefix, rep)}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(t.Users), dynamo.ActivitiesTable(t.Activities)} {
		if err := dynamo.EnsureTable(ctx, e.db, spec); err != nil {
			return nil, err
		}
	}
	p := projections.New(e.db, projections.Options{Retention: activityRetention})
	at := time.Now().UTC().Truncate(time.Millisecond)
	now := dynamo.FormatTime(time.Now())
	before := e.cpu()
	start := time.Now()
	for first := 0; first < sc.ReplayUsers; first += seedChunk {
		var users, activities []item
		for i := first; i < min(first+seedChunk, sc.ReplayUsers); i++ {
			_, es := replayUser(sc, i, at)
			for j, ev := range es {
				fx, err := p.Effects(ev)
				if err != nil {
					return nil, err
				}
				activities = append(activities, fx.Activities...)
				if j == len(es)-1 {
					for _, u := range fx.Upserts {
						v := maps.Clone(u.Item)
						v["updated_at"] = s(now)
						users = append(users, v)
					}
				}
			}
		}
		if err := batchWrite(ctx, e.db, t.Users, writeConcurrency, users); err != nil {
			return nil, err
		}
		if err := batchWrite(ctx, e.db, t.Activities, writeConcurrency, activities); err != nil {
			return nil, err
		}
	}
	wall := time.Since(start)
	for _, name := range []string{t.Users, t.Activities} {
		if err := dynamo.DeleteTable(ctx, e.db, name); err != nil {
			return nil, err
		}
	}
	records := sc.ReplayUsers * sc.ReplayHistory
	base := map[string]float64{"per_s": float64(records) / wall.Seconds(), "wall_s": wall.Seconds()}
	e.addCPU(base, before, records)
	scan, err := rawScan(ctx, e, segments)
	base["scan_s"] = scan.Seconds()
	base["read_and_write_per_s"] = float64(records) / (wall + scan).Seconds()
	return base, err
}

// rawScan reads the whole command table with a parallel Scan of segs segments, 4 at a
// time, as a replay's rebuild does.
func rawScan(ctx context.Context, e *env, segs int) (time.Duration, error) {
	t := time.Now()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for seg := range segs {
		g.Go(func() error {
			p := dynamodb.NewScanPaginator(e.db, &dynamodb.ScanInput{TableName: aws.String(e.commandsTable()),
				Segment: aws.Int32(int32(seg)), TotalSegments: aws.Int32(int32(segs))})
			for p.HasMorePages() {
				if _, err := p.NextPage(ctx); err != nil {
					return err
				}
			}
			return nil
		})
	}
	err := g.Wait()
	return time.Since(t), err
}

// replayClock is a replay's Progress and report writer: it notes when phases start and
// finish and when report lines come (by their first word), and logs the lines.
type replayClock struct {
	mu    sync.Mutex
	log   io.Writer
	start time.Time
	phase string
	at    map[string]time.Time
}

func (c *replayClock) note(event string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.at[event]; !ok {
		c.at[event] = time.Now()
	}
}

func (c *replayClock) Start(phase string, _ int64) {
	c.mu.Lock()
	c.phase = phase
	c.mu.Unlock()
	c.note("start " + phase)
}

func (c *replayClock) Add(int) {}

func (c *replayClock) Finish() {
	c.mu.Lock()
	phase := c.phase
	c.mu.Unlock()
	c.note("finish " + phase)
}

func (c *replayClock) Write(p []byte) (int, error) {
	word, _, _ := strings.Cut(string(p), " ")
	c.note(word)
	fmt.Fprintf(c.log, "   %6.1fs replay: %s", time.Since(c.start).Seconds(), p)
	return len(p), nil
}

// between is the seconds from one noted event to another.
func (c *replayClock) between(from, to string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at[to].Sub(c.at[from]).Seconds()
}
