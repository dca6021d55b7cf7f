package projector

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/streams"
)

// feedHook appends every record the projector has applied to the tenant's change feed
// (docs/events.md): the feed is built off the projector's work, never by a third reader
// of the stream.
type feedHook struct {
	appender *changefeed.Appender
	db       changefeed.ReadDB
}

// Feed makes the handler append every record it has projected to the change feed. db
// reads the command log (a rename's previous version, recorded under the old name).
func (h *Handler) Feed(a *changefeed.Appender, db changefeed.ReadDB) {
	h.feed = &feedHook{appender: a, db: db}
}

// appendChange runs after the record's views are written: a failure here is retried with
// the record, whose views are then written again as no-ops.
func (h *Handler) appendChange(ctx context.Context, rec streams.Record, env events.Envelope) error {
	if h.feed == nil {
		return nil
	}
	c, err := changefeed.FromEnvelope(rec.System, rec.Tenant, env)
	if err != nil {
		// A record the feed cannot express must not hold up the aggregate's later
		// records (their views are written already): it is left out, loudly.
		h.log.Error("a change left out of the change feed", zap.String("tenant", rec.System+"/"+rec.Tenant),
			zap.String("aggregate", identity.LogKey(env.Entity())), zap.Int64("version", env.Version),
			zap.String("event_type", string(env.Type)), zap.Error(err))
		return nil
	}
	if c.Requires > 0 {
		// A rename's previous change is recorded under the old name (another partition,
		// maybe another shard): the feed waits for it.
		switch r := env.Payload.(type) {
		case *events.UserRenamed:
			c.RequiresAt, err = h.recordedAt(ctx, rec, events.KindUser, r.PreviousUsername, r.PreviousVersion)
		case *events.GroupRenamed:
			c.RequiresAt, err = h.recordedAt(ctx, rec, events.KindGroup, r.PreviousKey, r.PreviousVersion)
		}
		if err != nil {
			return err
		}
	}
	if err := h.feed.appender.Append(ctx, c); err != nil {
		return fmt.Errorf("change feed %s v%d: %w", identity.LogKey(env.Entity()), env.Version, err)
	}
	return nil
}

// recordedAt is when an aggregate's history record was recorded; zero when it is not in
// the command log any more.
func (h *Handler) recordedAt(ctx context.Context, rec streams.Record, kind events.AggregateKind, key string, version int64) (time.Time, error) {
	row, err := h.tenants.Get(ctx, rec.System, rec.Tenant)
	if err != nil {
		return time.Time{}, fmt.Errorf("tenant %s/%s: %w", rec.System, rec.Tenant, err)
	}
	out, err := h.feed.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(row.CommandsTable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: dynamo.AggregateID(kind, key)},
			"sk": &types.AttributeValueMemberS{Value: dynamo.HistorySK(version)},
		},
		ProjectionExpression: aws.String("recorded_at_ms"),
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the history record before a rename: %w", err)
	}
	n, ok := out.Item["recorded_at_ms"].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, nil
	}
	var ms int64
	if _, err := fmt.Sscan(n.Value, &ms); err != nil {
		return time.Time{}, fmt.Errorf("recorded_at_ms %q: %w", n.Value, err)
	}
	return time.UnixMilli(ms), nil
}
