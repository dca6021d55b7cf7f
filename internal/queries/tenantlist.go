package queries

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/objects"
)

// configTableKey is the key of `{p}_Config`.
var configTableKey = []string{"system_id", "tenant_id"}

// Tenants is a page of the tenants of a system, by tenant id, as Tenant shows each (never
// the secret). allowed says which tenants the caller may see; the others are left out, so
// that a token for some tenants lists only those. A system id that cannot exist has no
// tenants. It is one Query on the Config table's partition of the system: a marker row of
// that table (kept under a system id no system can have) is never read, and rows whose
// tenant id no tenant can have are skipped all the same.
func (s *Service) Tenants(ctx context.Context, system string, p PageRequest, allowed func(system, tenant string) bool) (Page[objects.Tenant], error) {
	if err := p.check(); err != nil {
		return Page[objects.Tenant]{}, err
	}
	spec := listSpec{
		id:        listID{System: system, List: "tenants"},
		table:     s.tenants.table,
		keyCond:   "#h = :h",
		names:     map[string]string{"#h": "system_id"},
		values:    map[string]types.AttributeValue{":h": str(system)},
		ascending: true,
		keyAttrs:  configTableKey,
	}
	if !identity.ValidID(system) {
		// Still check the cursor, so that a bad one is a 400 here as everywhere.
		if p.Cursor != "" {
			if _, err := s.cursors.decode(p.Cursor, spec.id, spec.keyAttrs); err != nil {
				return Page[objects.Tenant]{}, err
			}
		}
		return Page[objects.Tenant]{Items: []objects.Tenant{}}, nil
	}
	return runList(ctx, s.db, s.cursors, spec, p, func(_ context.Context, raw []map[string]types.AttributeValue) ([]*objects.Tenant, error) {
		out := make([]*objects.Tenant, len(raw))
		for i, item := range raw {
			row, err := dynamo.DecodeTenant(item)
			if err != nil {
				return nil, err
			}
			if row.SystemID != system || !identity.ValidID(row.TenantID) || (allowed != nil && !allowed(row.SystemID, row.TenantID)) {
				continue
			}
			v := tenantView(row)
			out[i] = &v
		}
		return out, nil
	})
}
