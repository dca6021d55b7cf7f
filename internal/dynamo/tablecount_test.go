package dynamo_test

import (
	"context"
	"testing"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// The stage's table count counts its tables and no neighbour's: not a prefix that only
// begins like it, nor one that sorts right before or after it.
func TestCountTablesCountsTheStagesTablesOnly(t *testing.T) {
	ctx := context.Background()
	db := dynamotest.Current(t).DynamoDB()
	prefix := dynamotest.UniqueName("cnt")
	for _, name := range []string{prefix + "_a", prefix + "_b_users", prefix + "_c", prefix + "x_a", prefix + "Z_a", prefix + "-a"} {
		if err := dynamo.EnsureTable(ctx, db, dynamo.IdempotencyTable(name)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := dynamo.CountTables(ctx, db, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("CountTables = %d, want 3", n)
	}
}
