package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// ReadDB is the part of DynamoDB the reader uses: reads only.
type ReadDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ ReadDB = (*dynamodb.Client)(nil)

// ErrExpired answers a position older than the retention: changes after it may be gone.
var ErrExpired = errors.New("changefeed: the cursor is older than the feed's retention")

// clockMargin (at most a tenth of the retention) is taken off the time a position is known complete, so that a writer whose
// clock is a little behind the reader's never has a change expire before the cursor
// pointing at it does.
const clockMargin = time.Minute

// Position is where a walk of the feed stands: every change at or before After has been
// answered (or had expired), and that was known at Seen. It is what a cursor carries.
type Position struct {
	After int64
	Seen  time.Time
}

// Page is one answer: the changes after a position, in feed order, and where to go on.
type Page struct {
	Events []json.RawMessage
	// At is the position of each of Events (a consumer that stops within a page, as a
	// webhook endpoint does at a failed delivery, goes on from one of them).
	At   []Position
	Next Position
}

// Reader reads a feed table.
type Reader struct {
	db        ReadDB
	table     string
	retention time.Duration
	now       func() time.Time
}

// NewReader reads the feed table named table; retention is SSO_EVENTS_RETENTION (0: no
// change expires). now is the clock (nil: time.Now).
func NewReader(db ReadDB, table string, retention time.Duration, now func() time.Time) *Reader {
	if now == nil {
		now = time.Now
	}
	return &Reader{db: db, table: table, retention: retention, now: now}
}

// Check refuses a position past the retention with ErrExpired.
func (r *Reader) Check(from Position) error {
	if r.retention > 0 && from.Seen.Before(r.now().Add(-r.retention)) {
		return ErrExpired
	}
	return nil
}

// Head is the watermark: every change at a position below it is visible (the transaction
// that moved the head past it wrote it), and every change that becomes visible later takes
// a position at or above it.
func (r *Reader) Head(ctx context.Context, system, tenant string) (int64, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{attrPK: str(feedPK(system, tenant)), attrSK: str(skHead)}})
	if err != nil {
		if sdkerr.ResourceNotFound(err) {
			return 1, nil // no projector has made the table yet: nothing was appended
		}
		return 0, fmt.Errorf("read the change feed's head: %w", err)
	}
	if out.Item == nil {
		return 1, nil
	}
	return numAttr(out.Item, attrNext), nil
}

// Read answers up to limit changes after from (the start of the feed: the zero Position).
// It reads the head first and nothing at or beyond it, so Next never passes a change that
// is not visible yet.
func (r *Reader) Read(ctx context.Context, system, tenant string, from Position, limit int) (Page, error) {
	start := from == Position{}
	if !start {
		if err := r.Check(from); err != nil {
			return Page{}, err
		}
	}
	seen := r.now()
	head, err := r.Head(ctx, system, tenant)
	if err != nil {
		return Page{}, err
	}
	page := Page{Events: []json.RawMessage{}, Next: from}
	if head-1 <= from.After {
		page.Next = r.complete(from.After, seen)
		return page, nil
	}
	cutoff := int64(0)
	if r.retention > 0 {
		cutoff = seen.Add(-r.retention).UnixMilli()
	}
	in := &dynamodb.QueryInput{
		TableName:              aws.String(r.table),
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :from AND :to"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(feedPK(system, tenant)), ":from": str(positionSK(from.After + 1)), ":to": str(positionSK(head - 1)),
		},
	}
	for {
		in.Limit = aws.Int32(int32(limit - len(page.Events)))
		out, err := r.db.Query(ctx, in)
		if err != nil {
			return Page{}, fmt.Errorf("read the change feed: %w", err)
		}
		for _, item := range out.Items {
			p, err := positionOf(strAttr(item, attrSK))
			if err != nil {
				return Page{}, fmt.Errorf("change feed item %q: %w", strAttr(item, attrSK), err)
			}
			fed := numAttr(item, attrFedAt)
			if fed > cutoff || cutoff == 0 {
				page.Events = append(page.Events, json.RawMessage(strAttr(item, attrEvent)))
				page.At = append(page.At, Position{After: p, Seen: time.UnixMilli(fed)})
			}
			// An expired change is passed over: only a walk from the start meets one.
			page.Next = Position{After: p, Seen: time.UnixMilli(fed)}
		}
		if len(page.Events) >= limit {
			return page, nil
		}
		if out.LastEvaluatedKey == nil {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	// Everything below the head has been read: the walk is complete as of the head's read.
	page.Next = r.complete(head-1, seen)
	return page, nil
}

func (r *Reader) complete(after int64, seen time.Time) Position {
	margin := clockMargin
	if r.retention > 0 {
		margin = min(margin, r.retention/10)
	}
	return Position{After: after, Seen: seen.Add(-margin)}
}

// Wait polls the head until a change after `after` is visible, ctx ends or until passes;
// it reports whether one is.
func (r *Reader) Wait(ctx context.Context, system, tenant string, after int64, until time.Time, every time.Duration) (bool, error) {
	for {
		head, err := r.Head(ctx, system, tenant)
		if err != nil {
			return false, err
		}
		if head-1 > after {
			return true, nil
		}
		left := time.Until(until)
		if left <= 0 {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-time.After(min(every, left)):
		}
	}
}
