// Package memberindex backfills the member index (internal/dynamo/memberindex.go,
// docs/erasure.md "The member index") of a tenant whose write table predates it, so that
// its erasures find the group records naming their person by the index instead of a Scan
// of the whole write table.
//
// The backfill Scans the write table segment by segment (a parallel Scan's segments, read
// one after the other), writes the index items of every group record that names members
// — the ids dynamo.MemberIndexItems finds, the live path's own rule — and, once every
// segment is done, writes the tenant's mark `memberidx` / `complete`: from then on
// erasures use the index. Its position is a segment number in a state item of the write
// table, `memberidx` / `backfill`, never a key (a Scan's last key may be `user#<name>`,
// which an erasure would have to chase); a call does bounded work (its budget, or its
// context's deadline less a margin) and the next call goes on from the position, so a
// crash or a Lambda deadline costs at most the segment under way. A lease on the state
// item keeps two processes from working on one table at once.
//
// Why the index is complete when the mark is written, though writes go on meanwhile:
//   - A group record committed before the Scan reads its segment is read by the Scan and
//     indexed by the backfill.
//   - A group record committed after its segment was read wrote its own index items in its
//     transaction, or a pending mark that its writer replaces with the items after the
//     commit (dynamo.memberIndexWrites, whatever the mark says: the live path never looks
//     at it); a pending mark a dead writer left is read by every erasure, and the backfill
//     replaces the marks it finds.
//
// So every group record is indexed by the time the last segment is done, and the mark
// that follows tells no lie. An erasure that starts before it keeps the Scan.
//
// An erasure racing the backfill (by the Scan, the mark being absent) must not be undone
// by it: the backfill may read a record naming the person before the erasure rewrites it
// and write its index item after the erasure deleted the person's items. So after writing
// the items of a page the backfill reads the records again (consistently) and deletes
// the items of the ids a record names no more. Either the erasure's rewrite came before
// that read (the item is deleted here), or after the item's write, and then the
// erasure's deletion of its ids' items, which follows its rewrite, deletes it.
package memberindex

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/bounded"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/events"
)

// DB is what the backfill calls.
type DB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

const (
	// DefaultBudget is the longest one call works (the long-running projector's bound; a
	// Lambda invocation's deadline usually comes first).
	DefaultBudget = 20 * time.Second
	// DefaultMargin is the time a call keeps before its context's deadline.
	DefaultMargin = 3 * time.Second
	// segmentItems bounds the items of a segment of the Scan (dynamo.ScanSegments): one
	// Scan page (1 MB at most) and its writes.
	segmentItems = 1000
	// leaseSlack is how long the lease outlasts a call's soft deadline: the segment under
	// way then, and the position's save. Requests of the call end with the lease.
	leaseSlack = 15 * time.Second

	stateID = "memberidx"
	stateSK = "backfill"
)

// Options configure an Indexer.
type Options struct {
	// Budget bounds one call's work (0: DefaultBudget); Margin is the time it keeps before
	// its context's deadline (0: DefaultMargin).
	Budget, Margin time.Duration
	// SegmentItems is about how many items one segment holds (0: 1000); PageSize, when
	// set, is the Limit of each Scan request. Tests make both small.
	SegmentItems, PageSize int
	Log                    *zap.Logger
}

// Indexer backfills the member index of write tables.
type Indexer struct {
	db   DB
	reg  *events.Registry
	opts Options
	// complete are the tables known to carry the mark (it is never removed).
	complete sync.Map
}

// New is an Indexer.
func New(db DB, reg *events.Registry, opts Options) *Indexer {
	if opts.Budget <= 0 {
		opts.Budget = DefaultBudget
	}
	if opts.Margin <= 0 {
		opts.Margin = DefaultMargin
	}
	if opts.SegmentItems <= 0 {
		opts.SegmentItems = segmentItems
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	return &Indexer{db: db, reg: reg, opts: opts}
}

// Progress is where a table's backfill stands.
type Progress struct {
	// Seg of Segs segments are done (Segs 0: not started).
	Seg, Segs int
	// Records are the group records indexed so far, Items the index items they have.
	Records, Items int64
	// Complete: the table carries the mark; nothing is left. (The call that wrote it
	// answers the backfill's last position and counts too.)
	Complete bool
	// HeldUntil, when set, is when the lease another process holds runs out: this call did
	// nothing.
	HeldUntil time.Time
}

func (p Progress) String() string {
	switch {
	case p.Complete && p.Segs == 0:
		return "complete"
	case p.Segs == 0:
		return "not started"
	}
	return fmt.Sprintf("segment %d of %d done, %d group records indexed (%d index items)", p.Seg, p.Segs, p.Records, p.Items)
}

// bounded is ctx with the time one call's work stops at (between segments).
func (ix *Indexer) bounded(ctx context.Context) context.Context {
	return bounded.Limits{Budget: ix.opts.Budget, Margin: ix.opts.Margin}.Context(ctx)
}

func stateKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": s(stateID), "sk": s(stateSK)}
}

// Complete reports whether table carries the member index's mark.
func (ix *Indexer) Complete(ctx context.Context, table string) (bool, error) {
	if _, ok := ix.complete.Load(table); ok {
		return true, nil
	}
	out, err := ix.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: dynamo.MemberIndexMarkKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("read the member index's mark of %s: %w", table, dynamo.Translate(err))
	}
	if out.Item != nil {
		ix.complete.Store(table, true)
	}
	return out.Item != nil, nil
}

// Status is where table's backfill stands, without working on it.
func (ix *Indexer) Status(ctx context.Context, table string) (Progress, error) {
	if done, err := ix.Complete(ctx, table); err != nil || done {
		return Progress{Complete: done}, err
	}
	out, err := ix.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: stateKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Progress{}, fmt.Errorf("read the member index backfill of %s: %w", table, dynamo.Translate(err))
	}
	return decodeState(out.Item), nil
}

func decodeState(it map[string]types.AttributeValue) Progress {
	return Progress{Seg: int(attrN(it, "seg")), Segs: int(attrN(it, "segs")), Records: attrN(it, "records"), Items: attrN(it, "items")}
}

// Step does one call's share of table's backfill: segments from its position until the
// call's soft deadline, then the mark when none is left. A call that finds another
// process's lease does nothing and says until when it is held.
func (ix *Indexer) Step(ctx context.Context, table string) (p Progress, err error) {
	if done, err := ix.Complete(ctx, table); err != nil || done {
		return Progress{Complete: done}, err
	}
	bctx := ix.bounded(ctx)
	until := bounded.Deadline(bctx).Add(leaseSlack)
	owner := leaseOwner()
	st, held, err := ix.takeLease(ctx, table, owner, until)
	if err != nil || !held.IsZero() {
		st.HeldUntil = held
		return st, err
	}
	finished := false
	defer func() {
		if finished {
			return
		}
		if gerr := ix.giveBackLease(context.WithoutCancel(ctx), table, owner); gerr != nil && err == nil {
			err = gerr
		}
	}()
	// Nothing of this call goes out after its lease has run out.
	lctx, cancel := context.WithDeadline(bctx, until)
	defer cancel()
	if st.Segs == 0 {
		n, err := ix.segments(lctx, table)
		if err != nil {
			return st, err
		}
		if err := ix.saveSegs(lctx, table, owner, n); err != nil {
			return st, ignoreLost(err)
		}
		st.Segs = n
	}
	for first := true; st.Seg < st.Segs; first = false {
		if !first && bounded.Passed(lctx) {
			return st, nil
		}
		records, items, err := ix.segment(lctx, table, st.Seg, st.Segs)
		if err != nil {
			return st, err
		}
		if err := ix.advance(lctx, table, owner, st.Seg, records, items); err != nil {
			return st, ignoreLost(err)
		}
		st.Seg++
		st.Records += records
		st.Items += items
	}
	if _, err := ix.db.PutItem(lctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: dynamo.MemberIndexMarkKey()}); err != nil {
		return st, fmt.Errorf("mark the member index of %s complete: %w", table, dynamo.Translate(err))
	}
	ix.complete.Store(table, true)
	ix.opts.Log.Info("member index backfilled", zap.String("table", table), zap.Int64("group_records", st.Records), zap.Int64("index_items", st.Items))
	// The state goes with the lease (it is nothing once the mark is there).
	_, err = ix.db.DeleteItem(lctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: stateKey(),
		ConditionExpression: aws.String("lease_owner = :o"), ExpressionAttributeValues: map[string]types.AttributeValue{":o": s(owner)}})
	if err != nil && !sdkerr.ConditionFailed(err) {
		return Progress{Complete: true}, fmt.Errorf("remove the member index backfill's state of %s: %w", table, dynamo.Translate(err))
	}
	finished = true
	st.Complete = true
	return st, nil
}

// ignoreLost is err, but nil for a lease lost: the call stops, and the process that took
// the lease goes on.
func ignoreLost(err error) error {
	if errors.Is(err, errLeaseLost) {
		return nil
	}
	return err
}

// errLeaseLost stops a call whose lease another process took (it ran out).
var errLeaseLost = errors.New("member index backfill: the lease ran out and another process took it")

// takeLease gives table's backfill lease to owner until until, if no other owner holds
// one that runs past now; it answers the state, or when the holder's lease runs out.
func (ix *Indexer) takeLease(ctx context.Context, table, owner string, until time.Time) (Progress, time.Time, error) {
	out, err := ix.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: stateKey(),
		UpdateExpression:    aws.String("SET lease_owner = :o, lease_until = :u"),
		ConditionExpression: aws.String("attribute_not_exists(lease_until) OR lease_until < :now OR lease_owner = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": s(owner), ":u": num(until.UnixMilli()), ":now": num(time.Now().UnixMilli()),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err == nil {
		return decodeState(out.Attributes), time.Time{}, nil
	}
	if !sdkerr.ConditionFailed(err) {
		return Progress{}, time.Time{}, fmt.Errorf("take the member index backfill's lease of %s: %w", table, dynamo.Translate(err))
	}
	got, err := ix.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: stateKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Progress{}, time.Time{}, fmt.Errorf("read the member index backfill's lease of %s: %w", table, dynamo.Translate(err))
	}
	held := time.UnixMilli(attrN(got.Item, "lease_until"))
	if got.Item == nil || held.IsZero() {
		held = time.Now() // given back in between: the next call takes it
	}
	return decodeState(got.Item), held, nil
}

func (ix *Indexer) giveBackLease(ctx context.Context, table, owner string) error {
	if err := dynamo.GiveBackLease(ctx, ix.db, table, stateKey(), owner); err != nil {
		return fmt.Errorf("give back the member index backfill's lease of %s: %w", table, err)
	}
	return nil
}

// saveSegs starts the backfill's position: segs segments, none done.
func (ix *Indexer) saveSegs(ctx context.Context, table, owner string, segs int) error {
	_, err := ix.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: stateKey(),
		UpdateExpression:         aws.String("SET seg = :z, segs = :n, records = :z, #items = :z, started_at = :at"),
		ConditionExpression:      aws.String("lease_owner = :o"),
		ExpressionAttributeNames: map[string]string{"#items": "items"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":z": num(0), ":n": num(int64(segs)), ":o": s(owner), ":at": s(dynamo.FormatTime(time.Now())),
		},
	})
	return leaseErr(table, err)
}

// advance keeps segment seg done (records and items more indexed), if the call still
// holds the lease.
func (ix *Indexer) advance(ctx context.Context, table, owner string, seg int, records, items int64) error {
	_, err := ix.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: stateKey(),
		UpdateExpression:         aws.String("SET seg = :next, updated_at = :at ADD records :r, #items :i"),
		ConditionExpression:      aws.String("lease_owner = :o AND seg = :cur"),
		ExpressionAttributeNames: map[string]string{"#items": "items"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":next": num(int64(seg + 1)), ":cur": num(int64(seg)), ":r": num(records), ":i": num(items),
			":o": s(owner), ":at": s(dynamo.FormatTime(time.Now())),
		},
	})
	return leaseErr(table, err)
}

func leaseErr(table string, err error) error {
	switch {
	case err == nil:
		return nil
	case sdkerr.ConditionFailed(err):
		return errLeaseLost
	}
	return fmt.Errorf("keep the member index backfill's position of %s: %w", table, dynamo.Translate(err))
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func attrN(it map[string]types.AttributeValue, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func attrS(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// leaseOwner is a fresh owner name for one call.
func leaseOwner() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
