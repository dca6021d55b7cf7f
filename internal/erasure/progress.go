package erasure

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/bounded"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// Bounded work (docs/erasure.md, "The bound"): each call of Step works until a soft
// deadline — its caller's deadline (a Lambda invocation's) less Margin, and at most
// Budget — and keeps its position in the ledger entry, so that the next call (the next
// delivery of the record, or the resume task) goes on from there.
const (
	// DefaultBudget is the longest a call of Step works (the long-running projector's
	// bound; a Lambda invocation's deadline usually comes first).
	DefaultBudget = 20 * time.Second
	// DefaultMargin is the time a call keeps before its caller's deadline: for the call
	// that is under way when the soft deadline passes, and for the answer.
	DefaultMargin = 3 * time.Second
	// segmentItems bounds the items of one segment of a table Scan (dynamo.ScanSegments):
	// a call stops between segments, and its position is the next segment's number.
	segmentItems = 1000
)

// The first pass's phases, in order; the ledger keeps the one a call stopped in
// (`p1_phase`), and for a Scan the next segment (`p1_seg` of `p1_segs`). A position is a
// number, never a key: a Scan's last key would name someone (the ledger names no one).
const (
	phaseStart       = ""
	phaseGroups      = "groups"      // group histories, memberships: the member index, or a Scan of the write table
	phaseReadSide    = "read_side"   // the read and activity tables
	phaseIdempotency = "idempotency" // Scan of the stage's Idempotency-Key table
	phaseShared      = "shared"      // dead letters, sync status
	phasePartition   = "partition"   // the user's partition, but its tombstone
)

// Progress is where the first pass of an erasure stopped.
type Progress struct {
	Phase     string
	Seg, Segs int
	// At is when a call last saved it (zero: never).
	At time.Time
}

// errOutOfTime stops a call at its soft deadline; Step answers "again now".
var errOutOfTime = errors.New("erasure: out of time for this call, to be continued")

// bounded is ctx with the soft deadline of one call.
func (x *Eraser) bounded(ctx context.Context) context.Context {
	return bounded.Limits{Budget: x.opts.Budget, Margin: x.opts.Margin}.Context(ctx)
}

// pass is one call's share of a first pass: the position it starts from, and how it
// keeps the next (save nil: not kept, as when the ledger is re-applied to restored
// tables, which runs everything at once).
type pass struct {
	prog Progress
	save func(ctx context.Context, p Progress) error
}

// at reports whether the pass is in phase.
func (p *pass) at(phase string) bool { return p.prog.Phase == phase }

// next moves the pass to phase, kept.
func (p *pass) next(ctx context.Context, phase string) error {
	p.prog = Progress{Phase: phase}
	if p.save == nil {
		return nil
	}
	return p.save(ctx, p.prog)
}

// segments is the number of segments a Scan of table is cut into, from its size as
// DescribeTable last reported it.
func (x *Eraser) segments(ctx context.Context, table string) (int, error) {
	n, err := dynamo.ScanSegments(ctx, x.db, table, segmentItems)
	if err != nil {
		return 0, fmt.Errorf("describe %s: %w", table, errors.Join(dynamo.Translate(err), missingErr(err)))
	}
	return n, nil
}

// scanSegments runs in, a Scan of a table, segment by segment from the pass's position,
// calling page for each page and done after each segment; between segments the position
// is kept and a call past its soft deadline stops (errOutOfTime). A segment cut short is
// read again by the next call: what it did is done again, and changes nothing.
func (x *Eraser) scanSegments(ctx context.Context, p *pass, in *dynamodb.ScanInput,
	page func([]map[string]types.AttributeValue) error, done func() error) error {
	if p.prog.Segs == 0 {
		n, err := x.segments(ctx, aws.ToString(in.TableName))
		if err != nil {
			return err
		}
		p.prog.Segs, p.prog.Seg = n, 0
	}
	for first := true; p.prog.Seg < p.prog.Segs; first = false {
		if !first && bounded.Passed(ctx) {
			return errOutOfTime
		}
		in.Segment, in.TotalSegments = aws.Int32(int32(p.prog.Seg)), aws.Int32(int32(p.prog.Segs))
		in.ExclusiveStartKey = nil
		for {
			out, err := x.db.Scan(ctx, in)
			if err != nil {
				return fmt.Errorf("scan %s (segment %d of %d): %w", aws.ToString(in.TableName), p.prog.Seg, p.prog.Segs,
					errors.Join(dynamo.Translate(err), missingErr(err)))
			}
			if err := page(out.Items); err != nil {
				return err
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
		if err := done(); err != nil {
			return err
		}
		p.prog.Seg++
		if p.save != nil {
			if err := p.save(ctx, p.prog); err != nil {
				return err
			}
		}
	}
	return nil
}

// SaveProgress keeps where an erasure's first pass stopped.
func (l *Ledger) SaveProgress(ctx context.Context, system, tenant, id string, p Progress) error {
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.table), Key: key(system, tenant, id),
		UpdateExpression:    aws.String("SET p1_phase = :ph, p1_seg = :seg, p1_segs = :segs, progress_at = :at"),
		ConditionExpression: aws.String("attribute_exists(erasure_id)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":ph": s(p.Phase), ":seg": n(p.Seg), ":segs": n(p.Segs), ":at": s(dynamo.FormatTime(l.now())),
		},
	})
	if err != nil {
		return fmt.Errorf("keep the position of erasure %s: %w", id, dynamo.Translate(err))
	}
	return nil
}

// AddGroups adds groups to those the second pass visits again (found by a segment of the
// first pass's Scan).
func (l *Ledger) AddGroups(ctx context.Context, system, tenant, id string, groups []string) error {
	if len(groups) == 0 {
		return nil
	}
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.table), Key: key(system, tenant, id),
		UpdateExpression:          aws.String("ADD pending_groups :g"),
		ConditionExpression:       aws.String("attribute_exists(erasure_id)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": &types.AttributeValueMemberSS{Value: groups}},
	})
	if err != nil {
		return fmt.Errorf("record groups of erasure %s: %w", id, dynamo.Translate(err))
	}
	return nil
}

func n(v int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }

func attrN(it map[string]types.AttributeValue, name string) int {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		i, _ := strconv.Atoi(v.Value)
		return i
	}
	return 0
}

// decodeProgress reads an entry's position.
func decodeProgress(it map[string]types.AttributeValue) Progress {
	p := Progress{Phase: attrS(it, "p1_phase"), Seg: attrN(it, "p1_seg"), Segs: attrN(it, "p1_segs")}
	if at, err := dynamo.ParseTime(attrS(it, "progress_at")); err == nil {
		p.At = at
	}
	return p
}
