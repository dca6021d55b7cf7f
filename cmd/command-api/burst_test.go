package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// concurrentCreationLimit is DynamoDB's limit on tables with secondary indexes being
// created at a time in an account.
const concurrentCreationLimit = 250

// controlPlane stands between a command API and DynamoDB Local and plays DynamoDB's
// control plane for the tenants' tables, which AWS rate limits make impossible to run
// here: a table stays CREATING until it has been described once (its creator's waiter
// polls it) and, while the test holds the control plane, for as long as it holds it (so
// that a burst meets the limit whatever the machine's speed); a CreateTable while limit
// tables are CREATING is refused with
// LimitExceededException, with the message AWS gives for concurrent operations. The
// tenants' tables exist only here (so that a burst of a thousand tenants stays quick);
// every other call, the tenant rows in `{p}_Config` among them, goes to DynamoDB Local.
type controlPlane struct {
	srv    *httptest.Server
	rp     *httputil.ReverseProxy
	prefix string
	limit  int

	mu        sync.Mutex
	tables    map[string]string // name → TableStatus
	holding   bool
	creating  int
	peak      int
	refusals  int
	deletions int
}

func newControlPlane(t *testing.T, prefix string, limit int) *controlPlane {
	t.Helper()
	target, err := url.Parse(dynamotest.Current(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	c := &controlPlane{rp: httputil.NewSingleHostReverseProxy(target), prefix: prefix, limit: limit, tables: map[string]string{}}
	c.srv = httptest.NewServer(c)
	t.Cleanup(c.srv.Close)
	return c
}

// tenantTable says whether the name is a tenant's table under the prefix.
func (c *controlPlane) tenantTable(name string) bool {
	if !strings.HasPrefix(name, c.prefix+"_") {
		return false
	}
	for _, suffix := range []string{"_user_commands", "_users", "_activities"} {
		if strings.HasSuffix(name, suffix) {
			return true
		}
	}
	return false
}

func (c *controlPlane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var in struct{ TableName string }
	_ = json.Unmarshal(body, &in)
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	if !c.tenantTable(in.TableName) {
		c.rp.ServeHTTP(w, r)
		return
	}
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	fault := func(typ, msg string) {
		answer(http.StatusBadRequest, map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + typ, "message": msg})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	status, exists := c.tables[in.TableName]
	switch op {
	case "CreateTable":
		switch {
		case exists:
			fault("ResourceInUseException", "Table already exists: "+in.TableName)
		case c.creating >= c.limit:
			c.refusals++
			fault("LimitExceededException", "Subscriber limit exceeded: You have exceeded the maximum number of indexed tables that can be created simultaneously")
		default:
			c.tables[in.TableName] = "CREATING"
			c.creating++
			c.peak = max(c.peak, c.creating)
			answer(http.StatusOK, map[string]any{"TableDescription": map[string]any{"TableName": in.TableName, "TableStatus": "CREATING"}})
		}
	case "DescribeTable":
		if !exists {
			fault("ResourceNotFoundException", "Requested resource not found: Table: "+in.TableName+" not found")
			return
		}
		answer(http.StatusOK, map[string]any{"Table": map[string]any{"TableName": in.TableName, "TableStatus": status,
			"LatestStreamArn": "arn:aws:dynamodb:eu-west-1:000000000000:table/" + in.TableName + "/stream/2026-01-01T00:00:00.000"}})
		if status == "CREATING" && !c.holding {
			c.tables[in.TableName] = "ACTIVE"
			c.creating--
		}
	case "UpdateItem":
		// The as-of index's coverage mark (internal/asof), written while the tenant is
		// provisioning: the tables here hold no items, so the write is taken and dropped.
		if !exists {
			fault("ResourceNotFoundException", "Requested resource not found")
			return
		}
		answer(http.StatusOK, map[string]any{})
	case "Scan":
		// The member index's mark (internal/dynamo, markMemberIndex) is written into a
		// write table that holds nothing yet; the tables here hold nothing.
		if !exists {
			fault("ResourceNotFoundException", "Requested resource not found")
			return
		}
		answer(http.StatusOK, map[string]any{"Items": []any{}, "Count": 0, "ScannedCount": 0})
	case "PutItem":
		if !exists {
			fault("ResourceNotFoundException", "Requested resource not found")
			return
		}
		answer(http.StatusOK, map[string]any{})
	case "DescribeTimeToLive":
		answer(http.StatusOK, map[string]any{"TimeToLiveDescription": map[string]any{"TimeToLiveStatus": "ENABLED"}})
	default:
		// Deleting a tenant's table (an undone provisioning) or anything else.
		c.deletions++
		fault("ValidationException", "the test's control plane does not do "+op)
	}
}

func (c *controlPlane) hold(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holding = on
}

// activeTenants counts the tenants of the system that are active in `{p}_Config`, and
// those in any other status.
func activeTenants(ctx context.Context, db *dynamodb.Client, names dynamo.Names, system string) (active, other int, err error) {
	pg := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{
		TableName:                 aws.String(names.Config()),
		FilterExpression:          aws.String("system_id = :s"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: system}},
		ConsistentRead:            aws.Bool(true),
	})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return 0, 0, err
		}
		for _, it := range page.Items {
			if attrS(it, "status") == dynamo.TenantActive {
				active++
			} else {
				other++
			}
		}
	}
	return active, other, nil
}

// A thousand tenants asked for at once, four times what DynamoDB creates at a time: each
// is answered 201 or 202, none is refused as "quota" or undone, and all become active.
func TestOnboardingBurstPastTheConcurrentCreationLimitFinishesEveryTenant(t *testing.T) {
	const n = 1000
	env := testEnv(t)
	env["SSO_PROVISION_WAIT"] = "1ms"
	env["SSO_LOG_LEVEL"] = "info"
	cp := newControlPlane(t, env["SSO_TABLE_PREFIX"], concurrentCreationLimit)
	env["AWS_ENDPOINT_URL_DYNAMODB"] = cp.srv.URL
	a := startApp(t, env)

	// No table is made until every tenant has been answered: the burst meets the limit.
	cp.hold(true)
	// All asked for at once, by as many clients as a burst of onboarding would bring (a
	// hundred connections: a thousand at once only measures the test machine's sockets).
	var wg sync.WaitGroup
	answers := make([]reply, n)
	clients := make(chan struct{}, 100)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clients <- struct{}{}
			defer func() { <-clients }()
			answers[i] = a.do(t, "POST", "/v1/systems/burst/tenants", map[string]any{"tenant_id": fmt.Sprintf("t%04d", i)})
		}()
	}
	wg.Wait()
	for i, r := range answers {
		if r.status != http.StatusCreated && r.status != http.StatusAccepted {
			t.Fatalf("tenant %d answered %s", i, r)
		}
	}
	cp.hold(false)

	ctx := context.Background()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		active, other, err := activeTenants(ctx, a.db, a.names, "burst")
		if err != nil {
			t.Fatal(err)
		}
		if active == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tenants active, %d not, after the burst", active, n, other)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.refusals == 0 {
		t.Fatal("the burst never reached the concurrent-creation limit: the test proves nothing")
	}
	if cp.deletions != 0 {
		t.Errorf("%d tables deleted or otherwise touched: a provisioning was undone", cp.deletions)
	}
	if len(cp.tables) != 3*n {
		t.Errorf("%d tenant tables, want %d", len(cp.tables), 3*n)
	}
	if cp.peak > concurrentCreationLimit {
		t.Errorf("%d tables creating at once, past the limit %d", cp.peak, concurrentCreationLimit)
	}
}

// Lambda mode's resume-provisioning task: tenants left provisioning by a burst past the
// concurrent-creation limit are finished side by side, round after round, each round
// ending before its invocation's deadline; none is undone.
func TestResumeProvisioningFinishesABurstSideBySideWithinDeadlines(t *testing.T) {
	const n = 300
	ctx := context.Background()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("capi")}
	local := dynamotest.Current(t)
	if err := dynamo.EnsureSharedTables(ctx, local.DynamoDB(), names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	cp := newControlPlane(t, names.Prefix, concurrentCreationLimit)
	db := dynamodb.NewFromConfig(local.AWSConfig(), func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(cp.srv.URL) })
	tenants := dynamo.NewTenantStore(db, names)
	h := commands.NewProvisionTenantHandler(tenants, nil, time.Now)

	// The invocations that answered 202: rows written, tables asked for, nothing made yet.
	cp.hold(true)
	for i := range n {
		rec, _, err := h.Start(ctx, commands.ProvisionTenant{System: "burst", Tenant: fmt.Sprintf("t%04d", i)})
		if err != nil {
			t.Fatalf("tenant %d: %v", i, err)
		}
		if rec.Status != commands.TenantProvisioning {
			t.Fatalf("tenant %d is %q, want provisioning", i, rec.Status)
		}
	}
	cp.hold(false)

	for round := 0; ; round++ {
		recs, err := tenants.ProvisioningTenants(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			break
		}
		if round == 100 {
			t.Fatalf("%d tenants still provisioning after %d rounds", len(recs), round)
		}
		// An invocation of a few seconds, as the scheduled task's deadline would give.
		invocation, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = h.FinishPending(invocation, recs, commands.FinishPendingOptions{Concurrency: 32, Reserve: time.Second})
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	active, other, err := activeTenants(ctx, local.DynamoDB(), names, "burst")
	if err != nil {
		t.Fatal(err)
	}
	if active != n || other != 0 {
		t.Fatalf("%d tenants active and %d not, want %d active", active, other, n)
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.refusals == 0 {
		t.Fatal("the burst never reached the concurrent-creation limit: the test proves nothing")
	}
	if cp.deletions != 0 {
		t.Errorf("%d tables deleted or otherwise touched: a provisioning was undone", cp.deletions)
	}
}
