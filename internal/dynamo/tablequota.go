package dynamo

import (
	"context"
	"fmt"

	"github.com/ssodir/ssodir/internal/apperr"
)

// WithTableQuota makes CreateTables refuse a tenant whose tables would take the stage past
// quota tables (SSO_TABLE_QUOTA; 0: no quota of ours, only AWS's own refusal): counted
// (CountTables) before anything is created, so a tenant past it is refused whole, as
// table_quota_exceeded, rather than half-made and undone. Set it below the account's table
// quota (deploy/'s -c table-quota, whose TableQuota alarm warns at 80 %) by what other
// stages and applications of the account use.
func (s *TenantStore) WithTableQuota(quota int) *TenantStore {
	s.tableQuota = quota
	return s
}

// checkTableQuota counts the stage's tables against its quota before a tenant's are made.
// Tenants provisioned side by side may each pass the check at the same count: the quota is
// a ceiling the stage keeps under, not an exact one (AWS's own refusal stays the backstop).
func (s *TenantStore) checkTableQuota(ctx context.Context, system, tenant string) error {
	if s.tableQuota <= 0 {
		return nil
	}
	n, err := s.CountTables(ctx)
	if err != nil {
		return err
	}
	need := len(s.tableSpecs(system, tenant))
	if n+need > s.tableQuota {
		return apperr.TableQuotaExceeded(fmt.Errorf("the stage has %d tables; tenant %s/%s needs %d more, past its quota of %d (SSO_TABLE_QUOTA)",
			n, system, tenant, need, s.tableQuota), tableQuotaRetryAfter)
	}
	return nil
}
