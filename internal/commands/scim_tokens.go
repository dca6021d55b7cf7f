package commands

import (
	"context"
	"time"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/scimtoken"
)

// ScimTokenStore keeps the tenants' SCIM tokens (their HMACs only).
type ScimTokenStore interface {
	PutScimToken(ctx context.Context, rec scimtoken.Record) error
	ListScimTokens(ctx context.Context, system, tenant string) ([]scimtoken.Record, error)
	// DeleteScimToken reports found false when there was no such token.
	DeleteScimToken(ctx context.Context, system, tenant, id string) (found bool, err error)
}

const maxScimTokenName = 100

// CreateScimToken makes a SCIM token for a tenant: a named, long-lived secret for one
// identity provider's connection, valid only on that tenant's SCIM endpoints.
type CreateScimToken struct {
	System, Tenant, Name string
	// ExpiresAt is nil for a token that does not expire.
	ExpiresAt *time.Time
}

// ScimTokenHandlers decide the SCIM token commands.
type ScimTokenHandlers struct {
	store   ScimTokenStore
	tenants TenantStore
	hasher  *scimtoken.Hasher
	now     Clock
	newID   IDs
}

func NewScimTokenHandlers(store ScimTokenStore, tenants TenantStore, hasher *scimtoken.Hasher, now Clock, newID IDs) ScimTokenHandlers {
	return ScimTokenHandlers{store: store, tenants: tenants, hasher: hasher, now: now, newID: newID}
}

// Create stores a new token and returns it with the token itself, which is never shown
// again: only its HMAC is kept.
func (h ScimTokenHandlers) Create(ctx context.Context, cmd CreateScimToken, actor string) (scimtoken.Record, string, error) {
	now := h.now().UTC().Truncate(time.Millisecond)
	var p problems
	checkText(&p, "name", cmd.Name, maxScimTokenName, false)
	if cmd.Name == "" {
		p.Add("name", "is required")
	}
	if cmd.ExpiresAt != nil && !cmd.ExpiresAt.After(now) {
		p.Add("expires_at", "must be in the future")
	}
	if err := p.Err(invalidRequest); err != nil {
		return scimtoken.Record{}, "", err
	}
	if _, err := h.tenants.GetTenant(ctx, cmd.System, cmd.Tenant); err != nil {
		return scimtoken.Record{}, "", err
	}
	rec := scimtoken.Record{System: cmd.System, Tenant: cmd.Tenant, ID: h.newID(), Name: cmd.Name, CreatedBy: actor, CreatedAt: now}
	if cmd.ExpiresAt != nil {
		rec.ExpiresAt = cmd.ExpiresAt.UTC().Truncate(time.Millisecond)
	}
	token, hash, err := h.hasher.Mint(rec.ID)
	if err != nil {
		return scimtoken.Record{}, "", apperr.Internal(err)
	}
	rec.Hash = hash
	if err := h.store.PutScimToken(ctx, rec); err != nil {
		return scimtoken.Record{}, "", err
	}
	return rec, token, nil
}

// List are a tenant's tokens, without secrets.
func (h ScimTokenHandlers) List(ctx context.Context, system, tenant string) ([]scimtoken.Record, error) {
	if _, err := h.tenants.GetTenant(ctx, system, tenant); err != nil {
		return nil, err
	}
	return h.store.ListScimTokens(ctx, system, tenant)
}

// Revoke deletes a token: the next request bearing it fails.
func (h ScimTokenHandlers) Revoke(ctx context.Context, system, tenant, id string) error {
	found, err := h.store.DeleteScimToken(ctx, system, tenant, id)
	if err != nil {
		return err
	}
	if !found {
		return apperr.NotFound("SCIM token")
	}
	return nil
}
