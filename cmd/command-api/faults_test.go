package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"sort"
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
	"github.com/ssodir/ssodir/internal/identity"
)

// fault is what the proxy does to a DynamoDB operation.
type fault int

const (
	pass          fault = iota
	throttle            // answer ThrottlingException, as DynamoDB does when over capacity
	drop                // close the connection without an answer
	hold                // wait until released, then pass
	throttleLater       // pass the first request, then throttle
	loseAnswer          // pass the request on, then close the connection instead of answering, once
)

// DynamoDB operations, as named by the X-Amz-Target header.
const (
	opTransactWrite = "DynamoDB_20120810.TransactWriteItems"
	opGetItem       = "DynamoDB_20120810.GetItem"
	opCreateTable   = "DynamoDB_20120810.CreateTable"
)

// faultProxy stands between the command API and DynamoDB Local and fails the operations it
// is told to: a fault DynamoDB Local cannot be made to show (it never throttles).
type faultProxy struct {
	srv *httptest.Server
	rp  *httputil.ReverseProxy

	mu     sync.Mutex
	faults map[string]fault
	hits   map[string]int
	passed map[string]bool // throttleLater let its one request through
	// tokens are the ClientRequestTokens of the transactions that reached the proxy.
	tokens []string
	// held receives a signal when a request is held; release lets held requests go on.
	held    chan struct{}
	release chan struct{}
}

func newFaultProxy(t *testing.T) *faultProxy {
	t.Helper()
	target, err := url.Parse(dynamotest.Current(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{
		rp: httputil.NewSingleHostReverseProxy(target), faults: map[string]fault{}, hits: map[string]int{}, passed: map[string]bool{},
		held: make(chan struct{}, 64), release: make(chan struct{}),
	}
	p.srv = httptest.NewServer(p)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *faultProxy) set(op string, f fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults[op] = f
	delete(p.passed, op)
}

func (p *faultProxy) clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.faults)
}

func (p *faultProxy) hitCount(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[op]
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := r.Header.Get("X-Amz-Target")
	if op == opTransactWrite {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var in struct{ ClientRequestToken string }
		_ = json.Unmarshal(body, &in)
		p.mu.Lock()
		p.tokens = append(p.tokens, in.ClientRequestToken)
		p.mu.Unlock()
	}
	p.mu.Lock()
	f := p.faults[op]
	if f != pass {
		p.hits[op]++
	}
	if f == loseAnswer {
		delete(p.faults, op)
	}
	if f == throttleLater {
		f = throttle
		if !p.passed[op] {
			p.passed[op], f = true, pass
		}
	}
	p.mu.Unlock()
	switch f {
	case throttle:
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`)
		return
	case drop:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	case hold:
		p.held <- struct{}{}
		<-p.release
	case loseAnswer:
		// DynamoDB does the work; the answer is lost on the way back.
		p.rp.ServeHTTP(httptest.NewRecorder(), r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	p.rp.ServeHTTP(w, r)
}

func (p *faultProxy) transactionTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.tokens...)
}

// snapshot is every item of a table, keyed by id and sk, for before/after comparisons.
func snapshot(t *testing.T, a *app, table string) map[string]map[string]types.AttributeValue {
	t.Helper()
	out := map[string]map[string]types.AttributeValue{}
	for _, it := range a.items(t, table) {
		k := attrS(it, "id") + "|" + attrS(it, "sk")
		if k == "|" {
			k = attrS(it, "key")
		}
		out[k] = it
	}
	return out
}

func sameItems(t *testing.T, before, after map[string]map[string]types.AttributeValue) {
	t.Helper()
	var diff []string
	for k, v := range after {
		if w, ok := before[k]; !ok || !reflect.DeepEqual(v, w) {
			diff = append(diff, "written "+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			diff = append(diff, "deleted "+k)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("the failed request changed the table: %v", diff)
	}
}

func wantUnavailable(t *testing.T, r reply) {
	t.Helper()
	r.wantProblem(t, http.StatusServiceUnavailable, "unavailable")
	if s, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want a number of seconds", r.header.Get("Retry-After"))
	}
}

// TestDynamoDBFaults checks that throttling and outages are answered 503 with Retry-After,
// and that a command they interrupt writes nothing.
func TestDynamoDBFaults(t *testing.T) {
	t.Parallel()
	p := newFaultProxy(t)
	env := testEnv(t)
	env["AWS_ENDPOINT_URL_DYNAMODB"] = p.srv.URL
	a := startApp(t, env)
	base := a.newTenant(t)
	a.do(t, "POST", base+"/users", map[string]any{"username": "jdoe", "email": "jdoe@example.com"}).want(t, http.StatusCreated)
	a.do(t, "POST", base+"/groups", map[string]any{"name": "admins"}).want(t, http.StatusCreated)
	a.do(t, "PUT", base+"/groups/admins/members/jdoe", nil).want(t, http.StatusNoContent)
	a.do(t, "POST", base+"/users", map[string]any{"username": "john"}).want(t, http.StatusCreated)
	a.do(t, "POST", base+"/users", map[string]any{"username": "kim"}).want(t, http.StatusCreated)

	writes := []struct {
		name, method, path string
		body               any
	}{
		{"create user", "POST", "/users", map[string]any{"username": "newbie", "email": "newbie@example.com", "password": "a password!"}},
		{"email change", "PATCH", "/users/jdoe", map[string]any{"email": "jane@example.com"}},
		{"add member", "PUT", "/groups/admins/members/john", nil},
		{"delete user with memberships", "DELETE", "/users/jdoe", nil},
		{"members change", "POST", "/groups/admins/members", map[string]any{"add": []string{"kim"}, "remove": []string{"john"}}},
		{"delete group with members", "DELETE", "/groups/admins", nil},
	}
	for _, f := range []struct {
		name   string
		fault  fault
		writes []int
	}{{"throttled", throttle, []int{0, 1, 2, 3, 4}}, {"cut off", drop, []int{0, 5, 4}}} {
		for _, i := range f.writes {
			w := writes[i]
			t.Run(fmt.Sprintf("%s: a %s transaction is answered 503 and writes nothing", w.name, f.name), func(t *testing.T) {
				key := "fault-" + randomText(t, 9)
				before := snapshot(t, a, a.commandsTable(base))
				keysBefore := snapshot(t, a, a.names.Idempotency())
				p.set(opTransactWrite, f.fault)
				hits := p.hitCount(opTransactWrite)
				r := a.do(t, w.method, base+w.path, w.body, "Idempotency-Key", key)
				p.clear()
				wantUnavailable(t, r)
				if p.hitCount(opTransactWrite) == hits {
					t.Fatal("the fault was never hit")
				}
				sameItems(t, before, snapshot(t, a, a.commandsTable(base)))
				sameItems(t, keysBefore, snapshot(t, a, a.names.Idempotency()))
			})
		}
	}

	t.Run("a throttled read is answered 503", func(t *testing.T) {
		p.set(opGetItem, throttle)
		r := a.do(t, "PATCH", base+"/users/jdoe", map[string]any{"first_name": "x"})
		p.clear()
		wantUnavailable(t, r)
	})

	t.Run("a throttled tenant provisioning is answered 503, and a retry finishes it", func(t *testing.T) {
		id := dynamotest.UniqueName("t")
		p.set(opCreateTable, throttle)
		r := a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id})
		p.clear()
		wantUnavailable(t, r)
		r = a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": id})
		if r.status != http.StatusOK && r.status != http.StatusCreated {
			t.Fatalf("retry: %s", r)
		}
		a.do(t, "POST", "/v1/systems/acme/tenants/"+id+"/users", map[string]any{"username": "first"}).want(t, http.StatusCreated)
	})

	t.Run("a delete whose clean-up beyond one transaction is throttled is done, and a re-create finishes it", func(t *testing.T) {
		a.do(t, "POST", base+"/users", map[string]any{"username": "many"}).want(t, http.StatusCreated)
		n := (*dynamo.CommandStore)(nil).MaxMembersPerChange() + 2 // two beyond one transaction
		for i := range n {
			g := fmt.Sprintf("m%02d", i)
			a.do(t, "POST", base+"/groups", map[string]any{"name": g}).want(t, http.StatusCreated)
			a.do(t, "PUT", base+"/groups/"+g+"/members/many", nil).want(t, http.StatusNoContent)
		}
		memberships := func() int {
			n := 0
			for _, it := range a.items(t, a.commandsTable(base)) {
				if attrS(it, "sk") == "member#many" {
					n++
				}
			}
			return n
		}
		// The delete's transaction goes through; the clean-up's are throttled.
		hits := p.hitCount(opTransactWrite)
		p.set(opTransactWrite, throttleLater)
		r := a.do(t, "DELETE", base+"/users/many", nil)
		p.clear()
		wantWrite(t, r, http.StatusNoContent, 2)
		if p.hitCount(opTransactWrite) < hits+2 || memberships() != 2 {
			t.Fatalf("the clean-up was not interrupted: %d memberships left", memberships())
		}
		if logs := a.logs.String(); !strings.Contains(logs, "the clean-up after a delete did not finish") ||
			!strings.Contains(logs, `"aggregate":"`+identity.LogKey("user#many")+`"`) || !strings.Contains(logs, "ThrottlingException") {
			t.Errorf("the interrupted clean-up was not logged with its aggregate (hashed) and error:\n%s", logs)
		}
		if logs := a.logs.String(); strings.Contains(logs, "user#many") {
			t.Errorf("the log names the user:\n%s", logs)
		}
		a.do(t, "DELETE", base+fmt.Sprintf("/groups/m%02d/members/many", n-1), nil).wantProblem(t, http.StatusNotFound, "not_found")
		wantWrite(t, a.do(t, "POST", base+"/users", map[string]any{"username": "many"}), http.StatusCreated, 3)
		if n := memberships(); n != 0 {
			t.Errorf("%d memberships of the deleted user are left after the re-create", n)
		}
	})

	t.Run("after the faults, the same commands go through", func(t *testing.T) {
		for _, w := range writes {
			r := a.do(t, w.method, base+w.path, w.body)
			if r.status >= 300 {
				t.Errorf("%s: %s", w.name, r)
			}
		}
	})

	t.Run("an unreachable DynamoDB makes readyz and writes 503, healthz stays up", func(t *testing.T) {
		p.srv.Close()
		a.do(t, "GET", "/healthz", nil, "Authorization", "").want(t, http.StatusOK)
		wantUnavailable(t, a.do(t, "GET", "/readyz", nil, "Authorization", ""))
		wantUnavailable(t, a.do(t, "POST", base+"/users", map[string]any{"username": "nobody"}))
		wantUnavailable(t, a.do(t, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": "unreachable"}))
	})
}

// TestLostTransactionAnswer: DynamoDB applies a transaction but its answer is lost on the
// way back. The SDK retries it with the same ClientRequestToken, DynamoDB answers the
// retry without applying it again, and the client gets one answer for one effect.
func TestLostTransactionAnswer(t *testing.T) {
	t.Parallel()
	p := newFaultProxy(t)
	env := testEnv(t)
	env["AWS_ENDPOINT_URL_DYNAMODB"] = p.srv.URL
	a := startApp(t, env)
	base := a.newTenant(t)

	for _, w := range []struct {
		name, method, path string
		body               any
		status             int
		version            int64
	}{
		{"create user", "POST", "/users", map[string]any{"username": "lost", "email": "lost@example.com", "password": "a password!"}, http.StatusCreated, 1},
		{"patch user", "PATCH", "/users/lost", map[string]any{"first_name": "Lo"}, http.StatusOK, 2},
		{"create group", "POST", "/groups", map[string]any{"name": "lostgroup"}, http.StatusCreated, 1},
		{"add member", "PUT", "/groups/lostgroup/members/lost", nil, http.StatusNoContent, 2},
	} {
		t.Run(w.name+": answered once, applied once", func(t *testing.T) {
			records := historyCount(t, a, base)
			tokens := len(p.transactionTokens())
			p.set(opTransactWrite, loseAnswer)
			r := a.do(t, w.method, base+w.path, w.body)
			p.clear()
			wantWrite(t, r, w.status, w.version)
			sent := p.transactionTokens()[tokens:]
			if len(sent) < 2 {
				t.Fatalf("%d transaction attempts, want the lost one and its retry", len(sent))
			}
			for _, tok := range sent[1:] {
				if tok == "" || tok != sent[0] {
					t.Errorf("attempts carried the tokens %q, want one token for all", sent)
				}
			}
			if n := historyCount(t, a, base); n != records+1 {
				t.Errorf("%d history records written, want 1", n-records)
			}
		})
	}
}

// TestGracefulShutdown cancels run's context while a request is in flight: the request
// completes, new connections are refused, and run returns nil.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	p := newFaultProxy(t)
	env := testEnv(t)
	env["AWS_ENDPOINT_URL_DYNAMODB"] = p.srv.URL
	a := startApp(t, env)
	base := a.newTenant(t)

	p.set(opTransactWrite, hold)
	inFlight := make(chan reply, 1)
	go func() { inFlight <- a.do(t, "POST", base+"/users", map[string]any{"username": "last-one"}) }()
	select {
	case <-p.held:
	case <-time.After(time.Minute):
		t.Fatal("the request never reached DynamoDB")
	}

	stopped := make(chan error, 1)
	go func() { stopped <- a.stop() }()
	addr := a.url[len("http://"):]
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		_ = conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the server kept accepting connections after its context was cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-stopped:
		t.Fatalf("run returned (%v) while a request was in flight", err)
	default:
	}

	close(p.release)
	r := <-inFlight
	wantWrite(t, r, http.StatusCreated, 1)
	if err := <-stopped; err != nil {
		t.Errorf("run returned %v, want nil", err)
	}
	out, err := a.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(a.commandsTable(base)),
		Key: map[string]types.AttributeValue{
			"id": &types.AttributeValueMemberS{Value: "user#last-one"}, "sk": &types.AttributeValueMemberS{Value: "config"},
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil || out.Item == nil {
		t.Errorf("the in-flight create is not stored (%v)", err)
	}
}
