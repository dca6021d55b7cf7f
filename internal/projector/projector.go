// Package projector is the projector process's logic: it turns stream records of the
// command log into events and applies them with internal/projections to the tenant's
// current read tables (and, while a replay builds a new generation, to those as well).
package projector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/progress"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/streams"
)

// tableCacheTTL bounds how long a tenant's table names are reused before the tenant row is
// read again, so a replay's switch is followed without a restart.
const tableCacheTTL = time.Second

// Handler applies command-log stream records to read tables.
type Handler struct {
	tenants   *dynamo.Tenants
	projector *projections.Projector
	registry  *events.Registry
	log       *zap.Logger

	mu         sync.Mutex
	cache      map[string]cachedTables
	committers map[projections.Tables]*projections.Committer
	// progress hears of every record written to a tenant's current tables (nil: nobody).
	progress *progress.Feed
	// eraser carries out erasures (user.erased records), filter keeps records of erased
	// users from writing anything about them; both nil until Erase.
	eraser *erasure.Eraser
	filter *erasure.Filter
	// detach: a user.erased record gets one bounded call of the erasure and is
	// acknowledged; the resume task does the rest (Lambda mode, DetachErasures).
	detach bool
	// feed appends what was projected to the change feed (nil: no feed).
	feed *feedHook
	// index keeps the memberships-at-an-instant index (nil: none; see Index).
	index *asof.Index
}

// Index makes the handler keep the index of memberships at an instant (internal/asof) in
// every table it projects into. Every process that projects must call it.
func (h *Handler) Index(x *asof.Index) { h.index = x }

// indexInto applies e to the as-of index of each target.
func (h *Handler) indexInto(ctx context.Context, targets []projections.Tables, e events.Envelope) error {
	if h.index == nil {
		return nil
	}
	for _, t := range targets {
		if err := h.index.Apply(ctx, t.Users, e); err != nil {
			return fmt.Errorf("index %s v%d into %s: %w", identity.LogKey(e.Entity()), e.Version, t.Users, err)
		}
	}
	return nil
}

// DetachErasures makes a user.erased record start its erasure with one bounded call and
// go, instead of holding its shard until the erasure's projector part is done: the
// resume task (erasure.Eraser.ResumePending, on a schedule) goes on with it. Lambda mode
// calls it, where a record held past the invocation's timeout is retried and then
// discarded (docs/erasure.md, "The bound"). Nothing of the user's aggregate can follow
// the record until the erasure frees the name, so no later record overtakes it.
func (h *Handler) DetachErasures() { h.detach = true }

// Erase makes the handler carry out the erasures its records ask for, and filter the
// records of erased users (docs/erasure.md). Without it, a user.erased record projects as
// a delete and nothing is filtered: every process that projects must call it.
func (h *Handler) Erase(x *erasure.Eraser, f *erasure.Filter) { h.eraser, h.filter = x, f }

// Publish makes the handler tell feed what it has written, so that query APIs following
// the feed wake the X-Min-Version reads waiting on it.
func (h *Handler) Publish(feed *progress.Feed) { h.progress = feed }

type cachedTables struct {
	targets []projections.Tables
	at      time.Time
}

// NewHandler is the projector's record handler.
func NewHandler(tenants *dynamo.Tenants, p *projections.Projector, reg *events.Registry, log *zap.Logger) *Handler {
	return &Handler{tenants: tenants, projector: p, registry: reg, log: log, cache: map[string]cachedTables{},
		committers: map[projections.Tables]*projections.Committer{}}
}

// HandleMessage is the watermill handler.
func (h *Handler) HandleMessage(msg *message.Message) error {
	rec, err := streams.DecodeRecord(msg)
	if err != nil {
		return fmt.Errorf("decode stream record: %w", err)
	}
	return h.apply(msg.Context(), rec, func(until time.Time) error {
		// The erasure's second pass is due later: the shard waits for it, which keeps the
		// user's later records (none of this incarnation) behind the erasure.
		streams.Park(msg, until)
		return errErasureWaits
	})
}

// errErasureWaits is the nack of a user.erased record parked until its second pass.
var errErasureWaits = errors.New("erasure waits for its second pass")

// Apply projects one stream record; records that are not new history records (state
// items, guards, memberships, TTL expiry of history) carry nothing to project.
func (h *Handler) Apply(ctx context.Context, rec streams.Record) error {
	return h.apply(ctx, rec, nil)
}

// apply is Apply; park, when set, holds the record until a time instead of waiting here.
func (h *Handler) apply(ctx context.Context, rec streams.Record, park func(time.Time) error) error {
	if rec.TTLDeletion || rec.EventName != streams.EventInsert {
		return nil
	}
	if !isHistory(rec) {
		return nil
	}
	env, err := dynamo.DecodeRecord(h.registry, rec.NewImage)
	if err != nil {
		return fmt.Errorf("decode history record of %s: %w", identity.LogKey(rec.Aggregate), err)
	}
	if err := h.tenants.JoinRecordParts(ctx, h.registry, rec.System, rec.Tenant, rec.NewImage, &env); err != nil {
		return err
	}
	if h.eraser != nil {
		if e, ok := env.Payload.(*events.UserErased); ok {
			targets, err := h.Targets(ctx, rec.System, rec.Tenant)
			if err != nil {
				return err
			}
			if err := h.indexInto(ctx, targets, env); err != nil {
				return err
			}
			if err := h.erase(ctx, rec, e, park); err != nil {
				return err
			}
			return h.appendChange(ctx, rec, env)
		}
	}
	if h.filter != nil {
		skip, err := h.filter.Apply(ctx, rec.System, rec.Tenant, &env)
		if err != nil {
			return fmt.Errorf("read the erasure ledger: %w", err)
		}
		if skip {
			return nil // a record of a user erased since: it writes nothing about them
		}
	}
	targets, err := h.Targets(ctx, rec.System, rec.Tenant)
	if err != nil {
		return err
	}
	// The as-of index is written alongside the views, not after them: its writes are
	// idempotent and order-proof (internal/asof), and the record is acknowledged (and
	// appended to the feed) only once both are done, so it holds its stream slot for the
	// longer of the two rather than their sum.
	indexed := make(chan error, 1)
	go func() { indexed <- h.indexInto(ctx, targets, env) }()
	for i, t := range targets {
		// The notice goes out as soon as the view of the current tables holds the
		// version, not after the record's whole group: X-Min-Version waits on the view.
		var viewed func()
		if i == 0 && h.progress != nil {
			viewed = func() {
				h.progress.Publish(progress.Notice{System: rec.System, Tenant: rec.Tenant,
					ID: dynamo.AggregateID(env.Kind, env.Key), Version: env.Version})
			}
		}
		if err := h.committer(t).Apply(ctx, env, viewed); err != nil {
			<-indexed
			return fmt.Errorf("project %s v%d into %s: %w", identity.LogKey(env.Entity()), env.Version, t.Users, err)
		}
	}
	if err := <-indexed; err != nil {
		return err
	}
	return h.appendChange(ctx, rec, env)
}

// committer is the group commit of a pair of tables: records of different aggregates that
// the stream consumer delivers at the same time are written together.
func (h *Handler) committer(t projections.Tables) *projections.Committer {
	h.mu.Lock()
	defer h.mu.Unlock()
	c, ok := h.committers[t]
	if !ok {
		c = h.projector.Committer(t)
		h.committers[t] = c
	}
	return c
}

func isHistory(rec streams.Record) bool {
	return dynamo.IsHistorySK(dynamo.StringAttr(rec.Keys, "sk"))
}

// Targets are the tables a tenant's events go to now: the current generation, and the
// one a replay is building.
func (h *Handler) Targets(ctx context.Context, system, tenant string) ([]projections.Tables, error) {
	key := system + "/" + tenant
	h.mu.Lock()
	c, ok := h.cache[key]
	h.mu.Unlock()
	if ok && time.Since(c.at) < tableCacheTTL {
		return c.targets, nil
	}
	row, err := h.tenants.Get(ctx, system, tenant)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", key, err)
	}
	targets := []projections.Tables{{Users: row.UsersTable, Activities: row.ActivitiesTable}}
	if row.NextUsersTable != "" && row.NextActivitiesTable != "" {
		targets = append(targets, projections.Tables{Users: row.NextUsersTable, Activities: row.NextActivitiesTable})
	}
	h.mu.Lock()
	for _, old := range h.cache[key].targets {
		if !slices.Contains(targets, old) {
			delete(h.committers, old) // a generation a replay switched away from
		}
	}
	h.cache[key] = cachedTables{targets: targets, at: time.Now()}
	h.mu.Unlock()
	return targets, nil
}

// OnGap records that a tenant's views missed stream data and need a replay.
func (h *Handler) OnGap(ctx context.Context, gap streams.Gap) error {
	h.log.Error("stream data lost before it was applied: the tenant needs a replay",
		zap.String("tenant", gap.Stream.System+"/"+gap.Stream.Tenant), zap.String("shard", gap.ShardID),
		zap.String("after", gap.After), zap.String("reason", gap.Reason))
	reason := fmt.Sprintf("stream gap on shard %s after %q: %s", gap.ShardID, gap.After, gap.Reason)
	return h.tenants.MarkReplayNeeded(ctx, gap.Stream.System, gap.Stream.Tenant, reason)
}

// erase runs the erasure's passes that are due: with park, the record waits on the shard
// for the second; without (a re-drive), this call waits for it.
func (h *Handler) erase(ctx context.Context, rec streams.Record, e *events.UserErased, park func(time.Time) error) error {
	if h.detach {
		if _, err := h.eraser.Step(ctx, rec.System, rec.Tenant, e); err != nil {
			return fmt.Errorf("erasure %s: %w", e.ErasureID, err)
		}
		return nil
	}
	for {
		again, err := h.eraser.Step(ctx, rec.System, rec.Tenant, e)
		if err != nil || again.IsZero() {
			if err != nil {
				return fmt.Errorf("erasure %s: %w", e.ErasureID, err)
			}
			return nil
		}
		if park != nil {
			return park(again)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(again)):
		}
	}
}
