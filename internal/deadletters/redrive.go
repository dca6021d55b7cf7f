package deadletters

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/streams"
)

// RedriveResult says what a Redrive did.
type RedriveResult struct {
	// Applied is the number of dead letters applied and deleted.
	Applied int
	// Failed holds, per aggregate that stopped, the dead letter that failed again (its
	// Reason is the new error; its Record is left out); the aggregate's later dead letters
	// stay in place. It keeps the first MaxFailedKept; FailedCount counts them all.
	Failed      []Letter
	FailedCount int
	// More says the time budget ran out before the end of the aggregates was reached: the
	// next Redrive of the same filter starts where this one stopped (and wraps around after
	// the last), so every aggregate gets its turn however many keep failing.
	More bool
}

// MaxFailedKept bounds RedriveResult.Failed: the result of a re-drive over a hundred
// thousand failing aggregates must not hold them all.
const MaxFailedKept = 100

const (
	// redrivePage is how many dead letters of an aggregate are read at once: at most this
	// many decoded records (each up to ~800 KB) are held in memory.
	redrivePage = 8
	// markerPage is how many markers a Query reads at once.
	markerPage = 100
	// keyFloor and keyCeiling bound every sort key of the markers' partition.
	keyFloor   = "\x01"
	keyCeiling = "\U0010FFFF"
)

// Redrive applies the dead letters matching f, aggregate by aggregate in sequence order,
// deleting each one applied. The first failure of an aggregate stops that aggregate (its
// later dead letters stay, keeping order) and is recorded on the dead letter; other
// aggregates go on. Records parked by a running consumer while the re-drive works are
// picked up too.
//
// It reads the markers a page at a time and an aggregate's dead letters a few at a time,
// so its memory does not grow with the store. It stops starting aggregates once budget
// has passed (0: no budget of its own) or ctx's deadline is near, and says More; the next
// Redrive of f goes on from there to the last aggregate, and the one after it starts from
// the first again. It returns an error only when the store itself fails or ctx ends.
func (s *Store) Redrive(ctx context.Context, f Filter, apply func(context.Context, streams.Record) error, budget time.Duration) (RedriveResult, error) {
	var res RedriveResult
	prefix, err := f.prefix()
	if err != nil {
		return res, err
	}
	deadline := s.deadline(ctx, budget)
	cursorKey := "cursor#" + prefix
	cursor, err := s.readCursor(ctx, cursorKey)
	if err != nil {
		return res, err
	}
	lo := prefix + keyFloor
	if cursor != "" {
		lo = cursor
	}
	stopAt, err := s.redriveRange(ctx, lo, prefix+keyCeiling, apply, deadline, &res)
	if err != nil {
		return res, err
	}
	if stopAt != "" {
		res.More = true
		return res, s.writeCursor(ctx, cursorKey, stopAt)
	}
	if cursor != "" {
		return res, s.writeCursor(ctx, cursorKey, "")
	}
	return res, nil
}

// deadline is when a re-drive stops starting work: its budget, or a margin before ctx's
// deadline (a tenth of what is left, at least a second) to write down where it stopped.
func (s *Store) deadline(ctx context.Context, budget time.Duration) time.Time {
	var d time.Time
	if budget > 0 {
		d = s.now().Add(budget)
	}
	if cd, ok := ctx.Deadline(); ok {
		margin := max(time.Until(cd)/10, time.Second)
		if cd = cd.Add(-margin); d.IsZero() || cd.Before(d) {
			d = cd
		}
	}
	return d
}

func (s *Store) pastDeadline(deadline time.Time) bool {
	return !deadline.IsZero() && !s.now().Before(deadline)
}

// redriveRange re-drives the aggregates whose markers lie in [lo, hi], a page of markers
// at a time; it returns the marker key to start from next time when the deadline stopped it.
func (s *Store) redriveRange(ctx context.Context, lo, hi string, apply func(context.Context, streams.Record) error, deadline time.Time, res *RedriveResult) (string, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#c = :c AND #k BETWEEN :lo AND :hi"),
		ProjectionExpression:     aws.String("#k, #sys, #t, #tab, #a"),
		ExpressionAttributeNames: map[string]string{"#c": attrConsumer, "#k": attrEntryKey, "#sys": attrSystem, "#t": attrTenant, "#tab": attrTable, "#a": attrAggregate},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": str(s.markers()), ":lo": str(lo), ":hi": str(hi),
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(markerPage),
	}
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return "", fmt.Errorf("query dead-letter markers of %s: %w", s.consumer, err)
		}
		for _, item := range page.Items {
			k := getS(item, attrEntryKey)
			if s.pastDeadline(deadline) {
				return k, nil
			}
			a := Aggregate{getS(item, attrSystem), getS(item, attrTenant), getS(item, attrTable), getS(item, attrAggregate)}
			applied, failed, done, err := s.redriveAggregate(ctx, a, apply, deadline)
			res.Applied += applied
			if err != nil {
				return "", err
			}
			if failed != nil {
				res.FailedCount++
				if len(res.Failed) < MaxFailedKept {
					res.Failed = append(res.Failed, *failed)
				}
			}
			if !done {
				return k, nil
			}
		}
	}
	return "", nil
}

// redriveAggregate applies one aggregate's dead letters in order until one fails, none is
// left (done) or the deadline passes (not done).
func (s *Store) redriveAggregate(ctx context.Context, a Aggregate, apply func(context.Context, streams.Record) error, deadline time.Time) (applied int, failed *Letter, done bool, err error) {
	sinceMark := 0
	for {
		letters, err := s.firstEntries(ctx, a.key(), redrivePage)
		if err != nil {
			return applied, nil, false, err
		}
		if len(letters) == 0 {
			if err := s.unmark(ctx, a); err != nil {
				return applied, nil, false, err
			}
			// A consumer may have parked a record behind the marker just deleted.
			again, err := s.firstEntries(ctx, a.key(), 1)
			if err != nil || len(again) == 0 {
				return applied, nil, err == nil, err
			}
			if err := s.setMarker(ctx, a, again[0].SequenceNumber, 1); err != nil {
				return applied, nil, false, err
			}
			sinceMark = 0
			continue
		}
		for _, l := range letters {
			if err := ctx.Err(); err != nil {
				return applied, nil, false, err
			}
			if s.pastDeadline(deadline) {
				return applied, nil, false, s.advanceMarker(ctx, a, l.SequenceNumber, sinceMark)
			}
			if aerr := apply(ctx, l.Record); aerr != nil {
				l.Reason = truncate(aerr.Error(), maxReason)
				l.RedriveFailures++
				if err := s.noteRedriveFailure(ctx, l); err != nil {
					return applied, nil, false, err
				}
				if err := s.advanceMarker(ctx, a, l.SequenceNumber, sinceMark); err != nil {
					return applied, nil, false, err
				}
				l.Record = streams.Record{}
				return applied, &l, true, nil
			}
			if err := s.deleteEntry(ctx, l); err != nil {
				return applied, nil, false, err
			}
			applied++
			sinceMark++
		}
	}
}

func (s *Store) readCursor(ctx context.Context, key string) (string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.key(s.cursors(), key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", fmt.Errorf("read where the last re-drive stopped: %w", err)
	}
	return getS(out.Item, attrNext), nil
}

// writeCursor records where the next re-drive starts; empty deletes it.
func (s *Store) writeCursor(ctx context.Context, key, next string) error {
	var err error
	if next == "" {
		_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: s.key(s.cursors(), key)})
	} else {
		item := s.key(s.cursors(), key)
		item[attrNext] = str(next)
		_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item})
	}
	if err != nil {
		return fmt.Errorf("record where the re-drive stopped: %w", err)
	}
	return nil
}

// Tenant names one tenant with dead letters.
type Tenant struct{ System, Tenant string }

// Tenants passes each tenant matching f that has dead letters to fn, reading one marker
// per tenant (it skips from one tenant to the next).
func (s *Store) Tenants(ctx context.Context, f Filter, fn func(Tenant) error) error {
	prefix, err := f.prefix()
	if err != nil {
		return err
	}
	lo, hi := prefix+keyFloor, prefix+keyCeiling
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                aws.String(s.table),
			KeyConditionExpression:   aws.String("#c = :c AND #k BETWEEN :lo AND :hi"),
			ProjectionExpression:     aws.String("#sys, #t"),
			ExpressionAttributeNames: map[string]string{"#c": attrConsumer, "#k": attrEntryKey, "#sys": attrSystem, "#t": attrTenant},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":c": str(s.markers()), ":lo": str(lo), ":hi": str(hi),
			},
			Limit: aws.Int32(1),
		})
		if err != nil {
			return fmt.Errorf("query dead-letter markers of %s: %w", s.consumer, err)
		}
		if len(out.Items) == 0 {
			return nil
		}
		t := Tenant{getS(out.Items[0], attrSystem), getS(out.Items[0], attrTenant)}
		if err := fn(t); err != nil {
			return err
		}
		// "$" sorts right after "#": past every key of this tenant.
		lo = escapeKeyPart(t.System) + "#" + escapeKeyPart(t.Tenant) + "$"
	}
}
