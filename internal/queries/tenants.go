package queries

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/singleflight"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
)

const (
	// DefaultTenantTTL is how long a tenant row is reused. A replay switches a tenant's read
	// tables by rewriting the row; readers follow within this time.
	DefaultTenantTTL = time.Second
	// MaxTenantTTL bounds the cache so that a switch is always followed within 2 s.
	MaxTenantTTL = 2 * time.Second
	// sweepAbove is the cache size above which expired rows are dropped on insert, so that
	// requests for many tenants cannot grow it without bound.
	sweepAbove = 1024
)

type cachedTenant struct {
	row     dynamo.Tenant
	expires time.Time
}

// tenantCache reads tenant rows from `{p}_Config` and keeps each for a short while.
type tenantCache struct {
	db    DB
	table string
	ttl   time.Duration
	now   func() time.Time

	mu    sync.Mutex
	rows  map[string]cachedTenant
	loads singleflight.Group
}

func newTenantCache(db DB, table string, ttl time.Duration) *tenantCache {
	if ttl <= 0 {
		ttl = DefaultTenantTTL
	}
	ttl = min(ttl, MaxTenantTTL)
	return &tenantCache{db: db, table: table, ttl: ttl, now: time.Now, rows: map[string]cachedTenant{}}
}

// get is the tenant's row; apperr not_found when there is none. Unknown tenants are not
// cached: a tenant created a moment ago must be found at once.
func (c *tenantCache) get(ctx context.Context, system, tenant string) (dynamo.Tenant, error) {
	id := system + "/" + tenant
	c.mu.Lock()
	e, ok := c.rows[id]
	c.mu.Unlock()
	if ok && c.now().Before(e.expires) {
		return e.row, nil
	}
	// Concurrent requests for one tenant share one read.
	v, err, _ := c.loads.Do(id, func() (any, error) {
		row, err := c.load(ctx, system, tenant)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.rows) >= sweepAbove {
			now := c.now()
			for k, e := range c.rows {
				if !now.Before(e.expires) {
					delete(c.rows, k)
				}
			}
		}
		c.rows[id] = cachedTenant{row: row, expires: c.now().Add(c.ttl)}
		return row, nil
	})
	if err != nil {
		return dynamo.Tenant{}, err
	}
	return v.(dynamo.Tenant), nil
}

// forget drops a tenant's row, so that the next request reads it again: used when one of its
// read tables turned out to be gone.
func (c *tenantCache) forget(system, tenant string) {
	c.mu.Lock()
	delete(c.rows, system+"/"+tenant)
	c.mu.Unlock()
}

func (c *tenantCache) load(ctx context.Context, system, tenant string) (dynamo.Tenant, error) {
	// The loaded row serves other requests too, so one caller leaving must not fail them.
	ctx = context.WithoutCancel(ctx)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(c.table),
		Key: map[string]types.AttributeValue{
			"system_id": &types.AttributeValueMemberS{Value: system},
			"tenant_id": &types.AttributeValueMemberS{Value: tenant},
		},
		// The row names the tables to read; a stale one after a switch could name a
		// dropped table.
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return dynamo.Tenant{}, fmt.Errorf("get tenant %s/%s: %w", system, tenant, storageError(err))
	}
	if out.Item == nil {
		return dynamo.Tenant{}, apperr.NotFound("tenant")
	}
	var row dynamo.Tenant
	if err := attributevalue.UnmarshalMap(out.Item, &row); err != nil {
		return dynamo.Tenant{}, fmt.Errorf("decode tenant %s/%s: %w", system, tenant, err)
	}
	return row, nil
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
