package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/streams"
)

// provision does what ProvisionTenant does with the store: row, tables, active.
func provision(t *testing.T, store *dynamo.TenantStore, system, tenant string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	rec := commands.TenantRecord{System: system, ID: tenant, Status: commands.TenantProvisioning, CreatedAt: now, UpdatedAt: now}
	if err := store.PutTenant(ctx, rec, 0); err != nil {
		t.Fatal(err)
	}
	if err := store.EnsureTables(ctx, system, tenant); err != nil {
		t.Fatal(err)
	}
	rec.Status = commands.TenantActive
	if err := store.PutTenant(ctx, rec, 1); err != nil {
		t.Fatalf("activate %s/%s: %v", system, tenant, err)
	}
}

func streamNames(list []streams.Stream) map[string]string {
	out := map[string]string{}
	for _, st := range list {
		out[st.Tenant] = st.StreamARN
	}
	return out
}

// Provisioning notes the write table's stream in the tenant row, so consumers need no
// ListStreams; the consumers' Source answers from its cache until a tenant becomes
// active (one item read per poll), and re-reads everything every FullRefresh.
func TestTenantStreamsCarryTheStreamARNAndAreReadOnlyWhenTheListChanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dynamotest.Current(t).DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("tsrc")}
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	store := dynamo.NewTenantStore(db, names)
	tenants := dynamo.NewTenants(db, names)
	src := dynamo.NewTenantStreams(tenants)
	t.Cleanup(func() {
		for _, tb := range []string{names.Config(), names.Idempotency(), names.Commands("s", "a"), names.Users("s", "a", 0),
			names.Activities("s", "a", 0), names.Commands("s", "b"), names.Users("s", "b", 0), names.Activities("s", "b", 0)} {
			_, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(tb)})
		}
	})

	provision(t, store, "s", "a")
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(names.Commands("s", "a"))})
	if err != nil {
		t.Fatal(err)
	}
	row, err := tenants.Get(ctx, "s", "a")
	if err != nil {
		t.Fatal(err)
	}
	if want := aws.ToString(desc.Table.LatestStreamArn); row.CommandsStreamARN != want || want == "" {
		t.Errorf("tenant row's stream ARN = %q, want the table's %q", row.CommandsStreamARN, want)
	}
	list, err := src.Streams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := streamNames(list); len(got) != 1 || got["a"] != row.CommandsStreamARN {
		t.Fatalf("streams = %v, want tenant a with its ARN", got)
	}

	// A row written without the list's version moving is not seen from the cache...
	hidden := dynamo.Tenant{SystemID: "s", TenantID: "hidden", Status: dynamo.TenantActive, CommandsTable: "t-hidden"}
	if err := tenants.Put(ctx, hidden, 0); err != nil {
		t.Fatal(err)
	}
	if list, err = src.Streams(ctx); err != nil || len(list) != 1 {
		t.Fatalf("streams = %v (%v): the poll should have answered from its cache", streamNames(list), err)
	}
	// ...until a tenant becomes active, which moves it: then everything is read again.
	provision(t, store, "s", "b")
	if list, err = src.Streams(ctx); err != nil {
		t.Fatal(err)
	}
	if got := streamNames(list); len(got) != 3 || got["b"] == "" {
		t.Errorf("streams = %v, want a, b (with its ARN) and hidden", got)
	}
	all, err := tenants.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Errorf("Tenants.List = %d rows, want the 3 tenants and not the list's marker", len(all))
	}

	// Every FullRefresh the rows are read whatever the version says.
	src.FullRefresh = time.Nanosecond
	hidden2 := dynamo.Tenant{SystemID: "s", TenantID: "hidden2", Status: dynamo.TenantActive, CommandsTable: "t-hidden2"}
	if err := tenants.Put(ctx, hidden2, 0); err != nil {
		t.Fatal(err)
	}
	if list, err = src.Streams(ctx); err != nil || len(list) != 4 {
		t.Errorf("streams = %v (%v), want 4 after a full refresh", streamNames(list), err)
	}
}
