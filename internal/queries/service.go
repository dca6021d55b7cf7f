package queries

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
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
}

// Service answers the query API's reads.
type Service struct {
	db      DB
	tenants *tenantCache
	cursors cursors
	minWait time.Duration
	watches *watches
	// erasures is the erasure ledger's table.
	erasures string
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
		erasures: names.Erasures(),
		db:       db,
		tenants:  newTenantCache(db, names, opts.TenantTTL),
		cursors:  cursors{key: append([]byte(nil), cursorKey...)},
		minWait:  wait,
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

// Tenant is a tenant's public settings.
func (s *Service) Tenant(ctx context.Context, system, tenant string) (objects.Tenant, error) {
	if !identity.ValidID(system) || !identity.ValidID(tenant) {
		return objects.Tenant{}, apperr.NotFound("tenant")
	}
	row, err := s.tenants.get(ctx, system, tenant)
	if err != nil {
		return objects.Tenant{}, err
	}
	return tenantView(row), nil
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
			return observation{err: fmt.Errorf("view item %s has no numeric version", k.id)}
		}
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return observation{err: fmt.Errorf("decode the version of %s: %w", k.id, err)}
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
		return nil, fmt.Errorf("get %s from %s: %w", id, table, storageError(err))
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

// Users is a page of the users list q selects.
func (s *Service) Users(ctx context.Context, system, tenant string, q UsersQuery) (Page[objects.User], error) {
	q, err := q.normalize()
	if err != nil {
		return Page[objects.User]{}, err
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[objects.User]{}, err
	}
	var spec listSpec
	switch {
	case q.Email != "":
		spec.id = listID{List: "users.email", Params: []string{q.Email}}
		spec.table, spec.ascending = t.users, true
		spec.index = dynamo.IndexUserEmail
		spec.keyCond = "#h = :h AND #r = :r"
		spec.names = map[string]string{"#h": "email", "#r": "sk"}
		spec.values = map[string]types.AttributeValue{":h": str(projections.EmailKey(q.Email)), ":r": str(dynamo.SKConfig)}
		spec.keyAttrs = indexKey("email", "sk")
	case q.UsernamePrefix != "":
		// Users carry name_sort = username, so GroupNameGSI's `user` partition lists
		// them by username: no index of its own, and tables made before need none.
		spec = namePrefixSpec(t, "users.username_prefix", dynamo.IndexGroupName, "name_sort", q.UsernamePrefix)
	case q.LastNamePrefix != "":
		spec = namePrefixSpec(t, "users.last_name_prefix", dynamo.IndexUserLastName, "last_name_sort", q.LastNamePrefix)
	case q.FirstNamePrefix != "":
		spec = namePrefixSpec(t, "users.first_name_prefix", dynamo.IndexUserFirstName, "first_name_sort", q.FirstNamePrefix)
	default:
		spec.id = listID{List: "users.updated", Params: []string{string(q.Order)}}
		spec.table = t.users
		spec.index = dynamo.IndexUserUpdatedAt
		spec.keyCond = "#h = :h"
		spec.names = map[string]string{"#h": "kind"}
		spec.values = map[string]types.AttributeValue{":h": str(kindUser)}
		spec.ascending = q.Order == OrderUpdatedAsc
		spec.keyAttrs = indexKey("kind", "updated_sort")
	}
	spec.id.System, spec.id.Tenant = system, tenant
	page, err := runList(ctx, s.db, s.cursors, spec, q.Page, acceptUsers)
	return page, s.fail(t, err)
}

// Values of the `kind` attribute, the partition key of the by-name and by-time indexes.
const (
	kindUser  = string(events.KindUser)
	kindGroup = string(events.KindGroup)
)

func namePrefixSpec(t tables, list, index, sortAttr, prefix string) listSpec {
	return listSpec{
		id:        listID{List: list, Params: []string{prefix}},
		table:     t.users,
		index:     index,
		keyCond:   "#h = :h AND begins_with(#r, :r)",
		names:     map[string]string{"#h": "kind", "#r": sortAttr},
		values:    map[string]types.AttributeValue{":h": str(kindUser), ":r": str(projections.NamePrefix(prefix))},
		ascending: true,
		keyAttrs:  indexKey("kind", sortAttr),
	}
}

func acceptUsers(_ context.Context, raw []map[string]types.AttributeValue) ([]*objects.User, error) {
	out := make([]*objects.User, len(raw))
	for i, item := range raw {
		u, err := projections.DecodeUser(item)
		if err != nil {
			return nil, err
		}
		// The indexes are sparse and tombstones carry no index keys; this only guards
		// against a view written otherwise.
		if u.IsDeleted || u.Username == "" {
			continue
		}
		v := userJSON(u)
		out[i] = &v
	}
	return out, nil
}

// Groups is a page of all groups, by name case-insensitively.
func (s *Service) Groups(ctx context.Context, system, tenant string, p PageRequest) (Page[objects.Group], error) {
	if err := p.check(); err != nil {
		return Page[objects.Group]{}, err
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[objects.Group]{}, err
	}
	spec := listSpec{
		id:        listID{System: system, Tenant: tenant, List: "groups"},
		table:     t.users,
		index:     dynamo.IndexGroupName,
		keyCond:   "#h = :h",
		names:     map[string]string{"#h": "kind"},
		values:    map[string]types.AttributeValue{":h": str(kindGroup)},
		ascending: true,
		keyAttrs:  indexKey("kind", "name_sort"),
	}
	page, err := runList(ctx, s.db, s.cursors, spec, p, func(_ context.Context, raw []map[string]types.AttributeValue) ([]*objects.Group, error) {
		out := make([]*objects.Group, len(raw))
		for i, item := range raw {
			g, err := projections.DecodeGroup(item)
			if err != nil {
				return nil, err
			}
			if g.IsDeleted || g.Name == "" {
				continue
			}
			v := groupJSON(g)
			out[i] = &v
		}
		return out, nil
	})
	return page, s.fail(t, err)
}

// UserGroups is a page of the groups a user belongs to, by name case-insensitively.
func (s *Service) UserGroups(ctx context.Context, system, tenant, username string, p PageRequest) (Page[objects.Group], error) {
	if err := p.check(); err != nil {
		return Page[objects.Group]{}, err
	}
	name, ok := identity.NormalizeUsername(username)
	if !ok {
		return Page[objects.Group]{}, apperr.NotFound("user")
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[objects.Group]{}, err
	}
	user, found, err := s.getUser(ctx, t, name, false)
	if err != nil {
		return Page[objects.Group]{}, s.fail(t, err)
	}
	if !found || user.IsDeleted {
		return Page[objects.Group]{}, apperr.NotFound("user")
	}
	spec := listSpec{
		id:        listID{System: system, Tenant: tenant, List: "users.groups", Params: []string{name}},
		table:     t.users,
		index:     dynamo.IndexUserGroup,
		keyCond:   "#h = :h",
		names:     map[string]string{"#h": "member_id"},
		values:    map[string]types.AttributeValue{":h": str(name)},
		ascending: true,
		keyAttrs:  indexKey("member_id", "id"),
	}
	page, err := runList(ctx, s.db, s.cursors, spec, p, func(ctx context.Context, raw []map[string]types.AttributeValue) ([]*objects.Group, error) {
		members, err := decodeMembers(raw)
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(members))
		for i, m := range members {
			ids[i] = dynamo.GroupID(m.GroupKey)
		}
		views, err := s.batchGet(ctx, t.users, ids)
		if err != nil {
			return nil, err
		}
		out := make([]*objects.Group, len(members))
		for i, m := range members {
			item, ok := views[ids[i]]
			if !ok {
				continue
			}
			g, err := projections.DecodeGroup(item)
			if err != nil {
				return nil, err
			}
			if currentMembership(m, user, g) {
				v := groupJSON(g)
				out[i] = &v
			}
		}
		return out, nil
	})
	return page, s.fail(t, err)
}

// GroupMembers is a page of a group's members, as users, by username.
func (s *Service) GroupMembers(ctx context.Context, system, tenant, name string, p PageRequest) (Page[objects.User], error) {
	if err := p.check(); err != nil {
		return Page[objects.User]{}, err
	}
	if !identity.ValidGroupName(name) {
		return Page[objects.User]{}, apperr.NotFound("group")
	}
	key := identity.GroupKey(name)
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[objects.User]{}, err
	}
	group, found, err := s.getGroup(ctx, t, key, false)
	if err != nil {
		return Page[objects.User]{}, s.fail(t, err)
	}
	if !found || group.IsDeleted {
		return Page[objects.User]{}, apperr.NotFound("group")
	}
	spec := listSpec{
		id:        listID{System: system, Tenant: tenant, List: "groups.members", Params: []string{key}},
		table:     t.users,
		index:     dynamo.IndexGroupMember,
		keyCond:   "#h = :h",
		names:     map[string]string{"#h": "member_of"},
		values:    map[string]types.AttributeValue{":h": str(key)},
		ascending: true,
		keyAttrs:  indexKey("member_of", "member_id"),
	}
	page, err := runList(ctx, s.db, s.cursors, spec, p, func(ctx context.Context, raw []map[string]types.AttributeValue) ([]*objects.User, error) {
		members, err := decodeMembers(raw)
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(members))
		for i, m := range members {
			ids[i] = dynamo.UserID(m.MemberID)
		}
		views, err := s.batchGet(ctx, t.users, ids)
		if err != nil {
			return nil, err
		}
		out := make([]*objects.User, len(members))
		for i, m := range members {
			item, ok := views[ids[i]]
			if !ok {
				continue
			}
			u, err := projections.DecodeUser(item)
			if err != nil {
				return nil, err
			}
			if currentMembership(m, u, group) {
				v := userJSON(u)
				out[i] = &v
			}
		}
		return out, nil
	})
	return page, s.fail(t, err)
}

func decodeMembers(raw []map[string]types.AttributeValue) ([]projections.MembershipView, error) {
	members := make([]projections.MembershipView, len(raw))
	for i, item := range raw {
		m, err := projections.DecodeMembership(item)
		if err != nil {
			return nil, err
		}
		members[i] = m
	}
	return members, nil
}

// Activity is a page of the activity feed of one entity, actor or UTC day, newest first.
func (s *Service) Activity(ctx context.Context, system, tenant string, q ActivityQuery) (Page[Activity], error) {
	q, err := q.normalize()
	if err != nil {
		return Page[Activity]{}, err
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[Activity]{}, err
	}
	spec := listSpec{table: t.activities, keyCond: "#h = :h"}
	switch {
	case q.Entity != "":
		spec.id = listID{List: "activity.entity", Params: []string{q.Entity}}
		spec.names = map[string]string{"#h": "pk"}
		spec.values = map[string]types.AttributeValue{":h": str(projections.EntityPK(q.Entity))}
		spec.keyAttrs = activitiesTableKey
	case q.Actor != "":
		spec.id = listID{List: "activity.actor", Params: []string{q.Actor}}
		spec.index = dynamo.IndexActor
		spec.names = map[string]string{"#h": "actor_pk"}
		spec.values = map[string]types.AttributeValue{":h": str(projections.ActorPK(q.Actor))}
		spec.keyAttrs = []string{"pk", "sk", "actor_pk"}
	default:
		spec.id = listID{List: "activity.day", Params: []string{q.Day}}
		spec.index = dynamo.IndexDay
		spec.names = map[string]string{"#h": "day_pk"}
		day, _ := time.Parse(dayLayout, q.Day) // normalize checked it
		spec.values = map[string]types.AttributeValue{":h": str(projections.DayPK(day))}
		spec.keyAttrs = []string{"pk", "sk", "day_pk"}
	}
	spec.id.System, spec.id.Tenant = system, tenant
	if name, ok := strings.CutPrefix(q.Entity, "user:"); ok {
		// A person renamed before has a history under former names too.
		u, found, err := s.getUser(ctx, t, name, false)
		if err != nil {
			return Page[Activity]{}, s.fail(t, err)
		}
		if found && !u.IsDeleted && len(u.FormerNames) > 0 {
			page, err := s.personActivity(ctx, spec, u, q.Page)
			return page, s.fail(t, err)
		}
	}
	page, err := runList(ctx, s.db, s.cursors, spec, q.Page, func(_ context.Context, raw []map[string]types.AttributeValue) ([]*Activity, error) {
		out := make([]*Activity, len(raw))
		for i, item := range raw {
			a, err := projections.DecodeActivity(item)
			if err != nil {
				return nil, err
			}
			v, err := activityJSON(a)
			if err != nil {
				return nil, err
			}
			out[i] = &v
		}
		return out, nil
	})
	return page, s.fail(t, err)
}

// Erasure is one erasure of the tenant as the ledger shows it (API.md: never the erased
// identifiers): unknown tenant or erasure, 404.
func (s *Service) Erasure(ctx context.Context, system, tenant, id string) (erasure.Entry, error) {
	if _, err := s.tables(ctx, system, tenant); err != nil {
		return erasure.Entry{}, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return erasure.Entry{}, apperr.NotFound("erasure")
	}
	e, err := erasure.ReadEntry(ctx, s.db, s.erasures, system, tenant, id)
	if err != nil {
		err = storageError(err)
		if errors.Is(err, dynamo.ErrTableMissing) {
			// No ledger yet (no command API has run): no erasure either.
			return erasure.Entry{}, apperr.NotFound("erasure")
		}
		return erasure.Entry{}, err
	}
	return e, nil
}
