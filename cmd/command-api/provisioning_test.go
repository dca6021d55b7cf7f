package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// accountProxy stands between the command API and DynamoDB Local and behaves as an AWS
// account would where DynamoDB Local does not: it has a table quota (tables under the
// test's prefix; CreateTable beyond it is refused with DynamoDB's LimitExceededException,
// as AWS answers it), and it can hold DescribeTable, so that tables stay "being created"
// as long as a test likes (DynamoDB Local makes them at once).
type accountProxy struct {
	srv    *httptest.Server
	rp     *httputil.ReverseProxy
	db     *dynamodb.Client
	prefix string

	mu       sync.Mutex
	quota    int  // tables allowed under prefix; 0: no quota
	holding  bool // DescribeTable waits until released
	release  chan struct{}
	refusals int
}

// proxiedEnv is a command API's environment with its DynamoDB calls sent through a new
// account proxy.
func proxiedEnv(t *testing.T) (map[string]string, *accountProxy) {
	t.Helper()
	env := testEnv(t)
	p := newAccountProxy(t, env["SSO_TABLE_PREFIX"])
	env["AWS_ENDPOINT_URL_DYNAMODB"] = p.srv.URL
	return env, p
}

func newAccountProxy(t *testing.T, prefix string) *accountProxy {
	t.Helper()
	target, err := url.Parse(dynamotest.Current(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &accountProxy{rp: httputil.NewSingleHostReverseProxy(target), db: dynamotest.Current(t).DynamoDB(), prefix: prefix,
		release: make(chan struct{})}
	p.srv = httptest.NewServer(p)
	t.Cleanup(func() { p.releaseDescribe(); p.srv.Close() })
	return p
}

func (p *accountProxy) setQuota(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.quota = n
}

func (p *accountProxy) holdDescribe() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding, p.release = true, make(chan struct{})
}

func (p *accountProxy) releaseDescribe() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.holding {
		p.holding = false
		close(p.release)
	}
}

// tables lists the tables under the prefix, on DynamoDB Local itself.
func (p *accountProxy) tables(ctx context.Context) ([]string, error) {
	var out []string
	pg := dynamodb.NewListTablesPaginator(p.db, &dynamodb.ListTablesInput{})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, n := range page.TableNames {
			if strings.HasPrefix(n, p.prefix+"_") {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

func (p *accountProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Header.Get("X-Amz-Target") {
	case "DynamoDB_20120810.CreateTable":
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ TableName string }
		_ = json.Unmarshal(body, &in)
		p.mu.Lock()
		quota := p.quota
		p.mu.Unlock()
		if quota > 0 && strings.HasPrefix(in.TableName, p.prefix+"_") {
			have, err := p.tables(r.Context())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			if len(have) >= quota {
				p.mu.Lock()
				p.refusals++
				p.mu.Unlock()
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#LimitExceededException","message":"Subscriber limit exceeded: Only `+
					strconv.Itoa(quota)+` tables can be created in this region for this account"}`)
				return
			}
		}
	case "DynamoDB_20120810.DescribeTable":
		p.mu.Lock()
		holding, release := p.holding, p.release
		p.mu.Unlock()
		if holding {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
	}
	p.rp.ServeHTTP(w, r)
}

func (p *accountProxy) refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusals
}

// tenantRow reads a tenant's row in `{p}_Config`, directly; nil when there is none.
func (a *app) tenantRow(t *testing.T, system, tenant string) map[string]types.AttributeValue {
	t.Helper()
	out, err := a.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(a.names.Config()),
		Key:            map[string]types.AttributeValue{"system_id": &types.AttributeValueMemberS{Value: system}, "tenant_id": &types.AttributeValueMemberS{Value: tenant}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

// waitActive polls the tenant's row until it is active.
func (a *app) waitActive(t *testing.T, system, tenant string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		row := a.tenantRow(t, system, tenant)
		if row != nil && attrS(row, "status") == dynamo.TenantActive {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenant %s/%s not active within %s: %v", system, tenant, within, row)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestProvisioningAnswers202AndFinishesInTheBackground(t *testing.T) {
	env, p := proxiedEnv(t)
	env["SSO_PROVISION_WAIT"] = "300ms"
	a := startApp(t, env)
	id := dynamotest.UniqueName("t")
	base := "/v1/systems/acme/tenants/" + id

	p.holdDescribe()
	r := a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id}).want(t, http.StatusAccepted)
	var body struct{ Status string }
	if err := json.Unmarshal(r.body, &body); err != nil || body.Status != dynamo.TenantProvisioning {
		t.Fatalf("202 body %s, want status provisioning", r.body)
	}
	if r.header.Get("Location") != base {
		t.Errorf("Location %q, want %q", r.header.Get("Location"), base)
	}
	a.do(t, "POST", base+"/users", map[string]any{"username": "early"}).wantProblem(t, http.StatusConflict, "tenant_not_ready")
	a.do(t, "PUT", base+"/groups/g/members/early", nil).wantProblem(t, http.StatusConflict, "tenant_not_ready")
	// Asked again while it is still provisioning: 202 again, and nothing is done twice.
	a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id}).want(t, http.StatusAccepted)

	p.releaseDescribe()
	a.waitActive(t, "acme", id, 30*time.Second)
	if attrS(a.tenantRow(t, "acme", id), "commands_stream_arn") == "" {
		t.Error("the background provisioning did not note the stream ARN")
	}
	a.do(t, "POST", base+"/users", map[string]any{"username": "first"}).want(t, http.StatusCreated)
	a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id}).want(t, http.StatusOK)
}

func TestProvisioningLeftByAStoppedProcessIsFinished(t *testing.T) {
	env, p := proxiedEnv(t)
	env["SSO_PROVISION_WAIT"] = "1ms"
	first := startApp(t, env)
	id := dynamotest.UniqueName("t")

	// The first process answers 202 and stops before the tables are ready.
	p.holdDescribe()
	first.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id}).want(t, http.StatusAccepted)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	p.releaseDescribe()
	if s := attrS(first.tenantRow(t, "acme", id), "status"); s != dynamo.TenantProvisioning {
		t.Fatalf("after the stop the tenant is %q, want provisioning (the test did not stop it mid-way)", s)
	}

	// Another process finishes it on its own, without any request for this tenant.
	env2 := map[string]string{}
	for k, v := range env {
		env2[k] = v
	}
	env2["SSO_PROVISION_RESUME"] = "200ms"
	second := startApp(t, env2)
	second.waitActive(t, "acme", id, 30*time.Second)
	second.do(t, "POST", "/v1/systems/acme/tenants/"+id+"/users", map[string]any{"username": "first"}).want(t, http.StatusCreated)

	// A row a process wrote just before dying, without asking for any table, is finished too.
	lone := dynamotest.UniqueName("t")
	ctx := context.Background()
	store := dynamo.NewTenants(second.db, second.names)
	now := dynamo.FormatTime(time.Now())
	if err := store.Put(ctx, dynamo.Tenant{SystemID: "acme", TenantID: lone, Status: dynamo.TenantProvisioning, SSOType: "keycloak",
		CommandsTable: second.names.Commands("acme", lone), UsersTable: second.names.Users("acme", lone, 0),
		ActivitiesTable: second.names.Activities("acme", lone, 0), CreatedAt: now}, 0); err != nil {
		t.Fatal(err)
	}
	second.waitActive(t, "acme", lone, 30*time.Second)
	second.do(t, "POST", "/v1/systems/acme/tenants/"+lone+"/groups", map[string]any{"name": "g"}).want(t, http.StatusCreated)
}

func TestProvisioningBeyondTheTableQuotaLeavesNothing(t *testing.T) {
	env, p := proxiedEnv(t)
	a := startApp(t, env)
	ctx := context.Background()

	a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": "one"}).want(t, http.StatusCreated)
	before, err := p.tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Room for one more table: the next tenant's first table is made, its second refused.
	p.setQuota(len(before) + 1)
	r := a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": "two"})
	pr := r.wantProblem(t, http.StatusServiceUnavailable, "table_quota_exceeded")
	if r.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on table_quota_exceeded")
	}
	if pr.Detail == "" && pr.Title == "" {
		t.Errorf("problem without a title or detail: %s", r.body)
	}
	if p.refused() == 0 {
		t.Fatal("the quota was never hit")
	}
	after, err := p.tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("tables after the refusal %v, want those before %v", after, before)
	}
	if row := a.tenantRow(t, "acme", "two"); row != nil {
		t.Errorf("a tenant row was left: %v", row)
	}
	a.do(t, "POST", "/v1/systems/acme/tenants/two/users", map[string]any{"username": "x"}).wantProblem(t, http.StatusNotFound, "not_found")

	// Once the quota is raised, the same request provisions it.
	p.setQuota(0)
	a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": "two"}).want(t, http.StatusCreated)
	a.do(t, "POST", "/v1/systems/acme/tenants/two/users", map[string]any{"username": "x"}).want(t, http.StatusCreated)
}

// A provisioning refused by the table quota is undone by one command API while another's
// resumption would finish it: the undo marks the tenant dropping before it deletes
// anything, so the tenant ends either active with all its tables or gone with none of them
// — never active without tables. The undoing process is held on DescribeTable (its account
// proxy) while the other one runs freely.
func TestATenantBeingDroppedIsNeverFinished(t *testing.T) {
	env, held := proxiedEnv(t)
	dropper := startApp(t, env)
	ctx := context.Background()

	env2 := map[string]string{}
	for k, v := range env {
		env2[k] = v
	}
	free := newAccountProxy(t, env["SSO_TABLE_PREFIX"])
	env2["AWS_ENDPOINT_URL_DYNAMODB"] = free.srv.URL
	env2["SSO_PROVISION_RESUME"] = "100ms"
	resumer := startApp(t, env2)

	id := dynamotest.UniqueName("t")
	before, err := held.tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Room for one more table: the tenant's first table is made, its second refused, and
	// the undo waits on DescribeTable.
	held.setQuota(len(before) + 1)
	held.holdDescribe()
	answered := make(chan reply, 1)
	go func() { answered <- dropper.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id}) }()

	// The other command API resumes what it finds meanwhile.
	deadline := time.Now().Add(30 * time.Second)
	for {
		row := resumer.tenantRow(t, "acme", id)
		if held.refused() > 0 && (row == nil || attrS(row, "status") == dynamo.TenantActive) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resuming command API did nothing with the tenant: %v", row)
		}
		time.Sleep(20 * time.Millisecond)
	}
	held.releaseDescribe()
	select {
	case r := <-answered:
		r.wantProblem(t, http.StatusServiceUnavailable, "table_quota_exceeded")
	case <-time.After(time.Minute):
		t.Fatal("the provisioning refused by the quota never answered")
	}

	tables := func() []string {
		all, err := held.tables(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mine []string
		for _, n := range all {
			if strings.Contains(n, id) {
				mine = append(mine, n)
			}
		}
		return mine
	}
	row := resumer.tenantRow(t, "acme", id)
	switch {
	case row == nil && len(tables()) != 0:
		t.Fatalf("the tenant is gone but its tables stay: %v", tables())
	case row != nil && attrS(row, "status") == dynamo.TenantActive && len(tables()) != 3:
		t.Fatalf("the tenant is active with tables %v, want its 3 tables", tables())
	case row != nil && attrS(row, "status") != dynamo.TenantActive:
		t.Fatalf("the tenant was left %q", attrS(row, "status"))
	}
	// Whatever happened, the tenant can be provisioned and used once the quota allows.
	held.setQuota(0)
	if r := dropper.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id}); r.status != http.StatusCreated && r.status != http.StatusOK {
		t.Fatalf("provisioning again: %s\n%s", r, dropper.logs.String())
	}
	dropper.do(t, "POST", "/v1/systems/acme/tenants/"+id+"/users", map[string]any{"username": "x"}).want(t, http.StatusCreated)
}
