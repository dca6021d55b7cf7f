package dynamo_test

import (
	"context"
	"testing"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// A configured table quota (SSO_TABLE_QUOTA) is counted before a tenant's tables are
// made: a tenant that fits is made; one whose tables would pass it is refused whole, as
// table_quota_exceeded, with none of its tables made. Without a quota nothing is counted.
func TestAConfiguredTableQuotaRefusesATenantWholeBeforeMakingAnyTable(t *testing.T) {
	ctx := context.Background()
	db := dynamotest.Current(t).DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("quota")}
	if err := dynamo.NewTenantStore(db, names).CreateTables(ctx, "acme", "first"); err != nil {
		t.Fatal(err)
	}
	perTenant, err := dynamo.CountTables(ctx, db, names.Prefix)
	if err != nil || perTenant == 0 {
		t.Fatalf("%d tables of one tenant (%v)", perTenant, err)
	}
	// Room for exactly one more tenant.
	store := dynamo.NewTenantStore(db, names).WithTableQuota(2*perTenant + perTenant - 1)
	if err := store.CreateTables(ctx, "acme", "second"); err != nil {
		t.Fatalf("a tenant within the quota: %v", err)
	}
	err = store.CreateTables(ctx, "acme", "third")
	if apperr.CodeOf(err) != apperr.CodeTableQuotaExceeded {
		t.Fatalf("a tenant past the quota: %v, want %s", err, apperr.CodeTableQuotaExceeded)
	}
	if n, err := dynamo.CountTables(ctx, db, names.Prefix); err != nil || n != 2*perTenant {
		t.Fatalf("%d tables after the refusal (%v), want %d: none of the refused tenant's", n, err, 2*perTenant)
	}
}
