package streams_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/streams"
)

// createStreamTable creates a table with a stream on DynamoDB Local and writes its first
// record at once (DYNAMODB-LOCAL.md trap 1); the Stream carries the ARN, as a tenant row
// does since provisioning notes it.
func createStreamTable(t *testing.T, db *dynamodb.Client, tenant string) streams.Stream {
	t.Helper()
	table := dynamotest.UniqueName(tenant)
	out, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{
			{AttributeName: aws.String("id"), AttributeType: dtypes.ScalarAttributeTypeS},
		},
		KeySchema: []dtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: dtypes.KeyTypeHash}},
		StreamSpecification: &dtypes.StreamSpecification{
			StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewTypeNewAndOldImages,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	st := streams.Stream{System: "sys", Tenant: tenant, Table: table, StreamARN: aws.ToString(out.TableDescription.LatestStreamArn)}
	localBackend{db: db}.put(t, st, "u", 1)
	return st
}

// 120 real tenants on DynamoDB Local, two consumers with AWS's budgets and the default
// idle back-off: every tenant is read by both, an idle tenant costs at most
// Consumers/IdlePollMax GetRecords a second, and a new tenant and a write to an idle one
// are picked up (the times are logged: speed is the bench's to measure). Not parallel,
// for the same reason as TestThousandsOfTenantsTwoConsumersNeverThrottled.
func TestHundredRealTenantsOnDynamoDBLocal(t *testing.T) {
	const tenants = 120
	h := newHarness(t)
	local := dynamotest.Current(t)
	var list []streams.Stream
	for i := range tenants {
		list = append(list, createStreamTable(t, h.db, fmt.Sprintf("real%d", i)))
	}
	src := streams.NewStaticSource(list...)
	const idleMax = time.Second
	awsDefaults := func(consumer string) func(*streams.Config) {
		return func(c *streams.Config) {
			c.Consumer = consumer
			c.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
			c.LeaseDuration = 10 * time.Second
			c.PollInterval, c.IdlePollMax = 250*time.Millisecond, idleMax
			c.SourceInterval, c.ShardSyncInterval = time.Second, time.Minute
			c.ShardReadRate, c.DescribeStreamRate, c.ListStreamsRate = 0, 0, 0 // AWS's: 5, 10, 5
		}
	}
	sets := map[string]*tenantSet{}
	var subs []*subscriber
	start := time.Now()
	for _, consumer := range []string{"projector", "keycloak-sync"} {
		set := &tenantSet{seen: map[string]bool{}}
		sets[consumer] = set
		s := h.newSubscriber(src, local.Streams(), nil, awsDefaults(consumer))
		subs = append(subs, s)
		consume(t, s, &recorder{}, set.add)
	}
	eventually(t, 3*time.Minute, "both consumers have read every tenant", func() bool {
		return sets["projector"].len() == tenants && sets["keycloak-sync"].len() == tenants
	})
	t.Logf("%d tenants read by both consumers in %s", tenants, time.Since(start).Round(time.Millisecond))

	calls := func(name string) float64 {
		n := 0.0
		for _, s := range subs {
			n += s.metric(t, name, nil)
		}
		return n
	}
	time.Sleep(3 * idleMax) // every shard backed off to its ceiling
	reads, describes := calls("ssodir_stream_get_records_total"), calls("ssodir_stream_api_calls_total")
	const window = 5 * time.Second
	time.Sleep(window)
	perTenant := (calls("ssodir_stream_get_records_total") - reads) / window.Seconds() / tenants
	t.Logf("idle: %.2f GetRecords per tenant per second (both consumers), %.0f DescribeStream/ListStreams calls in %s",
		perTenant, calls("ssodir_stream_api_calls_total")-describes, window)
	if ceiling := 2 / idleMax.Seconds() * 1.1; perTenant > ceiling {
		t.Errorf("an idle tenant costs %.2f GetRecords per second, want at most %.2f (two consumers, one call per IdlePollMax)", perTenant, ceiling)
	}

	// A write to an idle tenant.
	for _, set := range sets {
		set.mu.Lock()
		delete(set.seen, list[0].Tenant)
		set.mu.Unlock()
	}
	wrote := time.Now()
	localBackend{db: h.db}.put(t, list[0], "u", 2)
	eventually(t, 30*time.Second, "both consumers read the write to an idle tenant", func() bool {
		return sets["projector"].has(list[0].Tenant) && sets["keycloak-sync"].has(list[0].Tenant)
	})
	t.Logf("a write to an idle tenant read by both consumers %s after it was written", time.Since(wrote).Round(time.Millisecond))

	// A new tenant among the idle ones.
	added := time.Now()
	st := createStreamTable(t, h.db, "realnew")
	src.Add(st)
	eventually(t, time.Minute, "both consumers read the new tenant", func() bool {
		return sets["projector"].has(st.Tenant) && sets["keycloak-sync"].has(st.Tenant)
	})
	t.Logf("a new tenant's first record read by both consumers %s after its table was created", time.Since(added).Round(time.Millisecond))
}
