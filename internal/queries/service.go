package queries

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/objects"
	"github.com/ssodir/ssodir/internal/progress"
	"github.com/ssodir/ssodir/internal/projections"
)

// DefaultMinVersionWait is how long a read with X-Min-Version waits for the view (API.md).
const DefaultMinVersionWait = 5 * time.Second

// minVersionRetryAfter is the Retry-After of a read whose view did not catch up in time.
const minVersionRetryAfter = time.Second

// Polling for a minimum version reads every pollStep while the wait is young — the
// projector lags by tens of milliseconds, and a coarser step would add most of a step to
// every wait (20 ms doubling gave a p99 of 70 ms where the lag's was 40) — and then backs
// off to maxPoll, so that a long wait costs few reads.
const (
	pollStep  = 10 * time.Millisecond
	fastPolls = 20
	maxPoll   = 250 * time.Millisecond
)

// Options tune a Service; the zero value is the production behaviour.
type Options struct {
	// MinVersionWait bounds X-Min-Version waits; 0 means DefaultMinVersionWait.
	MinVersionWait time.Duration
	// MaxWaiters and MaxTenantWaiters cap the X-Min-Version reads waiting at once, in the
	// process and per tenant; 0 means DefaultMaxWaiters / DefaultMaxTenantWaiters.
	MaxWaiters, MaxTenantWaiters int
	// TenantTTL is how long a tenant row is cached; 0 means DefaultTenantTTL, and it is
	// never more than MaxTenantTTL.
	TenantTTL time.Duration
	// EventsRetention is SSO_EVENTS_RETENTION: older cursors of the change feed are 410;
	// 0 keeps every change.
	EventsRetention time.Duration
	// HistoryRetention is SSO_HISTORY_RETENTION: as-of reads of older instants are
	// refused (0: history is kept).
	HistoryRetention time.Duration
	// Now is the clock of as-of reads (nil: time.Now).
	Now func() time.Time
	// ReportPageSize is the items of the read table one page of the access report scans
	// (0: DynamoDB's 1 MB pages).
	ReportPageSize int32
}

// Service answers the query API's reads.
type Service struct {
	db      DB
	tenants *tenantCache
	cursors cursors
	minWait time.Duration
	watches *watches
	// erasures is the erasure ledger's table; syncStatus keycloak-sync's status table.
	erasures   string
	syncStatus string
	// feed reads the change feed; eventWaiters holds a slot per GET /events waiting.
	feed         *changefeed.Reader
	eventWaiters chan struct{}
	// retention and now: as-of reads (asof.go).
	retention time.Duration
	now       func() time.Time
	// reportPage is Options.ReportPageSize (report.go).
	reportPage int32
}

// New builds a Service over db, with the tables named by names. cursorKey signs cursors
// (SSO_CURSOR_KEY, the query API's own key); it must be at least 32 bytes.
func New(db DB, names dynamo.Names, cursorKey []byte, opts Options) (*Service, error) {
	if len(cursorKey) < 32 {
		return nil, errors.New("queries: the cursor key must be at least 32 bytes")
	}
	wait := opts.MinVersionWait
	if wait <= 0 {
		wait = DefaultMinVersionWait
	}
	s := &Service{
		erasures:     names.Erasures(),
		syncStatus:   names.KeycloakSyncStatus(),
		db:           db,
		tenants:      newTenantCache(db, names, opts.TenantTTL),
		cursors:      cursors{key: append([]byte(nil), cursorKey...)},
		minWait:      wait,
		feed:         changefeed.NewReader(db, changefeed.TableName(names), opts.EventsRetention, nil),
		eventWaiters: make(chan struct{}, maxEventWaiters),
		retention:    opts.HistoryRetention,
		now:          opts.Now,
		reportPage:   opts.ReportPageSize,
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.watches = newWatches(opts.MaxWaiters, opts.MaxTenantWaiters, func(ctx context.Context, k watchKey) observation {
		return s.observe(ctx, k, true)
	})
	return s, nil
}

// FeedDiscovery lists the projectors' progress feeds (their probe listeners' URLs) now.
type FeedDiscovery func(ctx context.Context) ([]string, error)

// DiscoveryInterval is how often FollowProjectors looks for projectors that started or
// stopped.
const DiscoveryInterval = 5 * time.Second

// FollowProjectors follows the progress feed of every projector that discover lists,
// looking again every DiscoveryInterval, until ctx is done: X-Min-Version reads then wait
// on the projectors' progress and poll only as a safety net. It presents token (the
// service credential the projectors share, SSO_PROGRESS_TOKEN) to each feed; a feed no
// longer listed is left.
func (s *Service) FollowProjectors(ctx context.Context, client *http.Client, token string, discover FeedDiscovery, log *zap.Logger) {
	go func() {
		following := map[string]context.CancelFunc{}
		defer func() {
			for _, stop := range following {
				stop()
			}
		}()
		t := time.NewTicker(DiscoveryInterval)
		defer t.Stop()
		for {
			dctx, cancel := context.WithTimeout(ctx, DiscoveryInterval)
			urls, err := discover(dctx)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("could not look for projectors' progress feeds; following those known", zap.Error(err))
			case err == nil:
				s.followOnly(ctx, client, token, urls, following, log)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// followOnly makes following (feed URL → stop) the feeds in urls.
func (s *Service) followOnly(ctx context.Context, client *http.Client, token string, urls []string, following map[string]context.CancelFunc, log *zap.Logger) {
	listed := map[string]bool{}
	for _, url := range urls {
		listed[url] = true
		if _, ok := following[url]; ok {
			continue
		}
		fctx, stop := context.WithCancel(ctx)
		following[url] = stop
		log.Info("following a projector's progress feed", zap.String("feed", url))
		go progress.Follow(fctx, client, url, token, func(n progress.Notice) {
			s.watches.notices.Add(1)
			s.watches.notify(watchKey{n.System, n.Tenant, n.ID}, n.Version)
		}, func(up bool) {
			if up {
				s.watches.connected.Add(1)
			} else {
				s.watches.connected.Add(-1)
			}
		}, log)
	}
	for url, stop := range following {
		if !listed[url] {
			stop()
			delete(following, url)
			log.Info("projector gone: its progress feed is no longer followed", zap.String("feed", url))
		}
	}
	s.watches.feeds.Store(int32(len(following)))
}

// Collectors are the metrics of X-Min-Version waiting: reads waiting now, reads refused
// beyond the caps, projector feeds connected and the notices they brought.
func (s *Service) Collectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ssodir_min_version_waiting",
			Help: "X-Min-Version reads waiting now."}, func() float64 { n, _ := s.watches.waiting("", ""); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ssodir_min_version_refused_total",
			Help: "X-Min-Version reads refused at once (503) beyond the waiter caps."}, func() float64 { return float64(s.watches.refused.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ssodir_projector_feeds_connected",
			Help: "Projector progress feeds followed and connected now (found in the projectors' heartbeat rows)."}, func() float64 { return float64(s.watches.connected.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "ssodir_projector_notices_total",
			Help: "Notices of written records heard from the projectors' feeds."}, func() float64 { return float64(s.watches.notices.Load()) }),
	}
}

// Tenant is a tenant's public settings, with whether its realm lets usernames change
// (keycloak.username_changes) as keycloak-sync last found it.
func (s *Service) Tenant(ctx context.Context, system, tenant string) (objects.Tenant, error) {
	if !identity.ValidID(system) || !identity.ValidID(tenant) {
		return objects.Tenant{}, apperr.NotFound("tenant")
	}
	row, err := s.tenants.get(ctx, system, tenant)
	if err != nil {
		return objects.Tenant{}, err
	}
	t := tenantView(row)
	if t.Keycloak != nil {
		if t.Keycloak.UsernameChanges, err = s.usernameChanges(ctx, system, tenant); err != nil {
			return objects.Tenant{}, err
		}
	}
	return t, nil
}

// User is one user. With minVersion > 0 it waits until the view has reached that version.
func (s *Service) User(ctx context.Context, system, tenant, username string, minVersion int64) (objects.User, error) {
	u, ok := identity.NormalizeUsername(username)
	if !ok {
		return objects.User{}, apperr.NotFound("user")
	}
	raw, err := s.read(ctx, watchKey{system, tenant, dynamo.UserID(u)}, "user", minVersion)
	if err != nil {
		return objects.User{}, err
	}
	item, err := projections.DecodeUser(raw)
	if err != nil {
		return objects.User{}, err
	}
	if item.IsDeleted {
		return objects.User{}, apperr.NotFound("user")
	}
	return userJSON(item), nil
}

// Group is one group, found by its name in any case. With minVersion > 0 it waits until the
// view has reached that version.
func (s *Service) Group(ctx context.Context, system, tenant, name string, minVersion int64) (objects.Group, error) {
	if !identity.ValidGroupName(name) {
		return objects.Group{}, apperr.NotFound("group")
	}
	raw, err := s.read(ctx, watchKey{system, tenant, dynamo.GroupID(identity.GroupKey(name))}, "group", minVersion)
	if err != nil {
		return objects.Group{}, err
	}
	item, err := projections.DecodeGroup(raw)
	if err != nil {
		return objects.Group{}, err
	}
	if item.IsDeleted {
		return objects.Group{}, apperr.NotFound("group")
	}
	return groupJSON(item), nil
}

// read is the view item k. With minVersion > 0 it waits on the item's shared watch until
// the item reaches minVersion or the wait is over. A tombstone at or above minVersion
// ends the wait too (the caller answers 404).
func (s *Service) read(ctx context.Context, k watchKey, what string, minVersion int64) (map[string]types.AttributeValue, error) {
	if minVersion <= 0 {
		obs := s.observe(ctx, k, false)
		if obs.err != nil {
			return nil, obs.err
		}
		if obs.raw == nil {
			return nil, apperr.NotFound(what)
		}
		return obs.raw, nil
	}
	// An unknown tenant, or one still provisioning, is answered at once, not after the wait.
	if _, err := s.tables(ctx, k.system, k.tenant); err != nil {
		return nil, err
	}
	obs, err := s.watches.wait(ctx, k, minVersion, s.minWait, what)
	if err != nil {
		return nil, err
	}
	return obs.raw, nil
}

// observe reads the view item k once; its version is read only for a consistent read (a
// wait's).
func (s *Service) observe(ctx context.Context, k watchKey, consistent bool) observation {
	t, err := s.tables(ctx, k.system, k.tenant)
	if err != nil {
		return observation{err: err}
	}
	raw, err := s.getItem(ctx, t.users, k.id, consistent)
	if err != nil {
		return observation{err: s.fail(t, err)}
	}
	obs := observation{raw: raw}
	if raw != nil && consistent {
		n, ok := raw["version"].(*types.AttributeValueMemberN)
		if !ok {
			return observation{err: fmt.Errorf("view item %s has no numeric version", identity.LogKey(k.id))}
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return observation{err: fmt.Errorf("decode the version of %s: %w", identity.LogKey(k.id), err)}
		}
		obs.version = v
	}
	return obs
}

// tables resolves a tenant's read tables; an id that cannot exist is an unknown tenant.
func (s *Service) tables(ctx context.Context, system, tenant string) (tables, error) {
	if !identity.ValidID(system) || !identity.ValidID(tenant) {
		return tables{}, apperr.NotFound("tenant")
	}
	return s.tenants.readTables(ctx, system, tenant)
}

// fail forgets the tenant's cached row when one of its tables is gone, so that a replay's
// switch is picked up by the next request instead of after the cache time.
func (s *Service) fail(t tables, err error) error {
	if errors.Is(err, dynamo.ErrTableMissing) {
		s.tenants.forget(t.system, t.tenant)
	}
	return err
}

func (s *Service) getItem(ctx context.Context, table, id string, consistent bool) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            viewKey(id),
		ConsistentRead: aws.Bool(consistent),
	})
	if err != nil {
		return nil, fmt.Errorf("get %s from %s: %w", identity.LogKey(id), table, storageError(err))
	}
	return out.Item, nil
}

func (s *Service) getUser(ctx context.Context, t tables, username string, consistent bool) (projections.UserView, bool, error) {
	raw, err := s.getItem(ctx, t.users, dynamo.UserID(username), consistent)
	if err != nil || raw == nil {
		return projections.UserView{}, false, err
	}
	u, err := projections.DecodeUser(raw)
	return u, err == nil, err
}

func (s *Service) getGroup(ctx context.Context, t tables, key string, consistent bool) (projections.GroupView, bool, error) {
	raw, err := s.getItem(ctx, t.users, dynamo.GroupID(key), consistent)
	if err != nil || raw == nil {
		return projections.GroupView{}, false, err
	}
	g, err := projections.DecodeGroup(raw)
	return g, err == nil, err
}

func viewKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: id},
		"sk": &types.AttributeValueMemberS{Value: dynamo.SKConfig},
	}
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
