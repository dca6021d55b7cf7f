// Package eventbridge sends every change of the change feed to an Amazon EventBridge bus
// (SSO_EVENTBRIDGE_BUS; API.md "Changes out", docs/events.md "EventBridge").
//
// The publisher is a consumer of the feed, like a webhook endpoint: per tenant, a position
// kept in the shared feed table, advanced only after PutEvents accepted every change up to
// it — so at least once — and a lease, so that of several projector processes only one
// publishes a tenant at a time. Calls are sequential per tenant and hold at most one change
// of an aggregate, and a failed entry is sent again before anything after it: each
// aggregate's changes reach the bus in version order.
package eventbridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// API is the part of EventBridge the publisher calls: PutEvents, nothing else (the stage
// grants only events:PutEvents on the bus).
type API interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, opts ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

var _ API = (*eventbridge.Client)(nil)

// DB is the part of DynamoDB the publisher uses: the feed's reads and its own state item.
type DB interface {
	changefeed.ReadDB
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Tenant names one tenant whose feed is published.
type Tenant struct{ System, Tenant string }

// Config is a publisher's; zero durations take the defaults.
type Config struct {
	// Bus is the bus's name or ARN.
	Bus string
	API API
	DB  DB
	// Table is the feed table ({p}_events); the publisher's state items live there too.
	Table string
	// Tenants lists the tenants to publish.
	Tenants func(ctx context.Context) ([]Tenant, error)
	// Owner names this process in the leases (default: host name, pid and a random part).
	Owner string
	// LeaseDuration is how long a tenant's lease holds without renewal (default 60 s).
	LeaseDuration time.Duration
	// CallTimeout bounds one PutEvents call (default 10 s); a call starts only while the
	// lease has twice that left. LeaseDuration is at least six times CallTimeout.
	CallTimeout time.Duration
	// Interval is how often Run looks for changes without a Notify (default 1 s);
	// TenantsEvery how often it lists the tenants again (default 10 s).
	Interval, TenantsEvery time.Duration
	// MinBackoff, MaxBackoff bound the waits before a call is sent again (100 ms, 20 s).
	MinBackoff, MaxBackoff time.Duration
	Log                    *zap.Logger
	Now                    func() time.Time
}

// Stats are a publisher's counters since it started.
type Stats struct {
	// Published counts the changes the bus accepted; FailedEntries the entries it refused
	// in a partial failure (sent again); CallErrors the calls that failed whole
	// (throttling included; sent again).
	Published, FailedEntries, CallErrors int64
}

// Publisher publishes the feed to a bus.
type Publisher struct {
	cfg    Config
	reader *changefeed.Reader
	wake   chan struct{}

	mu     sync.Mutex
	leases map[Tenant]lease

	metrics struct{ published, failedEntries, callErrors atomic.Int64 }
}

// lease is a tenant's lease as this process holds it.
type lease struct {
	after int64     // the position published up to
	until time.Time // when the lease ends unless renewed
}

// New makes a publisher.
func New(cfg Config) (*Publisher, error) {
	if cfg.Bus == "" || cfg.API == nil || cfg.DB == nil || cfg.Table == "" || cfg.Tenants == nil {
		return nil, errors.New("eventbridge: a publisher needs a bus, an EventBridge client, the feed table and its tenants")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.LeaseDuration, time.Minute)
	def(&cfg.CallTimeout, 10*time.Second)
	def(&cfg.Interval, time.Second)
	def(&cfg.TenantsEvery, 10*time.Second)
	def(&cfg.MinBackoff, 100*time.Millisecond)
	def(&cfg.MaxBackoff, 20*time.Second)
	// A call starts only with two call times of lease left, and the lease is renewed when
	// half gone: half must be more than that.
	if cfg.LeaseDuration < 6*cfg.CallTimeout {
		cfg.LeaseDuration = 6 * cfg.CallTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		cfg.Owner = fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano())
	}
	return &Publisher{cfg: cfg, reader: changefeed.NewReader(cfg.DB, cfg.Table, 0, cfg.Now), wake: make(chan struct{}, 1),
		leases: map[Tenant]lease{}}, nil
}

// Stats are the publisher's counters.
func (p *Publisher) Stats() Stats {
	return Stats{Published: p.metrics.published.Load(), FailedEntries: p.metrics.failedEntries.Load(),
		CallErrors: p.metrics.callErrors.Load()}
}

// Notify wakes Run: a change went into the feed (changefeed.Options.OnAppend).
func (p *Publisher) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run publishes until ctx ends: at every Notify, and every Interval for the changes other
// processes appended. Its leases are given up when it stops.
func (p *Publisher) Run(ctx context.Context) {
	var tenants []Tenant
	var listed time.Time
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		if time.Since(listed) >= p.cfg.TenantsEvery {
			if ts, err := p.cfg.Tenants(ctx); err != nil {
				p.cfg.Log.Warn("eventbridge: list tenants", zap.Error(err))
			} else {
				tenants, listed = ts, time.Now()
			}
		}
		if _, err := p.publish(ctx, tenants); err != nil && ctx.Err() == nil {
			p.cfg.Log.Warn("eventbridge: publish", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			release, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			p.Release(release)
			cancel()
			return
		case <-tick.C:
		case <-p.wake:
		}
	}
}

// Once publishes every tenant's changes up to its head as read now (a scheduled task in
// Lambda mode) and gives its leases up; it answers how many changes it published.
func (p *Publisher) Once(ctx context.Context) (int, error) {
	defer p.Release(context.WithoutCancel(ctx))
	tenants, err := p.cfg.Tenants(ctx)
	if err != nil {
		return 0, err
	}
	return p.publish(ctx, tenants)
}

func (p *Publisher) publish(ctx context.Context, tenants []Tenant) (int, error) {
	total := 0
	var errs []error
	for _, t := range tenants {
		n, err := p.tenant(ctx, t)
		total += n
		if err != nil {
			if ctx.Err() != nil {
				return total, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("%s/%s: %w", t.System, t.Tenant, err))
		}
	}
	return total, errors.Join(errs...)
}

// pageSize is how many changes of a tenant are read at once.
const pageSize = 100

// tenant publishes one tenant's changes after its position, if this process holds (or
// takes) its lease.
func (p *Publisher) tenant(ctx context.Context, t Tenant) (int, error) {
	l, ok, err := p.hold(ctx, t)
	if err != nil || !ok {
		return 0, err
	}
	published := 0
	for {
		changes, err := p.reader.Entries(ctx, t.System, t.Tenant, l.after, pageSize)
		if err != nil || len(changes) == 0 {
			return published, err
		}
		entries := make([]types.PutEventsRequestEntry, len(changes))
		aggregates := make([]string, len(changes))
		for i, c := range changes {
			if entries[i], err = entry(p.cfg.Bus, t.System, t.Tenant, c.Event); err != nil {
				return published, fmt.Errorf("position %d: %w", c.Position, err)
			}
			aggregates[i] = c.Aggregate
		}
		for i := 0; i < len(entries); {
			n := next(entries[i:], aggregates[i:])
			// Before every call the lease is renewed when half gone, and a call starts only
			// while it has more than a call's time left.
			held := func() bool {
				renewed, ok, err := p.hold(ctx, t)
				if err != nil || !ok {
					return false
				}
				l.until = renewed.until
				return p.cfg.Now().Add(2 * p.cfg.CallTimeout).Before(l.until)
			}
			if err := p.send(ctx, entries[i:i+n], held); err != nil {
				if errors.Is(err, errLeaseLost) {
					p.forget(t)
					return published, nil
				}
				return published, err
			}
			if l, err = p.advance(ctx, t, l.after, changes[i+n-1].Position); err != nil {
				if errors.Is(err, errLeaseLost) {
					return published, nil
				}
				return published, err
			}
			published += n
			i += n
		}
	}
}

// State item of a tenant's publishing, in the feed table (docs/events.md).
const (
	attrAfter      = "after"
	attrOwner      = "owner"
	attrLeaseUntil = "lease_until_ms"
)

func (p *Publisher) key(t Tenant) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{
		"pk": &ddbtypes.AttributeValueMemberS{Value: "eventbridge#" + t.System + "/" + t.Tenant},
		"sk": &ddbtypes.AttributeValueMemberS{Value: "bus#" + p.cfg.Bus},
	}
}

func num(n int64) ddbtypes.AttributeValue {
	return &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func (p *Publisher) forget(t Tenant) {
	p.mu.Lock()
	delete(p.leases, t)
	p.mu.Unlock()
}

// hold answers the tenant's lease, taking or renewing it when it has less than half its
// duration left; ok is false when another process holds it.
func (p *Publisher) hold(ctx context.Context, t Tenant) (lease, bool, error) {
	now := p.cfg.Now()
	p.mu.Lock()
	l, ok := p.leases[t]
	p.mu.Unlock()
	if ok && l.until.Sub(now) > p.cfg.LeaseDuration/2 {
		return l, true, nil
	}
	until := now.Add(p.cfg.LeaseDuration)
	out, err := p.cfg.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(p.cfg.Table), Key: p.key(t),
		UpdateExpression:         aws.String("SET #o = :me, #u = :until, #a = if_not_exists(#a, :zero)"),
		ConditionExpression:      aws.String("attribute_not_exists(pk) OR #o = :me OR #u < :now"),
		ExpressionAttributeNames: map[string]string{"#o": attrOwner, "#u": attrLeaseUntil, "#a": attrAfter},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":me": &ddbtypes.AttributeValueMemberS{Value: p.cfg.Owner}, ":until": num(until.UnixMilli()),
			":now": num(now.UnixMilli()), ":zero": num(0),
		},
		ReturnValues: ddbtypes.ReturnValueAllNew,
	})
	if err != nil {
		if _, lost := sdkerr.ConditionFailures(err); lost {
			p.forget(t)
			return lease{}, false, nil
		}
		return lease{}, false, fmt.Errorf("take the tenant's EventBridge lease: %w", err)
	}
	l = lease{until: until}
	if n, ok := out.Attributes[attrAfter].(*ddbtypes.AttributeValueMemberN); ok {
		l.after, _ = strconv.ParseInt(n.Value, 10, 64)
	}
	p.mu.Lock()
	p.leases[t] = l
	p.mu.Unlock()
	return l, true, nil
}

// advance moves the tenant's position from `from` to `to` and renews the lease, on the
// condition that this process still holds it and nobody moved the position.
func (p *Publisher) advance(ctx context.Context, t Tenant, from, to int64) (lease, error) {
	until := p.cfg.Now().Add(p.cfg.LeaseDuration)
	_, err := p.cfg.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(p.cfg.Table), Key: p.key(t),
		UpdateExpression:         aws.String("SET #a = :to, #u = :until"),
		ConditionExpression:      aws.String("#o = :me AND #a = :from"),
		ExpressionAttributeNames: map[string]string{"#o": attrOwner, "#u": attrLeaseUntil, "#a": attrAfter},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":me": &ddbtypes.AttributeValueMemberS{Value: p.cfg.Owner}, ":until": num(until.UnixMilli()),
			":from": num(from), ":to": num(to),
		},
	})
	if err != nil {
		p.forget(t)
		if _, lost := sdkerr.ConditionFailures(err); lost {
			// Another process took the lease (this one stalled past it): what was sent is
			// sent again by the new holder from the position it found; at least once.
			return lease{}, errLeaseLost
		}
		return lease{}, fmt.Errorf("move the tenant's EventBridge position: %w", err)
	}
	l := lease{after: to, until: until}
	p.mu.Lock()
	p.leases[t] = l
	p.mu.Unlock()
	return l, nil
}

// Release gives up every lease this process holds, so that another process (the next
// Lambda invocation) takes the tenants at once.
func (p *Publisher) Release(ctx context.Context) {
	p.mu.Lock()
	held := make([]Tenant, 0, len(p.leases))
	for t := range p.leases {
		held = append(held, t)
	}
	p.leases = map[Tenant]lease{}
	p.mu.Unlock()
	for _, t := range held {
		_, err := p.cfg.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(p.cfg.Table), Key: p.key(t),
			UpdateExpression:         aws.String("SET #u = :zero"),
			ConditionExpression:      aws.String("#o = :me"),
			ExpressionAttributeNames: map[string]string{"#o": attrOwner, "#u": attrLeaseUntil},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":me": &ddbtypes.AttributeValueMemberS{Value: p.cfg.Owner}, ":zero": num(0),
			},
		})
		if err != nil {
			if _, lost := sdkerr.ConditionFailures(err); !lost {
				p.cfg.Log.Warn("eventbridge: give up a lease", zap.String("tenant", t.System+"/"+t.Tenant), zap.Error(err))
			}
		}
	}
}

func (p *Publisher) logRetry(attempt int, what string, err error) {
	if attempt == 1 || attempt%10 == 0 {
		p.cfg.Log.Warn("eventbridge: "+what+" failed; sending again", zap.Int("attempt", attempt), zap.Error(err))
	}
}
