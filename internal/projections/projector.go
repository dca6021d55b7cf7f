package projections

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// Tables are the tables one tenant's projection writes. They are given per call, never
// derived here, so that a replay can build fresh tables with the same code.
type Tables struct {
	Users      string
	Activities string
}

func (t Tables) validate() error {
	if t.Users == "" || t.Activities == "" {
		return fmt.Errorf("projection tables not set (users %q, activities %q)", t.Users, t.Activities)
	}
	return nil
}

// DB is the part of the DynamoDB client the projector uses.
type DB interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

// Options configure a Projector.
type Options struct {
	// Retention is how long activity items live (their `expires_at` TTL); 0 keeps them.
	Retention time.Duration
	// Concurrency bounds the parallel writes of ApplyBatch; 0 means 8.
	Concurrency int
	// Now stamps `updated_at` (projection time) on read items; nil means time.Now.
	Now func() time.Time
	// SinglePuts writes each view item of a group with its own conditional PutItem, sent
	// concurrently, instead of transactions of 25: on AWS a transactional write costs two
	// write units per KB and a PutItem one, so this halves the read model's write cost
	// there; DynamoDB Local, which serialises writes, is faster with the transactions.
	// Either way every item is written "only if newer".
	SinglePuts bool
}

// Projector applies events to a tenant's read and activity tables.
type Projector struct {
	db       DB
	reducers map[events.Type]Reducer
	// states are the reducers without the activity item, for ApplyStates.
	states      map[events.Type]Reducer
	concurrency int
	now         func() time.Time
	activities  *activityBatcher
	singlePuts  bool
}

// New is a Projector with every reducer of NewReducers.
func New(db DB, opts Options) *Projector {
	p := &Projector{
		db: db, reducers: NewReducers(opts.Retention), states: stateReducers(),
		concurrency: opts.Concurrency, now: opts.Now, singlePuts: opts.SinglePuts,
	}
	if p.concurrency <= 0 {
		// DynamoDB Local's writes saturate at about 8 concurrent callers
		// (shared/DYNAMODB-LOCAL.md); beyond that requests only queue.
		p.concurrency = 8
	}
	if p.now == nil {
		p.now = time.Now
	}
	p.activities = newActivityBatcher(writer{db: db}.batchPutItems)
	return p
}

// Effects are the writes e needs, without executing them.
func (p *Projector) Effects(e events.Envelope) (Effects, error) { return reduce(p.reducers, e) }

func reduce(reducers map[events.Type]Reducer, e events.Envelope) (Effects, error) {
	r, ok := reducers[e.Type]
	if !ok {
		return Effects{}, fmt.Errorf("no projection for event type %q", e.Type)
	}
	return r(e)
}

// Apply projects one event. It is safe to call again with the same event, and with the
// events of one aggregate in any order; an error leaves nothing that a retry cannot finish.
func (p *Projector) Apply(ctx context.Context, t Tables, e events.Envelope) error {
	return p.apply(ctx, t, e, nil)
}

// apply is Apply that calls viewed, if not nil, once the event's aggregate view is
// written: after its membership writes (so that a reader who sees a group at a version
// also finds the memberships that version changed), before its cascade and activity
// writes.
func (p *Projector) apply(ctx context.Context, t Tables, e events.Envelope, viewed func()) error {
	if err := t.validate(); err != nil {
		return err
	}
	fx, err := p.Effects(e)
	if err != nil {
		return fmt.Errorf("project %s %s v%d: %w", e.Type, identity.LogKey(e.Entity()), e.Version, err)
	}
	w := p.writer(t)
	memberships, views := splitMemberships(fx.Upserts)
	if err := each(ctx, p.concurrency, fx.MemberAdds, w.addMember); err != nil {
		return err
	}
	if err := each(ctx, p.concurrency, memberships, w.upsert); err != nil {
		return err
	}
	for _, u := range views {
		if err := w.upsert(ctx, u); err != nil {
			return err
		}
	}
	if viewed != nil {
		viewed()
	}
	if fx.UserCascade != nil {
		if err := w.cascadeUser(ctx, *fx.UserCascade); err != nil {
			return err
		}
	}
	if fx.GroupCascade != nil {
		if err := w.cascadeGroup(ctx, *fx.GroupCascade); err != nil {
			return err
		}
	}
	switch len(fx.Activities) {
	case 0:
		return nil
	case 1, 2:
		// An event's item, and for a single membership change the member's copy: each goes
		// with the batch the concurrent events' items fill.
		return each(ctx, 2, fx.Activities, func(ctx context.Context, it Item) error {
			if err := p.activities.write(ctx, t.Activities, it); err != nil {
				return fmt.Errorf("put activity %s in %s: %w", logItemKey(it, "pk"), t.Activities, err)
			}
			return nil
		})
	}
	// The items of one members change fill batches of their own.
	return each(ctx, p.concurrency, slices.Collect(slices.Chunk(fx.Activities, maxBatchItems)), w.batchPut(t.Activities))
}

// ApplyBatch projects many events, e.g. a page of a replay, and leaves the tables as Apply
// of each would. Activity items go out through BatchWriteItem; the conditional writes are
// coalesced to the newest version per item (an older one could only lose its condition)
// and run in parallel, since none of them depends on the order. On error some writes may
// have happened: apply the same events again, together or one by one.
func (p *Projector) ApplyBatch(ctx context.Context, t Tables, es []events.Envelope) error {
	_, err := p.applyBatch(ctx, t, es, p.reducers, false, nil)
	return err
}

// Rebuild is ApplyBatch for a replay into tables that started empty: the aggregates' own
// items (users and groups, tombstones included) go out through BatchWriteItem as the
// activity items do, without the "only if newer" condition that costs a PutItem each.
// Unconditional, such a write can overwrite a newer version that a live projector wrote
// in the meantime, so Rebuild returns what it wrote (read-table id → version) and the
// caller must then apply the command log's current state of every aggregate that is
// newer than that (projector.Replayer does, from the `config` items, after each page).
func (p *Projector) Rebuild(ctx context.Context, t Tables, es []events.Envelope) (map[string]int64, error) {
	return p.applyBatch(ctx, t, es, p.reducers, true, nil)
}

// ApplyStates is ApplyBatch for events a replay synthesises from the write model's state
// items where the history records have expired: it writes the read table only, because
// the activity of those events has expired with them (and they need no event id).
func (p *Projector) ApplyStates(ctx context.Context, t Tables, es []events.Envelope) error {
	_, err := p.applyBatch(ctx, t, es, p.states, false, nil)
	return err
}

// viewedFunc hears that the conditional item "<id>/<sk>" holds version or a newer one.
type viewedFunc func(key string, version int64)
