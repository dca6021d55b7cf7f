package commands

import (
	"context"
	"sync"

	"github.com/ssodir/ssodir/internal/apperr"
)

// TenantGate refuses commands on a tenant still provisioning with 409 tenant_not_ready,
// at the cost of one read per tenant and process: it remembers the tenants it saw active
// (a tenant never goes back to provisioning). A tenant without a row is let through: the
// command answers 404 when there are no tables.
type TenantGate struct {
	tenants TenantStore
	active  sync.Map
}

func NewTenantGate(tenants TenantStore) *TenantGate { return &TenantGate{tenants: tenants} }

// Ready reports whether commands may run on t.
func (g *TenantGate) Ready(ctx context.Context, t Tenant) error {
	key := t.System + "/" + t.ID
	if _, ok := g.active.Load(key); ok {
		return nil
	}
	rec, err := g.tenants.GetTenant(ctx, t.System, t.ID)
	switch {
	case apperr.KindOf(err) == apperr.KindNotFound:
		return nil
	case err != nil:
		return err
	case rec.Status != TenantActive:
		return apperr.TenantNotReady()
	}
	g.active.Store(key, struct{}{})
	return nil
}

// MarkActive records that a tenant is active (its provisioning just finished).
func (g *TenantGate) MarkActive(t Tenant) { g.active.Store(t.System+"/"+t.ID, struct{}{}) }
