package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/esm/esmtest"
	"github.com/ssodir/ssodir/internal/mappings"
	"github.com/ssodir/ssodir/internal/mappings/mappingstest"
	"github.com/ssodir/ssodir/test/apitest"
)

// The consumer functions as deploy/ names them in its test stage (prod), so that the
// least-privilege test can hold the recorded mapping calls to the stage's grants.
const (
	e2eProjectorARN         = "arn:aws:lambda:us-east-1:123456789012:function:ssodir-prod-projector"
	e2eSyncARN              = "arn:aws:lambda:us-east-1:123456789012:function:ssodir-prod-keycloak-sync"
	e2eProjectorFailuresARN = "arn:aws:sqs:us-east-1:123456789012:ssodir-prod-projector-stream-failures"
	e2eSyncFailuresARN      = "arn:aws:sqs:us-east-1:123456789012:ssodir-prod-keycloak-sync-stream-failures"
)

// lambdaStage is a stage in Lambda mode: the command API and query API as functions behind
// gateways, the projector as a function fed by an ESM player, the control plane a fake.
type lambdaStage struct {
	e            *env
	controlPlane *mappingstest.Fake
	commandFn    *function
	command      *service
	projector    *function
	queryFn      *function
	query        *service
}

// newLambdaStage starts the stage's functions; extra are settings of all of them.
func newLambdaStage(t *testing.T, extra ...string) *lambdaStage {
	e := newEnv(t)
	s := &lambdaStage{e: e, controlPlane: mappingstest.New()}
	t.Cleanup(s.controlPlane.Close)
	commandVars := append([]string{"SSO_LAMBDA_PROJECTOR_ARN=" + e2eProjectorARN, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN=" + e2eSyncARN,
		"SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN=" + e2eProjectorFailuresARN,
		"SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN=" + e2eSyncFailuresARN, "AWS_ENDPOINT_URL_LAMBDA=" + s.controlPlane.URL}, extra...)
	s.commandFn = e.startFunction("command-api", commandVars...)
	// Lambda runs concurrent requests in environments of their own: three here, for the
	// workloads' concurrent clients.
	more := make([]*function, 2)
	for i := range more {
		more[i] = e.startFunction("command-api", commandVars...)
	}
	s.command = s.commandFn.gateway(t, more...)
	s.projector = e.startFunction("projector", extra...)
	s.queryFn = e.startFunction("query-api", extra...)
	s.query = s.queryFn.gateway(t)
	return s
}

// player is the projector's event source mapping over the tenant's stream.
func (s *lambdaStage) player(t *testing.T, system, tenant string) *esmtest.Player {
	return streamPlayer(t, s.e, system, tenant, s.projector)
}

// streamPlayer is an event source mapping of fn over the tenant's current stream.
func streamPlayer(t *testing.T, e *env, system, tenant string, fn *function) *esmtest.Player {
	t.Helper()
	table := dynamo.Names{Prefix: e.prefix}.Commands(system, tenant)
	out, err := e.db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	return &esmtest.Player{Streams: e.local.Streams(), StreamARN: aws.ToString(out.Table.LatestStreamArn), Invoke: fn.stream}
}

// play runs the projector's event source mapping over a tenant's stream until the test
// ends.
func (s *lambdaStage) play(t *testing.T, system, tenant string) {
	playUntilCleanup(t, s.player(t, system, tenant), system+"/"+tenant)
}

// playUntilCleanup plays p until the test ends, as ESM polls a stream: a drain of every
// shard, then a short pause.
func playUntilCleanup(t *testing.T, p *esmtest.Player, name string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := p.Drain(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("the mapping of %s: %v", name, err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

// projectorFunctionSurvivesKills is TestProjectorSurvivesKills in Lambda mode: provisioning through the command API function maps the new tenant's stream
// to both consumer functions; commands go through the command API function while the
// projector function, fed batch by batch from DynamoDB Local's stream, is killed mid-batch
// and cold-started again; in the end the views equal a fresh build from the command log,
// nothing reached the failure destination, and the query API function serves them.
// Meanwhile the projector function's scheduled tasks deliver the tenant's webhook and
// publish its changes to the stage's bus (lambda_changesout_test.go): the endpoint and the
// bus get every change of the run, each aggregate's in order.
func projectorFunctionSurvivesKills(t *testing.T) {
	bus, vars := newChangesOutBus(t)
	s := newLambdaStage(t, vars...)
	path := provision(t, s.command, "lam", "t1")
	out := startChangesOut(t, s, path, bus, vars)
	base := "http://" + s.command.addr + path
	p := s.player(t, "lam", "t1")

	// One mapping per consumer function on the tenant's stream, with the settings.
	ms := s.controlPlane.Mappings()
	var fns []string
	for _, m := range ms {
		fns = append(fns, m.FunctionArn)
		if m.EventSourceArn != p.StreamARN || m.StartingPosition != "TRIM_HORIZON" || m.ParallelizationFactor != 1 ||
			!m.BisectBatchOnFunctionError || !slices.Equal(m.FunctionResponseTypes, []string{"ReportBatchItemFailures"}) ||
			m.MaximumRetryAttempts != mappings.MaximumRetryAttempts || m.MaximumRecordAgeInSeconds != mappings.MaximumRecordAgeSeconds ||
			m.OnFailure != map[string]string{e2eProjectorARN: e2eProjectorFailuresARN, e2eSyncARN: e2eSyncFailuresARN}[m.FunctionArn] {
			t.Errorf("mapping %+v", m)
		}
	}
	slices.Sort(fns)
	if !slices.Equal(fns, []string{e2eSyncARN, e2eProjectorARN}) {
		t.Fatalf("mappings to %v, want the projector's and keycloak-sync's", fns)
	}
	// Provisioning the tenant again changes nothing.
	mustStatus(t, call(t, "POST", "http://"+s.command.addr+"/v1/systems/lam/tenants", map[string]any{"tenant_id": "t1"}), 200)
	if n := len(s.controlPlane.Mappings()); n != 2 {
		t.Errorf("%d mappings after provisioning again, want 2", n)
	}

	// A thousand commands while the player plays; the projector's environment is killed
	// every few seconds, mid-batch, and cold-started by ESM's next retry.
	done := make(chan int64)
	go func() { done <- workload(t, base, 1000, 11) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var kills atomic.Int32
	stopCrashing := make(chan struct{})
	crashing := make(chan struct{})
	go func() {
		defer close(crashing)
		for answered := int64(0); ; {
			select {
			case <-stopCrashing:
				return
			case <-time.After(2500 * time.Millisecond):
			}
			// Only an environment that answered a batch since the last kill is killed: on a
			// machine slow enough that a cold start and a batch take longer than the
			// interval, every attempt at a record would die, and ESM gives a record up
			// after MaximumRetryAttempts failures in a row, as it would for a function
			// that can never process it.
			for s.projector.answered.Load() == answered {
				select {
				case <-stopCrashing:
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
			s.projector.kill()
			answered = s.projector.answered.Load()
			kills.Add(1)
		}
	}()
	accepted := int64(-1)
	for accepted < 0 {
		select {
		case accepted = <-done:
		default:
		}
		if err := p.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stopCrashing)
	<-crashing
	s.projector.revive()
	if err := p.Settle(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d commands, %d invocations, %d kills", accepted, p.Invocations(), kills.Load())

	if ok, why := freshBuild(t, s.e, "lam", "t1")(); !ok {
		t.Error(why)
	}
	if f := p.Failures(); len(f) != 0 {
		t.Errorf("batches given up to the failure destination: %+v", f)
	}
	// The change feed the projector function appended equals the command log: every
	// change once, each aggregate in order, whatever the kills redelivered.
	checkWalk(t, path, walkAll(t, "http://"+s.query.addr+path+"/events"), historyOf(t, s.e, "lam", "t1"))
	out.finish(t, s, "lam", "t1", path)

	// The query API function serves the views; X-Min-Version polls (no projector feed).
	read := "http://" + s.query.addr + path
	r := call(t, "GET", read+"/users?limit=5", nil)
	mustStatus(t, r, 200)
	r = call(t, "POST", base+"/users", map[string]any{"username": "late", "email": "late@example.com"})
	mustStatus(t, r, 201)
	go func() { time.Sleep(500 * time.Millisecond); _ = p.Drain(ctx) }()
	mustStatus(t, call(t, "GET", read+"/users/late", nil, "X-Min-Version", "1"), 200)

	// The scheduled tasks answer.
	s.projector.task(t, "redrive-dead-letters")
	s.commandFn.task(t, "resume-provisioning")
}

// TestTheAPIFunctionsAnswerLikeTheLongRunningAPIs: the same requests, through the HTTP API
// event shape, get the same problem responses, auth and console.
func TestTheAPIFunctionsAnswerLikeTheLongRunningAPIs(t *testing.T) {
	t.Parallel()
	s := newLambdaStage(t)
	long := s.e.start("query-api")
	longCmd := s.e.start("command-api")
	path := provision(t, s.command, "lam", "t2")
	for _, c := range []struct {
		name, method, path string
		body               any
		noAuth             bool
	}{
		{"an unauthenticated read", "GET", path + "/users", nil, true},
		{"an unknown tenant", "GET", "/v1/systems/lam/tenants/nobody/users", nil, false},
		{"a bad limit", "GET", path + "/users?limit=0", nil, false},
		{"the OpenAPI document", "GET", "/openapi.json", nil, false},
		{"the console", "GET", "/console/", nil, true},
		{"the liveness probe", "GET", "/healthz", nil, true},
	} {
		lam, lr := callAs(t, c.noAuth, c.method, "http://"+s.query.addr+c.path, c.body), callAs(t, c.noAuth, c.method, "http://"+long.addr+c.path, c.body)
		if lam.status != lr.status || lam.header.Get("Content-Type") != lr.header.Get("Content-Type") || !sameBody(lam.body, lr.body) {
			t.Errorf("query API, %s: Lambda %d %s %.200s; long-running %d %s %.200s", c.name, lam.status, lam.header.Get("Content-Type"), lam.body,
				lr.status, lr.header.Get("Content-Type"), lr.body)
		}
	}
	for _, c := range []struct {
		name, method, path string
		body               any
		noAuth             bool
	}{
		{"an unauthenticated command", "POST", path + "/users", map[string]any{"username": "x"}, true},
		{"an invalid user", "POST", path + "/users", map[string]any{"username": "Not Valid!"}, false},
		{"a user of an unknown tenant", "POST", "/v1/systems/lam/tenants/nobody/users", map[string]any{"username": "x"}, false},
	} {
		lam, lr := callAs(t, c.noAuth, c.method, "http://"+s.command.addr+c.path, c.body), callAs(t, c.noAuth, c.method, "http://"+longCmd.addr+c.path, c.body)
		if lam.status != lr.status || lam.header.Get("Content-Type") != lr.header.Get("Content-Type") || !sameBody(lam.body, lr.body) {
			t.Errorf("command API, %s: Lambda %d %s %.200s; long-running %d %s %.200s", c.name, lam.status, lam.header.Get("Content-Type"), lam.body,
				lr.status, lr.header.Get("Content-Type"), lr.body)
		}
	}
}

// callAs is call, without the token when noAuth.
func callAs(t *testing.T, noAuth bool, method, url string, body any) response {
	t.Helper()
	if noAuth {
		status, header, b := apitest.Call(t, "", method, url, body)
		return response{status: status, header: header, body: b}
	}
	return call(t, method, url, body)
}

// sameBody compares two answers leaving out what differs by request (ids, times).
func sameBody(a, b []byte) bool {
	strip := func(s []byte) string {
		out := string(s)
		for _, re := range volatile {
			out = re.ReplaceAllString(out, "")
		}
		return out
	}
	return strip(a) == strip(b)
}

// volatile are the parts of an answer that differ between two requests.
var volatile = []*regexp.Regexp{
	regexp.MustCompile(`"(request_id|instance|trace_id|correlation_id)"\s*:\s*"[^"]*"`),
	regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`),
}

// quotaProxy is DynamoDB Local behind a proxy that refuses the creation of one table as
// the account's table quota does.
func quotaProxy(t *testing.T, e *env, refuse string) string {
	t.Helper()
	target, err := url.Parse(e.local.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.CreateTable" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var in struct{ TableName string }
			_ = json.Unmarshal(body, &in)
			if in.TableName == refuse {
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#LimitExceededException","message":"Subscriber limit exceeded: Only 2500 tables can be created in this region for this account"}`)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestATenantDroppedInLambdaModeLeavesOtherStreamsMappings: a provisioning that hits the
// table quota drops what it made, and only the mappings of the stream it noted (none: it
// never got that far): a mapping of another table of that name (here an earlier one's; for
// a late drop, a newer incarnation's) stays, and other tenants' stay.
func TestATenantDroppedInLambdaModeLeavesOtherStreamsMappings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cp := mappingstest.New()
	t.Cleanup(cp.Close)
	names := dynamo.Names{Prefix: e.prefix}
	proxy := quotaProxy(t, e, names.Users("lam", "full", 0))
	fn := e.startFunction("command-api", "SSO_LAMBDA_PROJECTOR_ARN="+e2eProjectorARN, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN="+e2eSyncARN,
		"AWS_ENDPOINT_URL_LAMBDA="+cp.URL, "AWS_ENDPOINT_URL_DYNAMODB="+proxy)
	api := fn.gateway(t)
	provision(t, api, "lam", "kept")

	// A mapping left from an earlier table of the same name (a stream of its own).
	ctl := mappings.New(lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(cp.URL), Credentials: aws.AnonymousCredentials{}}),
		mappings.Config{Functions: []string{e2eProjectorARN}})
	old := "arn:aws:dynamodb:ddblocal:000000000000:table/" + names.Commands("lam", "full") + "/stream/2026-01-01T00:00:00.000"
	if err := ctl.Ensure(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if n := len(cp.Mappings()); n != 3 {
		t.Fatalf("%d mappings before, want 3", n)
	}
	r := call(t, "POST", "http://"+api.addr+"/v1/systems/lam/tenants", map[string]any{"tenant_id": "full"})
	mustStatus(t, r, 503)
	left := cp.Mappings()
	if len(left) != 3 {
		t.Fatalf("mappings left %+v, want the kept tenant's two and the other stream's", left)
	}
	for _, m := range left {
		if mappings.StreamTable(m.EventSourceArn) != names.Commands("lam", "kept") && m.EventSourceArn != old {
			t.Errorf("mapping of %s left after its tenant's tables were dropped", m.EventSourceArn)
		}
	}
}
