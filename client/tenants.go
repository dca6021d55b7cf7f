package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"time"
)

// Provisioned is the answer to a tenant provisioning.
type Provisioned struct {
	Tenant Tenant
	// Status is 201 (created, tables ready), 202 (accepted, still provisioning: see
	// WaitTenantActive) or 200 (already there with the same settings).
	Status int
}

// CreateTenant provisions a tenant in a system (scope tenants:admin). A tenant there with
// other settings is an *Error with code tenant_exists; a reached table quota is a 503
// table_quota_exceeded, returned after the retries.
func (c *Client) CreateTenant(ctx context.Context, system string, in NewTenant, opts ...Option) (*Provisioned, error) {
	var t Tenant
	resp, err := c.call(ctx, c.command, http.MethodPost, tenantsPath(system), in, &t, opts)
	if err != nil {
		return nil, err
	}
	return &Provisioned{Tenant: t, Status: resp.status}, nil
}

// ListTenants reads one page of a system's tenants, by tenant id (query API); cursor is ""
// for the first page. A token limited to some tenants sees only those.
func (c *Client) ListTenants(ctx context.Context, system string, limit int, cursor string) (*Page[Tenant], error) {
	return listPage[Tenant](ctx, c, tenantsPath(system), limitValues(limit), cursor)
}

// Tenants iterates over every tenant of a system the token may read, by tenant id.
func (c *Client) Tenants(ctx context.Context, system string, limit int) iter.Seq2[Tenant, error] {
	return walk[Tenant](ctx, c, tenantsPath(system), limitValues(limit))
}

func tenantsPath(system string) string { return "/v1/systems/" + seg(system) + "/tenants" }

// WaitTenantActive polls the tenant on the query API until its status is active (a
// provisioning answered 202), every interval (1 s when 0), until ctx ends.
func (c *Client) WaitTenantActive(ctx context.Context, system, tenant string, interval time.Duration) (*Tenant, error) {
	if interval <= 0 {
		interval = time.Second
	}
	for {
		t, err := c.Tenant(system, tenant).Get(ctx)
		if err != nil && !IsNotFound(err) {
			return nil, err
		}
		if err == nil && t.Status == TenantActive {
			return t, nil
		}
		if err == nil && t.Status == TenantDropping {
			return nil, fmt.Errorf("tenant %s/%s is being dropped (its provisioning was undone at the table quota); provision it again", system, tenant)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for tenant %s/%s to be active: %w", system, tenant, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// TenantClient is a Client scoped to one tenant.
type TenantClient struct {
	c              *Client
	system, tenant string
}

// Tenant scopes the client to one tenant.
func (c *Client) Tenant(system, tenant string) *TenantClient {
	return &TenantClient{c: c, system: system, tenant: tenant}
}

// System and ID name the tenant.
func (t *TenantClient) System() string { return t.system }
func (t *TenantClient) ID() string     { return t.tenant }

func (t *TenantClient) path(p string) string {
	return "/v1/systems/" + seg(t.system) + "/tenants/" + seg(t.tenant) + p
}

// Get reads the tenant's settings (query API).
func (t *TenantClient) Get(ctx context.Context) (*Tenant, error) {
	var out Tenant
	if _, err := t.c.call(ctx, t.c.query, http.MethodGet, t.path(""), nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetKeycloak replaces the tenant's Keycloak settings (scope tenants:admin).
func (t *TenantClient) SetKeycloak(ctx context.Context, k KeycloakSettings, opts ...Option) (*Tenant, error) {
	var out Tenant
	if _, err := t.c.call(ctx, t.c.command, http.MethodPut, t.path("/keycloak"), k, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}
