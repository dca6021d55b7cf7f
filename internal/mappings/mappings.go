// Package mappings makes and removes the Lambda event source mappings that feed a tenant's
// command-log stream to the projector and keycloak-sync functions (Lambda mode; docs/aws.md).
//
// One mapping per function per stream, with the settings our order needs: the stream read
// from its start (TRIM_HORIZON: the records written between table creation and mapping
// are not lost), ParallelizationFactor 1 (ESM keeps order per shard only at 1, and ours
// is per aggregate across sort keys), ReportBatchItemFailures (the function tells which
// record stopped its aggregate), bisection on, and finite retries and record age, so a
// batch that keeps failing ends at the failure destination instead of blocking the shard
// for the stream's 24 hours.
//
// Lambda's control plane allows 15 calls per second per account, not raisable; provisioning
// many tenants at once must stay under it, so every call waits for a token of a bucket
// (Pace, default 10/s) shared by the process, and a throttled call is retried after a pause.
package mappings

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Lambda is the part of the Lambda control plane the mappings use; *lambda.Client
// implements it.
type Lambda interface {
	CreateEventSourceMapping(ctx context.Context, in *lambda.CreateEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.CreateEventSourceMappingOutput, error)
	DeleteEventSourceMapping(ctx context.Context, in *lambda.DeleteEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.DeleteEventSourceMappingOutput, error)
	ListEventSourceMappings(ctx context.Context, in *lambda.ListEventSourceMappingsInput, opts ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
	UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

var _ Lambda = (*lambda.Client)(nil)

// Settings of every mapping.
const (
	// BatchSize is the most records one invocation gets.
	BatchSize = 100
	// MaximumRetryAttempts bounds how often ESM retries a failing batch. It is above the
	// functions' own attempts (esm.Config.MaxAttempts), so a record that keeps failing
	// becomes a dead letter of ours, visible to `dead-letters list|redrive`, before ESM
	// gives up on it; ESM's failure destination is the backstop for a function that
	// cannot even store its dead letters.
	MaximumRetryAttempts = 10
	// MaximumRecordAgeSeconds: a record older than this is not retried any more (6 hours;
	// the stream keeps records 24).
	MaximumRecordAgeSeconds = 6 * 60 * 60
	// DefaultPace is the control-plane calls a second the process makes at most: under
	// the account's 15, leaving room for an operator or a deploy at the same time.
	DefaultPace = 10
)

// Config configures Mappings.
type Config struct {
	// Functions are the ARNs of the functions each stream is mapped to (projector,
	// keycloak-sync).
	Functions []string
	// FailureDestinations are the OnFailure destination (an SQS queue or SNS topic ARN) of
	// each function's mappings, by function ARN; a function without one: none. Each
	// consumer has its own: the function reads its queue (esm.Recovery), and an SQS message
	// reaches only one consumer.
	FailureDestinations map[string]string
	// Pace is the calls a second this process makes (default DefaultPace).
	Pace float64
	Log  *zap.Logger
}

// Mappings creates and removes the mappings of tenants' streams.
type Mappings struct {
	lambda Lambda
	cfg    Config
	bucket *rate.Limiter
}

// New is Mappings over the control plane client.
func New(client Lambda, cfg Config) *Mappings {
	if cfg.Pace <= 0 {
		cfg.Pace = DefaultPace
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Mappings{lambda: client, cfg: cfg, bucket: rate.NewLimiter(rate.Limit(cfg.Pace), 1)}
}

// existingRE reads the UUID of the mapping a 409 names.
var existingRE = regexp.MustCompile(`(?i)mapping with UUID ([0-9a-f-]{36})`)

// Ensure makes sure each function has a mapping from streamARN, creating the missing ones.
// It is idempotent: a mapping that exists (Lambda answers 409 naming it) is kept, and
// updated when its settings are not these (an older version's: update.go).
func (m *Mappings) Ensure(ctx context.Context, streamARN string) error {
	for _, fn := range m.cfg.Functions {
		in := m.want(fn, streamARN)
		var out *lambda.CreateEventSourceMappingOutput
		err := m.call(ctx, func(ctx context.Context) (err error) {
			out, err = m.lambda.CreateEventSourceMapping(ctx, in)
			return err
		})
		var conflict *types.ResourceConflictException
		switch {
		case errors.As(err, &conflict):
			id := ""
			if g := existingRE.FindStringSubmatch(conflict.ErrorMessage()); g != nil {
				id = g[1]
			}
			m.cfg.Log.Info("event source mapping exists", zap.String("function", fn), zap.String("stream", streamARN), zap.String("uuid", id))
			if err := m.repairExisting(ctx, fn, streamARN); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("create the event source mapping of %s to %s: %w", streamARN, fn, err)
		default:
			m.cfg.Log.Info("event source mapping created", zap.String("function", fn), zap.String("stream", streamARN),
				zap.String("uuid", aws.ToString(out.UUID)))
		}
	}
	return nil
}

// Remove deletes every mapping of each function from the given streams. Streams are named
// by ARN, never by their table: a table dropped and made again has a new stream whose
// mappings a late drop of the old one must leave alone.
func (m *Mappings) Remove(ctx context.Context, streamARNs ...string) error {
	want := map[string]bool{}
	for _, a := range streamARNs {
		want[a] = true
	}
	for _, fn := range m.cfg.Functions {
		var ids []string
		in := &lambda.ListEventSourceMappingsInput{FunctionName: aws.String(fn), MaxItems: aws.Int32(100)}
		if len(streamARNs) == 1 {
			in.EventSourceArn = aws.String(streamARNs[0])
		}
		for {
			var out *lambda.ListEventSourceMappingsOutput
			err := m.call(ctx, func(ctx context.Context) (err error) {
				out, err = m.lambda.ListEventSourceMappings(ctx, in)
				return err
			})
			if err != nil {
				return fmt.Errorf("list the event source mappings of %s: %w", fn, err)
			}
			for _, c := range out.EventSourceMappings {
				if want[aws.ToString(c.EventSourceArn)] {
					ids = append(ids, aws.ToString(c.UUID))
				}
			}
			if aws.ToString(out.NextMarker) == "" {
				break
			}
			in.Marker = out.NextMarker
		}
		for _, id := range ids {
			err := m.call(ctx, func(ctx context.Context) error {
				_, err := m.lambda.DeleteEventSourceMapping(ctx, &lambda.DeleteEventSourceMappingInput{UUID: aws.String(id)})
				return err
			})
			var gone *types.ResourceNotFoundException
			if err != nil && !errors.As(err, &gone) {
				return fmt.Errorf("delete event source mapping %s: %w", id, err)
			}
			m.cfg.Log.Info("event source mapping deleted", zap.String("function", fn), zap.String("uuid", id))
		}
	}
	return nil
}

// StreamTable is the table of a DynamoDB stream ARN
// (arn:aws:dynamodb:region:account:table/NAME/stream/LABEL); "" for another ARN.
func StreamTable(streamARN string) string {
	_, rest, ok := strings.Cut(streamARN, ":table/")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "/stream/")
	if !ok {
		return ""
	}
	return name
}

// maxThrottled bounds the retries of one call that Lambda throttles.
const maxThrottled = 8

// call makes one control-plane call within the pace, retrying it when Lambda throttles
// it anyway (another process of the account took the tokens).
func (m *Mappings) call(ctx context.Context, f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		if err := m.bucket.Wait(ctx); err != nil {
			return err
		}
		err := f(ctx)
		var throttled *types.TooManyRequestsException
		if !errors.As(err, &throttled) || attempt == maxThrottled {
			return err
		}
		pause := time.Duration(attempt) * 200 * time.Millisecond
		m.cfg.Log.Warn("Lambda throttled a control-plane call; retrying", zap.Int("attempt", attempt), zap.Duration("pause", pause))
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}
