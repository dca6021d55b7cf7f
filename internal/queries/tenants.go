package queries

import (
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
)

const (
	// DefaultTenantTTL is the length of a round of the tenant cache: once per round (and
	// only when there are reads) the tenant-list marker is read, one item whatever the
	// number of tenants, and every cached row is kept until the marker moves. A tenant
	// becoming active, its Keycloak settings replaced or its row rewritten move it.
	DefaultTenantTTL = time.Second
	// MaxTenantTTL bounds the round, so that a change is followed within 2 s.
	MaxTenantTTL = 2 * time.Second
	// MaxTenantAge bounds how long a row is trusted without reading it again. It covers
	// changes the marker does not announce, such as a replay's start or a row written by
	// an older process (a replay's switch moves the marker with the row). A row in flux (a
	// replay under way, or still provisioning) is read again every round.
	MaxTenantAge = 30 * time.Second
	// missTTL is how long an unknown tenant is answered not found without reading again:
	// briefly, so that a client polling a tenant it just provisioned finds it soon, and a
	// flood of requests for tenants that do not exist costs one read per tenant per second.
	missTTL = time.Second
	// sweepAbove is the cache size above which stale entries are dropped on insert, so that
	// requests for many tenants cannot grow it without bound.
	sweepAbove = 1024
)

type cachedTenant struct {
	row     dynamo.Tenant
	found   bool
	version int64 // the tenant-list version of the round it was read in
	loaded  time.Time
}

// tenantCache keeps tenant rows of `{p}_Config`, read through dynamo.TenantReader, and
// follows changes through the tenant-list marker: one read per round and process, not one
// per tenant.
type tenantCache struct {
	reader *dynamo.TenantReader
	table  string // `{p}_Config`, which Service.Tenants lists
	ttl    time.Duration
	now    func() time.Time

	mu        sync.Mutex
	rows      map[string]cachedTenant
	version   int64     // the marker's version read at the start of the current round
	roundEnds time.Time // when the marker is read again
	loads     singleflight.Group
}

func newTenantCache(db DB, names dynamo.Names, ttl time.Duration) *tenantCache {
	if ttl <= 0 {
		ttl = DefaultTenantTTL
	}
	ttl = min(ttl, MaxTenantTTL)
	return &tenantCache{reader: dynamo.NewTenantReader(db, names), table: names.Config(), ttl: ttl, now: time.Now, rows: map[string]cachedTenant{}}
}

// detached is a context for a read whose result serves other requests too, so that one
// caller leaving must not fail them.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

// listVersion is the marker's version for this round, read when the round is over.
func (c *tenantCache) listVersion(ctx context.Context) (int64, error) {
	c.mu.Lock()
	if c.now().Before(c.roundEnds) {
		v := c.version
		c.mu.Unlock()
		return v, nil
	}
	c.mu.Unlock()
	v, err, _ := c.loads.Do("\x00round", func() (any, error) {
		ctx, cancel := detached(ctx)
		defer cancel()
		v, err := c.reader.ListVersion(ctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.version, c.roundEnds = v, c.now().Add(c.ttl)
		c.mu.Unlock()
		return v, nil
	})
	if err != nil {
		return 0, err
	}
	return v.(int64), nil
}

// fresh reports whether a cached entry may answer in the round of version v.
func (c *tenantCache) fresh(e cachedTenant, v int64, now time.Time) bool {
	age := now.Sub(e.loaded)
	switch {
	case e.version != v || age >= MaxTenantAge:
		return false
	case !e.found:
		return age < missTTL
	case e.row.Status != dynamo.TenantActive || e.row.NextUsersTable != "":
		return age < c.ttl
	}
	return true
}

// get is the tenant's row; apperr not_found when there is none.
func (c *tenantCache) get(ctx context.Context, system, tenant string) (dynamo.Tenant, error) {
	v, err := c.listVersion(ctx)
	if err != nil {
		return dynamo.Tenant{}, err
	}
	id := system + "/" + tenant
	c.mu.Lock()
	e, ok := c.rows[id]
	c.mu.Unlock()
	if !ok || !c.fresh(e, v, c.now()) {
		// Concurrent requests for one tenant share one read.
		got, err, _ := c.loads.Do(id, func() (any, error) {
			ctx, cancel := detached(ctx)
			defer cancel()
			row, err := c.reader.Get(ctx, system, tenant)
			e := cachedTenant{row: row, found: err == nil, version: v, loaded: c.now()}
			if err != nil && apperr.KindOf(err) != apperr.KindNotFound {
				return nil, err
			}
			c.store(id, e)
			return e, nil
		})
		if err != nil {
			return dynamo.Tenant{}, err
		}
		e = got.(cachedTenant)
	}
	if !e.found {
		return dynamo.Tenant{}, apperr.NotFound("tenant")
	}
	return e.row, nil
}

func (c *tenantCache) store(id string, e cachedTenant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rows) >= sweepAbove {
		now := c.now()
		for k, old := range c.rows {
			if !c.fresh(old, c.version, now) {
				delete(c.rows, k)
			}
		}
	}
	c.rows[id] = e
}

// forget drops a tenant's row, so that the next request reads it again: used when one of its
// read tables turned out to be gone.
func (c *tenantCache) forget(system, tenant string) {
	c.mu.Lock()
	delete(c.rows, system+"/"+tenant)
	c.mu.Unlock()
}

// tables are the read tables a tenant's readers use now.
type tables struct {
	system, tenant string
	users          string
	activities     string
}

// readTables resolves the tenant's current read tables. A tenant that is still being
// provisioned has none to read yet: unavailable, so that clients retry.
func (c *tenantCache) readTables(ctx context.Context, system, tenant string) (tables, error) {
	row, err := c.get(ctx, system, tenant)
	if err != nil {
		return tables{}, err
	}
	if row.Status != dynamo.TenantActive || row.UsersTable == "" || row.ActivitiesTable == "" {
		e := apperr.Unavailable(errors.New("tenant "+system+"/"+tenant+" is "+row.Status), storageRetryAfter)
		e.Message = "the tenant is being provisioned, retry later"
		return tables{}, e
	}
	return tables{system: system, tenant: tenant, users: row.UsersTable, activities: row.ActivitiesTable}, nil
}
