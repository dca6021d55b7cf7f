package dynamo_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// mappingCalls records what a TenantStore asks of Lambda's mappings (the control plane is
// not here; internal/mappings is tested against its fake).
type mappingCalls struct {
	mu              sync.Mutex
	ensured, remove []string
}

func (m *mappingCalls) Ensure(_ context.Context, arn string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ensured = append(m.ensured, arn)
	return nil
}

func (m *mappingCalls) Remove(_ context.Context, arns ...string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remove = append(m.remove, arns...)
	return nil
}

// A drop removes the mappings of the stream its incarnation noted, by ARN: a table of the
// same name made again (a newer incarnation) has another stream, which a late drop of the
// old one cannot reach.
func TestADropRemovesTheMappingsOfItsIncarnationsStreamOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := dynamotest.Current(t).DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("drop")}
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	calls := &mappingCalls{}
	store := dynamo.NewTenantStore(db, names).WithMappings(calls)
	rec := commands.TenantRecord{System: "acme", ID: "eu", Status: commands.TenantProvisioning, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := store.PutTenant(ctx, rec, 0); err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureTables(ctx, "acme", "eu"); err != nil {
		t.Fatal(err)
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(names.Commands("acme", "eu"))})
	if err != nil {
		t.Fatal(err)
	}
	first := aws.ToString(out.Table.LatestStreamArn)
	if !slices.Equal(calls.ensured, []string{first}) {
		t.Fatalf("mapped %v, want the table's stream %s", calls.ensured, first)
	}
	row, err := store.GetTenant(ctx, "acme", "eu")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.DropTenant(ctx, "acme", "eu", row.CreatedAt); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(calls.remove, []string{first}) {
		t.Fatalf("drop removed the mappings of %v, want exactly its stream %s", calls.remove, first)
	}

	// An incarnation whose provisioning noted no stream (its tables never all made) made no
	// mappings: its drop removes none, and so none of another incarnation's.
	calls.remove = nil
	rec.CreatedAt = time.Now()
	if err := store.PutTenant(ctx, rec, 0); err != nil {
		t.Fatal(err)
	}
	if err := store.DropTenant(ctx, "acme", "eu", rec.CreatedAt); err != nil {
		t.Fatal(err)
	}
	if len(calls.remove) != 0 {
		t.Fatalf("a drop without a noted stream removed the mappings of %v", calls.remove)
	}
}
