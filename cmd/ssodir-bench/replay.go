package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

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
	e, err := b.newEnv(ctx, sc.FreshDB)
	if err != nil {
		return nil, err
	}
	defer e.close()
	api, err := e.start(ctx, "command-api")
	if err != nil {
		return nil, err
	}
	if err := e.provision(ctx, api); err != nil {
		return nil, err
	}
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
		Name: fmt.Sprintf("replay %dk users, %dk records", sc.ReplayUsers/1000, records/1000), Unit: "records/s", BaselineUnit: "records/s",
		What: "projector.Replayer.Run in-process: scan, apply, rebuild from state, verify, switch; history records per second of wall time",
		BaselineWhat: fmt.Sprintf("BatchWriteItem of the same read items (one user view and %d activities per user) into fresh tables, %d workers",
			sc.ReplayHistory, writeConcurrency),
		Target: atLeast("per_s", 0.80),
		Notes: []string{"history_per_s is the rate of the replay's history phase alone (scan and apply)",
			"SwitchWait is 1ms: no live projector runs in this scenario"},
	}
	for rep := range sc.Reps {
		row, err := tenants.Get(ctx, benchSystem, benchTenant)
		if err != nil {
			return nil, err
		}
		phases := &phaseClock{start: map[string]time.Time{}, end: map[string]time.Time{}}
		t := time.Now()
		out, err := replayer.Run(ctx, benchSystem, benchTenant, projector.ReplayOptions{SwitchWait: time.Millisecond, Progress: phases})
		if err != nil {
			return nil, err
		}
		wall := time.Since(t)
		if out.HistoryRecords != int64(records) || len(out.Mismatches) > 0 || !out.Switched {
			return nil, fmt.Errorf("replay applied %d of %d records, %d mismatches, switched %v", out.HistoryRecords, records, len(out.Mismatches), out.Switched)
		}
		fig := map[string]float64{"per_s": float64(records) / wall.Seconds(), "wall_s": wall.Seconds(),
			"history_per_s": float64(records) / phases.took("history").Seconds(), "verify_s": phases.took("verify").Seconds()}
		for _, old := range []string{row.UsersTable, row.ActivitiesTable} {
			if err := dynamo.DeleteTable(ctx, e.db, old); err != nil {
				return nil, err
			}
		}
		base, err := rawReplay(ctx, e, sc, rep)
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
func rawReplay(ctx context.Context, e *env, sc scale, rep int) (map[string]float64, error) {
	t := projections.Tables{Users: fmt.Sprintf("%s_raw_users_%d", e.prefix, rep), Activities: fmt.Sprintf("%s_raw_activities_%d", e.prefix, rep)}
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(t.Users), dynamo.ActivitiesTable(t.Activities)} {
		if err := dynamo.EnsureTable(ctx, e.db, spec); err != nil {
			return nil, err
		}
	}
	p := projections.New(e.db, projections.Options{Retention: activityRetention})
	at := time.Now().UTC().Truncate(time.Millisecond)
	now := dynamo.FormatTime(time.Now())
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
				activities = append(activities, fx.Activity)
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
	records := float64(sc.ReplayUsers * sc.ReplayHistory)
	return map[string]float64{"per_s": records / wall.Seconds(), "wall_s": wall.Seconds()}, nil
}

// phaseClock is a replay Progress that notes when each phase starts and finishes.
type phaseClock struct {
	mu         sync.Mutex
	current    string
	start, end map[string]time.Time
}

func (c *phaseClock) Start(phase string, _ int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.current, c.start[phase] = phase, time.Now()
}

func (c *phaseClock) Add(int) {}

func (c *phaseClock) Finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end[c.current] = time.Now()
}

func (c *phaseClock) took(phase string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.end[phase].Sub(c.start[phase])
}
