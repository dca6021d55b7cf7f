package changefeed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// WriteDB is the part of DynamoDB the appender uses.
type WriteDB interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ WriteDB = (*dynamodb.Client)(nil)

// ErrPredecessorPending is the answer to a change whose required predecessor (a rename's
// previous version, recorded under another partition and so read from another shard) is
// not in the feed yet. The record is retried; nothing after it in the aggregate is lost.
var ErrPredecessorPending = errors.New("changefeed: the aggregate's previous change is not in the feed yet")

const (
	// maxBatch bounds the changes of one transaction: one head, a change and at most one
	// guard each stay within TransactWriteItems' 100 items.
	maxBatch = 32
	// maxBatchBytes keeps a transaction well within its 4 MB.
	maxBatchBytes = 2 << 20
	// maxConflicts is how often a batch is decided again after another process moved the
	// head or a guard between its read and its write.
	maxConflicts = 20
)

// Options tune an Appender; zero values take the defaults.
type Options struct {
	// Retention is how long a change is kept (its TTL); 0 keeps it forever.
	Retention time.Duration
	// RequireWait is how long Append waits, polling, for a rename's predecessor before it
	// answers ErrPredecessorPending (default 5 s).
	RequireWait time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnAppend, when set, is told of every transaction that put changes of a tenant into
	// the feed (it wakes this process's EventBridge publisher). It must not block.
	OnAppend func(system, tenant string)
}

// Appender appends changes to the feed. The changes of one tenant that arrive while a
// transaction is under way are written together in the next one (group commit).
type Appender struct {
	db    WriteDB
	table string
	opts  Options

	mu     sync.Mutex
	queues map[string]*queue
	// began is when the stage's feed began: the feed table's creation (ms; 0 until read).
	began int64
}

type queue struct {
	system, tenant string
	mu             sync.Mutex
	waiting        []*pending
	busy           bool
}

type pending struct {
	c    Change
	done chan error
}

// NewAppender appends to the feed table named table.
func NewAppender(db WriteDB, table string, opts Options) *Appender {
	if opts.RequireWait <= 0 {
		opts.RequireWait = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Appender{db: db, table: table, opts: opts, queues: map[string]*queue{}}
}

// Append puts c into its tenant's feed, once: a change already there (the same aggregate
// at the same or a later version) is not appended again and answers nil.
func (a *Appender) Append(ctx context.Context, c Change) error {
	deadline := a.opts.Now().Add(a.opts.RequireWait)
	for {
		err := a.append(ctx, c)
		if !errors.Is(err, ErrPredecessorPending) || !a.opts.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (a *Appender) append(ctx context.Context, c Change) error {
	key := c.System + "/" + c.Tenant
	a.mu.Lock()
	q, ok := a.queues[key]
	if !ok {
		q = &queue{system: c.System, tenant: c.Tenant}
		a.queues[key] = q
	}
	a.mu.Unlock()
	p := &pending{c: c, done: make(chan error, 1)}
	q.mu.Lock()
	q.waiting = append(q.waiting, p)
	lead := !q.busy
	q.busy = true
	q.mu.Unlock()
	if lead {
		go a.drain(q)
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err() // the change may still be appended: its retry finds it there
	}
}

// drain writes a tenant's waiting changes, a batch at a time, until none wait.
func (a *Appender) drain(q *queue) {
	for {
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		n, size := 0, 0
		for n < len(q.waiting) && n < maxBatch && (n == 0 || size+len(q.waiting[n].c.Event) <= maxBatchBytes) {
			size += len(q.waiting[n].c.Event)
			n++
		}
		batch := slices.Clone(q.waiting[:n])
		q.waiting = slices.Delete(q.waiting, 0, n)
		q.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		results := a.flush(ctx, q.system, q.tenant, batch)
		cancel()
		for i, p := range batch {
			p.done <- results[i]
		}
	}
}

// state is what a batch is decided on: the head and the guards of its aggregates.
type state struct {
	headFound bool
	next      int64 // the position the next change takes
	fedAt     int64 // ms, the latest change's
	startedAt int64 // ms, when the tenant's feed began
	guards    map[string]int64
}

// flush decides a batch against the head and guards as they are, and writes what it
// accepts in one transaction conditioned on them; a conflict decides again.
func (a *Appender) flush(ctx context.Context, system, tenant string, batch []*pending) []error {
	results := make([]error, len(batch))
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	// An aggregate's changes go in by version whatever the order they arrived in.
	slices.SortStableFunc(order, func(x, y int) int {
		return int(batch[x].c.Version - batch[y].c.Version)
	})
	for attempt := 0; ; attempt++ {
		st, err := a.read(ctx, system, tenant, batch)
		if err != nil {
			for i := range results {
				results[i] = err
			}
			return results
		}
		now := a.opts.Now().UnixMilli()
		if !st.headFound {
			st.next = 1
			if st.startedAt, err = a.stageBegan(ctx); err != nil {
				for i := range results {
					results[i] = err
				}
				return results
			}
		}
		fedAt := max(now, st.fedAt)
		last := make(map[string]int64, len(st.guards))
		seen := make(map[string]bool, len(st.guards))
		for k, v := range st.guards {
			last[k], seen[k] = v, true
		}
		var accepted []int
		for _, i := range order {
			c := batch[i].c
			g, ok := last[c.Aggregate]
			switch {
			case ok && g >= c.Version:
				results[i] = nil // in the feed already
			case c.Requires > 0 && (!ok || g < c.Requires) && a.willCome(c, ok, st):
				results[i] = ErrPredecessorPending
			default:
				results[i] = nil
				last[c.Aggregate] = c.Version
				accepted = append(accepted, i)
			}
		}
		if len(accepted) == 0 {
			return results
		}
		err = a.write(ctx, system, tenant, st, fedAt, batch, accepted, last, seen)
		if err == nil {
			if a.opts.OnAppend != nil {
				a.opts.OnAppend(system, tenant)
			}
			return results
		}
		if _, conflict := sdkerr.ConditionFailures(err); !conflict || attempt >= maxConflicts {
			for _, i := range accepted {
				results[i] = fmt.Errorf("append to the change feed of %s/%s: %w", system, tenant, err)
			}
			return results
		}
	}
}

// willCome reports whether a change's missing predecessor is still to come into the feed.
// A feed that knows the aggregate has had every earlier change offered to it in order, so
// the predecessor is in flight. A feed that does not know it yet gets the predecessor if
// that was recorded after the tenant's feed began (a change recorded before it belongs to
// the time before the feed, docs/events.md); a predecessor gone from the command log
// never comes.
func (a *Appender) willCome(c Change, known bool, st state) bool {
	if c.RequiresAt.IsZero() {
		return false
	}
	if known {
		return true
	}
	return c.RequiresAt.UnixMilli() >= st.startedAt
}

// stageBegan is when the stage's feed began: when its table was made, before any projector
// appended to it. A change recorded since is projected by a projector with the feed (but
// for those of a rolling upgrade's old processes, docs/events.md), so it comes to the feed.
func (a *Appender) stageBegan(ctx context.Context) (int64, error) {
	a.mu.Lock()
	began := a.began
	a.mu.Unlock()
	if began != 0 {
		return began, nil
	}
	out, err := a.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(a.table)})
	if err != nil {
		return 0, fmt.Errorf("describe the change feed's table: %w", err)
	}
	if out.Table == nil || out.Table.CreationDateTime == nil {
		return 0, errors.New("changefeed: the feed table has no creation time")
	}
	began = out.Table.CreationDateTime.UnixMilli()
	a.mu.Lock()
	a.began = began
	a.mu.Unlock()
	return began, nil
}

func (a *Appender) read(ctx context.Context, system, tenant string, batch []*pending) (state, error) {
	pk := feedPK(system, tenant)
	keys := []map[string]types.AttributeValue{{attrPK: str(pk), attrSK: str(skHead)}}
	added := map[string]bool{}
	for _, p := range batch {
		if !added[p.c.Aggregate] {
			added[p.c.Aggregate] = true
			keys = append(keys, map[string]types.AttributeValue{attrPK: str(guardPK(system, tenant, p.c.Aggregate)), attrSK: str(skGuard)})
		}
	}
	st := state{guards: map[string]int64{}}
	req := map[string]types.KeysAndAttributes{a.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for len(req) > 0 {
		out, err := a.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return state{}, fmt.Errorf("read the change feed's head of %s/%s: %w", system, tenant, err)
		}
		for _, item := range out.Responses[a.table] {
			if strAttr(item, attrSK) == skHead {
				st.headFound = true
				st.next, st.fedAt, st.startedAt = numAttr(item, attrNext), numAttr(item, attrFedAt), numAttr(item, attrStartedAt)
				continue
			}
			st.guards[strAttr(item, attrAggregate)] = numAttr(item, attrVersion)
		}
		req = out.UnprocessedKeys
		if len(req) > 0 {
			select {
			case <-ctx.Done():
				return state{}, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return st, nil
}

func (a *Appender) write(ctx context.Context, system, tenant string, st state, fedAt int64, batch []*pending,
	accepted []int, last map[string]int64, seen map[string]bool) error {
	pk := feedPK(system, tenant)
	next := st.next + int64(len(accepted))
	head := &types.Put{TableName: aws.String(a.table), Item: map[string]types.AttributeValue{
		attrPK: str(pk), attrSK: str(skHead), attrNext: num(next), attrFedAt: num(fedAt), attrStartedAt: num(st.startedAt),
	}}
	if st.headFound {
		head.ConditionExpression = aws.String("#n = :n")
		head.ExpressionAttributeNames = map[string]string{"#n": attrNext}
		head.ExpressionAttributeValues = map[string]types.AttributeValue{":n": num(st.next)}
	} else {
		head.ConditionExpression = aws.String("attribute_not_exists(pk)")
	}
	items := []types.TransactWriteItem{{Put: head}}
	var expires types.AttributeValue
	if a.opts.Retention > 0 {
		expires = num((fedAt + a.opts.Retention.Milliseconds() + 999) / 1000)
	}
	written := map[string]bool{}
	for n, i := range accepted {
		c := batch[i].c
		item := map[string]types.AttributeValue{
			attrPK: str(pk), attrSK: str(positionSK(st.next + int64(n))), attrEvent: str(string(c.Event)),
			attrFedAt: num(fedAt), attrAggregate: str(c.Aggregate), attrVersion: num(c.Version),
		}
		if expires != nil {
			item[attrExpiresAt] = expires
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(a.table), Item: item,
			ConditionExpression: aws.String("attribute_not_exists(pk)")}})
		written[c.Aggregate] = true
	}
	for agg := range written {
		g := &types.Put{TableName: aws.String(a.table), Item: map[string]types.AttributeValue{
			attrPK: str(guardPK(system, tenant, agg)), attrSK: str(skGuard), attrAggregate: str(agg), attrVersion: num(last[agg]),
		}}
		if seen[agg] {
			g.ConditionExpression = aws.String("#v = :v")
			g.ExpressionAttributeNames = map[string]string{"#v": attrVersion}
			g.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(st.guards[agg])}
		} else {
			g.ConditionExpression = aws.String("attribute_not_exists(pk)")
		}
		items = append(items, types.TransactWriteItem{Put: g})
	}
	_, err := a.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return err
}
