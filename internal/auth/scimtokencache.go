package auth

import (
	"context"
	"sync"
	"time"

	"github.com/ssodir/ssodir/internal/scimtoken"
)

// ScimTokenRows is the store of SCIM tokens that a ScimTokenCache fronts: the lookup
// ScimTokens needs, and what the token commands write.
type ScimTokenRows interface {
	ScimTokenLookup
	PutScimToken(ctx context.Context, rec scimtoken.Record) error
	ListScimTokens(ctx context.Context, system, tenant string) ([]scimtoken.Record, error)
	DeleteScimToken(ctx context.Context, system, tenant, id string) (found bool, err error)
}

// ScimTokenCacheTTL is how long a process trusts a SCIM token row it has read: a token
// revoked through another process keeps working in this one for at most this long (a
// revocation through this process takes effect here at once).
const ScimTokenCacheTTL = 60 * time.Second

// maxCachedScimTokens bounds the rows a process keeps (a few hundred bytes each).
const maxCachedScimTokens = 10_000

// ScimTokenCache keeps the SCIM token rows a process found, for TTL, so that a provider's
// requests in a row (an import's pages) read the row once, not once each. Only rows that
// exist are kept: an unknown or revoked id is read every time, and a bearer is still
// checked against the row's HMAC on every request (a forged token for a kept id fails as
// before, reading nothing). Revoking a token through the cache forgets it at once and keeps
// it from being cached again for TTL (a read that was under way when it was revoked).
type ScimTokenCache struct {
	Rows ScimTokenRows
	TTL  time.Duration
	Now  func() time.Time

	mu   sync.Mutex
	rows map[string]cachedToken
}

type cachedToken struct {
	rec     scimtoken.Record
	revoked bool
	until   time.Time
}

// NewScimTokenCache fronts rows with a cache of ttl (ScimTokenCacheTTL when 0).
func NewScimTokenCache(rows ScimTokenRows, ttl time.Duration, now func() time.Time) *ScimTokenCache {
	if ttl <= 0 {
		ttl = ScimTokenCacheTTL
	}
	return &ScimTokenCache{Rows: rows, TTL: ttl, Now: now, rows: map[string]cachedToken{}}
}

func tokenCacheKey(system, tenant, id string) string { return system + "/" + tenant + "/" + id }

// GetScimToken is the token's row: the kept one while it is fresh, else read.
func (c *ScimTokenCache) GetScimToken(ctx context.Context, system, tenant, id string) (scimtoken.Record, bool, error) {
	k := tokenCacheKey(system, tenant, id)
	now := c.Now()
	c.mu.Lock()
	e, ok := c.rows[k]
	c.mu.Unlock()
	if ok && !e.revoked && now.Before(e.until) {
		return e.rec, true, nil
	}
	rec, found, err := c.Rows.GetScimToken(ctx, system, tenant, id)
	if err != nil || !found {
		return rec, found, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.rows[k]; ok && old.revoked && c.Now().Before(old.until) {
		// Revoked here while it was being read: not kept.
		return rec, found, nil
	}
	c.makeRoom(now)
	c.rows[k] = cachedToken{rec: rec, until: now.Add(c.TTL)}
	return rec, found, nil
}

// makeRoom drops expired rows, and then any, while the cache is full. Under c.mu.
func (c *ScimTokenCache) makeRoom(now time.Time) {
	if len(c.rows) < maxCachedScimTokens {
		return
	}
	for k, e := range c.rows {
		if !now.Before(e.until) {
			delete(c.rows, k)
		}
	}
	for k := range c.rows {
		if len(c.rows) < maxCachedScimTokens {
			break
		}
		delete(c.rows, k)
	}
}

// PutScimToken stores a new token.
func (c *ScimTokenCache) PutScimToken(ctx context.Context, rec scimtoken.Record) error {
	return c.Rows.PutScimToken(ctx, rec)
}

// ListScimTokens lists a tenant's tokens from the store.
func (c *ScimTokenCache) ListScimTokens(ctx context.Context, system, tenant string) ([]scimtoken.Record, error) {
	return c.Rows.ListScimTokens(ctx, system, tenant)
}

// DeleteScimToken revokes a token: this process forgets it before the row goes, and does
// not keep it again for TTL.
func (c *ScimTokenCache) DeleteScimToken(ctx context.Context, system, tenant, id string) (bool, error) {
	k := tokenCacheKey(system, tenant, id)
	c.mu.Lock()
	c.makeRoom(c.Now())
	c.rows[k] = cachedToken{revoked: true, until: c.Now().Add(c.TTL)}
	c.mu.Unlock()
	return c.Rows.DeleteScimToken(ctx, system, tenant, id)
}
