package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/config"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/esm/esmtest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
	"github.com/ssodir/ssodir/internal/keycloaksync"
	"github.com/ssodir/ssodir/internal/lambdafn"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/secrets"
	"github.com/ssodir/ssodir/internal/streams"
)

// functionTimeout is the deadline each in-process invocation gets, as Lambda gives the
// projector's function (deploy/).
const functionTimeout = 2 * time.Minute

// faultyEndpoint is DynamoDB Local behind a proxy with one fault: armed with a place, it
// answers the next update of the erasure ledger that marks that place with an error,
// without forwarding it (the update did not land). The projector's function reaches
// DynamoDB only through it (AWS_ENDPOINT_URL_DYNAMODB), so the fault needs no seam in
// the code under test.
type faultyEndpoint struct {
	url    string
	ledger string
	place  atomic.Value // string: the place whose marking fails once; "" disarmed
	struck atomic.Int32
}

func newFaultyEndpoint(t *testing.T, target, ledger string) *faultyEndpoint {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	f := &faultyEndpoint{ledger: ledger}
	f.place.Store("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		if f.strikes(r, body) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":"injected: the ledger's update did not land"}`)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// strikes reports whether the request is the armed fault's, and disarms it if so.
func (f *faultyEndpoint) strikes(r *http.Request, body []byte) bool {
	p, _ := f.place.Load().(string)
	if p == "" || !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") {
		return false
	}
	var in struct {
		TableName                string
		ExpressionAttributeNames map[string]string
	}
	if json.Unmarshal(body, &in) != nil || in.TableName != f.ledger || !slices.Contains(slices.Collect(maps.Values(in.ExpressionAttributeNames)), p) {
		return false
	}
	if !f.place.CompareAndSwap(p, "") {
		return false
	}
	f.struck.Add(1)
	return true
}

// invokeJSON calls fn with event as the Lambda runtime does: the event as JSON, within the
// function's timeout.
func invokeJSON(ctx context.Context, fn *lambdafn.Function, event any) ([]byte, error) {
	payload, err := json.Marshal(event)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, functionTimeout)
	defer cancel()
	return fn.Invoke(ctx, payload)
}

// streamInvoke is an event source mapping's call of fn with one batch; seen, when set,
// hears every batch first.
func streamInvoke(fn *lambdafn.Function, seen func(lambdaevents.DynamoDBEvent)) esmtest.Invoke {
	return func(ctx context.Context, ev lambdaevents.DynamoDBEvent) (lambdaevents.DynamoDBEventResponse, error) {
		if seen != nil {
			seen(ev)
		}
		var resp lambdaevents.DynamoDBEventResponse
		out, err := invokeJSON(ctx, fn, ev)
		if err != nil {
			return resp, err
		}
		return resp, json.Unmarshal(out, &resp)
	}
}

// keycloakSyncFunction is keycloak-sync's Lambda function as cmd/keycloak-sync/lambda.go
// composes it (that binary's package cannot be imported here): its stream handler under
// esm, with the erasure ledger, over the Keycloak double the tenant's row names.
func keycloakSyncFunction(t *testing.T, db *dynamodb.Client, names dynamo.Names, box *secrets.Box) *lambdafn.Function {
	t.Helper()
	tenants := dynamo.NewTenants(db, names)
	health, err := keycloaksync.NewHealth(nil, "test", prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	h := keycloaksync.NewHandler(keycloaksync.HandlerConfig{
		Realms: keycloaksync.NewRealms(tenants, box, keycloaksync.NewHTTPClient(), nil, zap.NewNop()), Secrets: box,
		Registry: events.NewRegistry(), Store: dynamo.NewCommandStore(db, names, events.NewRegistry(), 0), Health: health,
		Park: streams.Park, Erasures: erasure.NewLedger(db, names),
	})
	return &lambdafn.Function{Log: zap.NewNop(), Stream: esm.New(esm.Config{Labels: names.ParseCommands,
		DeadLetters: deadletters.New(db, names.DeadLetters(), "keycloak-sync"), Handle: h.HandleMessage,
		MaxAttempts: 5, Backoff: 500 * time.Millisecond, Log: zap.NewNop()})}
}

func hasEvent(ev lambdaevents.DynamoDBEvent, typ events.Type) bool {
	for _, r := range ev.Records {
		if v, ok := r.Change.NewImage["event_type"]; ok && v.DataType() == lambdaevents.DataTypeString && v.String() == string(typ) {
			return true
		}
	}
	return false
}

// TestARerunErasureLeavesTheNextUserOfTheNameWholeInLambdaMode is
// internal/projector's TestARerunErasureLeavesTheNextUserOfTheNameWhole in Lambda mode:
// the projector's function (the handler the Lambda binary runs, built by the same code,
// invoked in process with events as the runtime hands them) and keycloak-sync's, each fed
// the tenant's stream by an event source mapping (esmtest). The user.erased record starts
// the erasure and is acknowledged; the scheduled resume-erasures task does the second
// pass, whose ledger update after the tombstone is deleted fails (a fault on the
// projector's DynamoDB endpoint). A new user takes the freed name and joins a group; then
// the mapping delivers the batch holding user.erased again, to both functions, and
// resume-erasures runs again: the new user is whole — write model, view, membership,
// feed and Keycloak user — and the erasure is done.
//
// In process rather than under the Runtime Interface Emulator: the fault needs an
// endpoint only the projector's function reaches, and an emulated stage (three
// command-API functions, the query API, both consumers, a DynamoDB Local of its own)
// costs minutes of CPU that this case does not need — the function's Invoke is what the
// runtime calls.
func TestARerunErasureLeavesTheNextUserOfTheNameWholeInLambdaMode(t *testing.T) {
	ctx := t.Context()
	local := dynamotest.Current(t)
	db := local.DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("pl")}
	tenant := commands.Tenant{System: "s", ID: "t"}
	const realm = "acme"
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	kc.AddRealm(realm, "ssodir-sync", "sync-secret")
	if err := kc.SetUnmanagedAttributes(realm, true); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secrets.NewLocal(key)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := box.Encrypt(ctx, []byte("sync-secret"), "client_secret:s/t")
	if err != nil {
		t.Fatal(err)
	}
	row := dynamo.Tenant{SystemID: "s", TenantID: "t", Status: dynamo.TenantActive, KeycloakURL: kc.URL(), KeycloakRealm: realm,
		ClientID: "ssodir-sync", ClientSecret: secret, CommandsTable: names.Commands("s", "t"),
		UsersTable: names.Users("s", "t", 0), ActivitiesTable: names.Activities("s", "t", 0)}
	if err := dynamo.NewTenants(db, names).Put(ctx, row, 0); err != nil {
		t.Fatal(err)
	}
	if err := dynamo.NewTenantStore(db, names).EnsureTables(ctx, "s", "t"); err != nil {
		t.Fatal(err)
	}

	// The projector's function, as the Lambda binary builds it, over the faulty endpoint.
	fault := newFaultyEndpoint(t, local.Endpoint, names.Erasures())
	env := map[string]string{}
	for _, kv := range local.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	env["AWS_ENDPOINT_URL_DYNAMODB"] = fault.url
	env["SSO_TABLE_PREFIX"] = names.Prefix
	env["SSO_ERASURE_SETTLE"] = "10s"
	env["SSO_LOG_LEVEL"] = "error"
	env["AWS_LAMBDA_FUNCTION_NAME"] = "ssodir-test-projector"
	a, err := newApp(ctx, nil, config.Map(env))
	if err != nil {
		t.Fatal(err)
	}
	proj, err := a.lambdaFunction(ctx)
	if err != nil {
		t.Fatal(err)
	}
	syncFn := keycloakSyncFunction(t, db, names, box)

	// One mapping per function over the tenant's stream; the projector's remembers the
	// batch that held user.erased.
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(row.CommandsTable)})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		erased *lambdaevents.DynamoDBEvent
	)
	projMapping := &esmtest.Player{Streams: local.Streams(), StreamARN: aws.ToString(desc.Table.LatestStreamArn),
		Invoke: streamInvoke(proj, func(ev lambdaevents.DynamoDBEvent) {
			if hasEvent(ev, events.UserErasedType) {
				mu.Lock()
				defer mu.Unlock()
				if erased == nil {
					erased = &ev
				}
			}
		})}
	syncMapping := &esmtest.Player{Streams: local.Streams(), StreamARN: aws.ToString(desc.Table.LatestStreamArn), Invoke: streamInvoke(syncFn, nil)}
	// drainUntil plays both mappings until cond holds.
	drainUntil := func(what string, cond func() (bool, string)) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for {
			for _, p := range []*esmtest.Player{projMapping, syncMapping} {
				if err := p.Drain(ctx); err != nil {
					t.Fatal(err)
				}
			}
			ok, why := cond()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s", what, why)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	store := dynamo.NewCommandStore(db, names, events.NewRegistry(), 0)
	deps := commands.Deps{Store: store, Now: time.Now, NewID: uuid.NewString}
	meta := func() commands.Meta {
		return commands.Meta{Actor: "test", CommandID: uuid.NewString(), CorrelationID: uuid.NewString()}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	get := func(table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	idsk := func(id, sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	ledger := erasure.NewLedger(db, names)

	// ann, in group g, projected and in Keycloak.
	must(second(commands.NewCreateUserHandler(deps, nil).Handle(ctx, tenant, commands.CreateUser{Username: "ann", Email: "ann.old@example.org", FirstName: "Old"}, meta())))
	must(second(commands.NewCreateGroupHandler(deps).Handle(ctx, tenant, commands.CreateGroup{Name: "G"}, meta())))
	must(second(commands.NewAddMemberHandler(deps).Handle(ctx, tenant, commands.AddMember{Group: "g", Username: "ann"}, meta())))
	drainUntil("the first ann projected and synced", func() (bool, string) {
		m := get(row.UsersTable, idsk("group#g", dynamo.MemberSK("ann")))
		u, ok := kc.UserByUsername(realm, "ann")
		return m != nil && m["member_id"] != nil && ok && len(u.Groups) == 1, "not yet"
	})

	// The erasure: its record starts it (the first pass) and is acknowledged; the Keycloak
	// sync deletes the Keycloak user.
	erasureID := uuid.NewString()
	must(second(commands.NewEraseUserHandler(deps).Handle(ctx, tenant, commands.EraseUser{Username: "ann", Reason: "a request", ErasureID: erasureID}, meta())))
	drainUntil("the first pass and the Keycloak sync's part", func() (bool, string) {
		e, err := ledger.Get(ctx, "s", "t", erasureID)
		_, inKeycloak := kc.UserByUsername(realm, "ann")
		mu.Lock()
		seen := erased != nil
		mu.Unlock()
		return err == nil && e.SweptAt != "" && e.Places[commands.PlaceKeycloak] == dynamo.ErasureStatusDone && !inKeycloak && seen,
			"ledger " + e.Status + ", keycloak user still there: " + map[bool]string{true: "yes", false: "no"}[inKeycloak]
	})

	// resume-erasures does the second pass: it deletes the tombstone, which frees the name,
	// and then its update of the ledger fails.
	fault.place.Store(commands.PlaceWriteModel)
	if _, err := invokeJSON(ctx, proj, map[string]string{lambdafn.TaskKey: "resume-erasures"}); err == nil {
		t.Fatal("resume-erasures succeeded with the ledger's update failing")
	}
	if fault.struck.Load() != 1 {
		t.Fatal("the injected fault never struck: the test proves nothing")
	}
	if tomb := get(row.CommandsTable, idsk(dynamo.UserID("ann"), dynamo.SKConfig)); tomb != nil {
		t.Fatalf("the fault struck before the tombstone went: %v", tomb)
	}
	if e, err := ledger.Get(ctx, "s", "t", erasureID); err != nil || e.Places[commands.PlaceWriteModel] == dynamo.ErasureStatusDone {
		t.Fatalf("erasure %+v, %v: want the write model not marked", e, err)
	}

	// The name is free: a new ann is created, joins g, is projected and synced.
	must(second(commands.NewCreateUserHandler(deps, nil).Handle(ctx, tenant, commands.CreateUser{Username: "ann", Email: "ann.new@example.org", FirstName: "New"}, meta())))
	must(second(commands.NewAddMemberHandler(deps).Handle(ctx, tenant, commands.AddMember{Group: "g", Username: "ann"}, meta())))
	agg, err := store.LoadUser(ctx, tenant, "ann")
	if err != nil || !agg.Live() {
		t.Fatalf("the new ann: %+v, %v", agg, err)
	}
	newID := agg.State.ID
	var kcUser keycloaktest.User
	drainUntil("the new ann projected and synced", func() (bool, string) {
		v := get(row.UsersTable, idsk(dynamo.UserID("ann"), dynamo.SKConfig))
		m := get(row.UsersTable, idsk("group#g", dynamo.MemberSK("ann")))
		u, ok := kc.UserByUsername(realm, "ann")
		kcUser = u
		return dynamo.StringAttr(v, "user_id") == newID && m != nil && m["member_id"] != nil && ok && u.Email == "ann.new@example.org" &&
			len(u.Groups) == 1, "not yet"
	})

	// The mapping delivers the batch with user.erased again (a retry of the batch, a
	// re-drive), to both functions; then the schedule runs resume-erasures.
	mu.Lock()
	batch := *erased
	mu.Unlock()
	for name, fn := range map[string]*lambdafn.Function{"projector": proj, "keycloak-sync": syncFn} {
		resp, err := streamInvoke(fn, nil)(ctx, batch)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("%s: the batch delivered again: %+v, %v", name, resp, err)
		}
	}
	if _, err := invokeJSON(ctx, proj, map[string]string{lambdafn.TaskKey: "resume-erasures"}); err != nil {
		t.Fatalf("resume-erasures after the re-delivery: %v", err)
	}
	drainUntil("the erasure done", func() (bool, string) {
		e, err := ledger.Get(ctx, "s", "t", erasureID)
		return err == nil && e.Status == dynamo.ErasureStatusDone && e.Places[commands.PlaceWriteModel] == dynamo.ErasureStatusDone,
			"erasure " + e.Status
	})

	// The new ann is whole.
	agg, err = store.LoadUser(ctx, tenant, "ann")
	if err != nil || !agg.Live() || agg.State.ID != newID || agg.State.Email != "ann.new@example.org" {
		t.Errorf("the new ann's write model after the re-run: %+v, %v", agg.State, err)
	}
	if get(row.CommandsTable, idsk(dynamo.UserID("ann"), dynamo.HistorySK(agg.State.Version))) == nil {
		t.Errorf("the new ann's latest history record is gone")
	}
	if v := get(row.UsersTable, idsk(dynamo.UserID("ann"), dynamo.SKConfig)); dynamo.StringAttr(v, "user_id") != newID {
		t.Errorf("the new ann's view is %v", v)
	}
	if m := get(row.UsersTable, idsk("group#g", dynamo.MemberSK("ann"))); m == nil || m["member_id"] == nil {
		t.Errorf("the new ann's membership of g is %v", m)
	}
	if get(row.UsersTable, idsk(dynamo.UserID("ann"), dynamo.GroupPointerSK("g"))) == nil {
		t.Errorf("the new ann's group pointer is gone")
	}
	out, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(row.ActivitiesTable), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: projections.EntityPK("user:ann")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) == 0 {
		t.Errorf("the new ann's feed is gone")
	}
	for _, it := range out.Items {
		if strings.Contains(dynamo.StringAttr(it, "changes"), "Old") {
			t.Errorf("the erased ann's feed item is left: %v", it)
		}
	}
	if u, ok := kc.UserByUsername(realm, "ann"); !ok || u.ID != kcUser.ID || u.Email != "ann.new@example.org" || len(u.Groups) != 1 {
		t.Errorf("the new ann in Keycloak after the re-run: %+v (present %v), want %+v", u, ok, kcUser)
	}
}

func second[T any](_ T, err error) error { return err }
