package keycloaksync

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/esm"
	"github.com/ssodir/ssodir/internal/esm/esmtest"
	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/streams/streamstest"
)

// hungTenants is how many tenants of the isolation tests have a realm that accepts
// connections and never answers; usersPerHungTenant of each are created.
const (
	hungTenants        = 4
	usersPerHungTenant = 10
)

// hungWorlds adds hungTenants tenants to w's directory, each with usersPerHungTenant
// users created and a realm that never answers; w's own tenant stays healthy.
func (w *world) hungWorlds() []*world {
	t := w.t
	t.Helper()
	ctx := t.Context()
	tenants := dynamo.NewTenants(w.db, w.names)
	var out []*world
	for i := range hungTenants {
		url, _ := hangingRealm(t)
		h := *w
		h.tenant = commands.Tenant{System: w.tenant.System, ID: fmt.Sprintf("hung%d", i)}
		key := h.tenant.System + "/" + h.tenant.ID
		secret, err := w.box.Encrypt(ctx, []byte("sync-secret"), "client_secret:"+key)
		if err != nil {
			t.Fatal(err)
		}
		row := dynamo.Tenant{SystemID: h.tenant.System, TenantID: h.tenant.ID, Status: dynamo.TenantActive, KeycloakURL: url,
			KeycloakRealm: testRealm, ClientID: "ssodir-sync", ClientSecret: secret, CommandsTable: w.names.Commands(h.tenant.System, h.tenant.ID)}
		if err := tenants.Put(ctx, row, 0); err != nil {
			t.Fatal(err)
		}
		if err := dynamo.NewTenantStore(w.db, w.names).EnsureTables(ctx, h.tenant.System, h.tenant.ID); err != nil {
			t.Fatal(err)
		}
		for u := range usersPerHungTenant {
			h.exec(commands.CreateUser{Username: fmt.Sprintf("u%d", u), Email: fmt.Sprintf("u%d@example.com", u)})
		}
		out = append(out, &h)
	}
	return out
}

// A realm that hangs must not hold back another tenant (issue 35). In the long-running
// keycloak-sync consumer, four tenants whose realm accepts connections and never answers
// have as many records in flight as the subscriber allows them: 8 per shard, 32 in all —
// every slot. Their requests wait two minutes here before they time out. A user created in
// a healthy tenant meanwhile reaches its realm while every one of those records is still
// at its hung realm: the records of a hung realm give back the slots that all tenants
// share (streams.ReleaseSlot) and keep only their own shard's.
func TestAHungRealmHoldsNoSlotAHealthyTenantNeeds(t *testing.T) {
	const hangFor = 2 * time.Minute
	w := newWorld(t)
	w.handler.cfg.Realms = NewRealms(dynamo.NewTenants(w.db, w.names), w.box, NewHTTPClient(), nil, zap.NewNop()).WithEventRequestTimeout(hangFor)
	w.handler.cfg.RecordTimeout = 2 * hangFor
	hung := w.hungWorlds()

	ctx := t.Context()
	leases, dlq := dynamotest.UniqueName("leases"), dynamotest.UniqueName("dlq")
	if err := streams.EnsureTables(ctx, w.db, leases, dlq); err != nil {
		t.Fatal(err)
	}
	health, err := NewHealth(nil, "test", prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	w.handler.cfg.Health = health
	f := streamstest.New()
	arns := map[string]string{}
	var sources []streams.Stream
	for _, x := range append([]*world{w}, hung...) {
		table := w.names.Commands(x.tenant.System, x.tenant.ID)
		arn := f.AddStream(table)
		f.AddShard(arn, "s1", "")
		arns[x.tenant.ID] = arn
		sources = append(sources, streams.Stream{System: x.tenant.System, Tenant: x.tenant.ID, Table: table, StreamARN: arn})
	}
	const maxInFlight, perShard = 32, 8
	sub, err := streams.NewSubscriber(streams.Config{
		Consumer: "keycloak-sync", Owner: "test", LeaseTable: leases, DeadLetters: deadletters.New(w.db, dlq, "keycloak-sync"),
		Source: streams.NewStaticSource(sources...), Streams: f, DB: w.db, OnGap: func(context.Context, streams.Gap) error { return nil },
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), Registerer: prometheus.NewRegistry(),
		LeaseDuration: 5 * time.Second, PollInterval: 10 * time.Millisecond, IdlePollMax: 40 * time.Millisecond,
		ShardReadRate: 400, DescribeStreamRate: 400, ListStreamsRate: 400, SourceInterval: 100 * time.Millisecond,
		ShardSyncInterval: 200 * time.Millisecond, CheckpointInterval: 50 * time.Millisecond,
		MaxInFlight: maxInFlight, MaxInFlightPerShard: perShard, MaxAttempts: 100,
		RetryBackoff: 20 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond, ShutdownTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	msgs, err := sub.Subscribe(runCtx, "records")
	if err != nil {
		t.Fatal(err)
	}
	var hungStarted, hungReturned atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for msg := range msgs {
			go func() {
				r, _ := streams.DecodeRecord(msg)
				isHung := r.Tenant != w.tenant.ID
				if isHung {
					hungStarted.Add(1)
				}
				err := w.handler.HandleMessage(msg)
				if isHung {
					hungReturned.Add(1)
				}
				if err != nil {
					msg.Metadata.Set(streams.MetaFailureReason, err.Error())
					msg.Nack()
					return
				}
				msg.Ack()
			}()
		}
	}()
	t.Cleanup(func() { stop(); _ = sub.Close(); <-done })

	feed := func(x *world, aggregates ...string) {
		for _, agg := range aggregates {
			for _, r := range x.records(agg) {
				f.Put(arns[x.tenant.ID], "s1", stypes.Record{EventName: stypes.OperationTypeInsert, Dynamodb: &stypes.StreamRecord{
					Keys: toStreamAttrs(r.Keys), NewImage: toStreamAttrs(r.NewImage)}})
			}
		}
	}
	for _, h := range hung {
		for u := range usersPerHungTenant {
			feed(h, fmt.Sprintf("user#u%d", u))
		}
	}
	// Every slot goes to a record at a hung realm.
	waitFor(t, hangFor/2, "the hung tenants' records in flight", func() bool { return hungStarted.Load() >= maxInFlight })

	w.exec(commands.CreateUser{Username: "healthy", Email: "healthy@example.com"})
	feed(w, "user#healthy")
	waitFor(t, hangFor/2, "the healthy tenant's user in its realm", func() bool {
		_, ok := w.kc.UserByUsername(testRealm, "healthy")
		return ok
	})
	if n := hungReturned.Load(); n != 0 {
		t.Fatalf("%d records of hung realms returned before the healthy user was synced: it waited for them", n)
	}
	if n := hungStarted.Load(); n != hungTenants*perShard {
		t.Errorf("%d records of hung realms in flight, want %d: each shard keeps its own limit", n, hungTenants*perShard)
	}
}

// The same in Lambda mode, where what every tenant shares is the function's concurrent
// executions (its reserved concurrency; here as many as the hung tenants). An invocation
// of a hung tenant ends once its realm's verdict parks the tenant — here for ten minutes —
// instead of waiting the park out inside the invocation: a user created in a healthy
// tenant reaches its realm while no hung tenant's first park is over. The hung
// tenants' records come again in later invocations and are kept as dead letters before
// ESM's retries run out: ESM discards none of them.
func TestInLambdaModeAHungRealmHoldsNoExecutionAHealthyTenantNeeds(t *testing.T) {
	const park = 10 * time.Minute
	w := newWorld(t)
	w.handler.cfg.Health.WithMinPark(park)
	hung := w.hungWorlds()
	ctx := t.Context()
	dlqTable := dynamotest.UniqueName("dlq")
	if err := streams.EnsureTables(ctx, w.db, dynamotest.UniqueName("leases"), dlqTable); err != nil {
		t.Fatal(err)
	}
	dl := deadletters.New(w.db, dlqTable, "keycloak-sync")
	batch := esm.New(esm.Config{Labels: w.names.ParseCommands, DeadLetters: dl, Handle: w.handler.HandleMessage})
	executions := make(chan struct{}, hungTenants)
	invoke := func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		executions <- struct{}{}
		defer func() { <-executions }()
		ictx, cancel := context.WithTimeout(ctx, 15*time.Minute) // Lambda's longest
		defer cancel()
		return batch.Handle(ictx, ev)
	}
	player := func(x *world) *esmtest.Player {
		out, err := w.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(w.names.Commands(x.tenant.System, x.tenant.ID))})
		if err != nil {
			t.Fatal(err)
		}
		return &esmtest.Player{Streams: dynamotest.Current(t).Streams(), StreamARN: aws.ToString(out.Table.LatestStreamArn), Invoke: invoke}
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	var hungPlayers []*esmtest.Player
	for _, h := range hung {
		p := player(h)
		hungPlayers = append(hungPlayers, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Drain(runCtx); err != nil && runCtx.Err() == nil {
				t.Errorf("player of %s: %v", h.tenant.ID, err)
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	// Every execution goes to an invocation of a hung tenant.
	waitFor(t, park/5, "the hung tenants' invocations running", func() bool { return len(executions) == hungTenants })

	w.exec(commands.CreateUser{Username: "healthy", Email: "healthy@example.com"})
	healthy := player(w)
	healthyDone := make(chan error, 1)
	go func() { healthyDone <- healthy.Drain(runCtx) }()
	waitFor(t, park/5, "the healthy tenant's user in its realm", func() bool {
		_, ok := w.kc.UserByUsername(testRealm, "healthy")
		return ok
	})
	for _, h := range hung {
		// 0: its first invocation is still waiting for its realm; 1: parked, the park not
		// over. More would mean the healthy tenant waited for a hung one's park to end.
		if n := w.handler.cfg.Health.failures(h.tenant.System, h.tenant.ID); n > 1 {
			t.Errorf("tenant %s: %d failures of its realm counted when the healthy user was synced, want at most 1 (its first park not over)", h.tenant.ID, n)
		}
	}
	if err := <-healthyDone; err != nil {
		t.Fatal(err)
	}
	waitFor(t, park/5, "the hung tenants' records kept as dead letters", func() bool {
		dls, err := dl.List(ctx, deadletters.Filter{})
		return err == nil && len(dls) >= hungTenants*usersPerHungTenant
	})
	stop()
	wg.Wait()
	for i, p := range hungPlayers {
		if fs := p.Failures(); len(fs) != 0 {
			t.Errorf("ESM gave up records of %s: %+v", hung[i].tenant.ID, fs)
		}
	}
}

// failures is how many failures of the tenant's realm its current park counts (0: not
// parked).
func (h *Health) failures(system, tenant string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.tenants[tenantKey{system, tenant}]; t != nil {
		return t.failures
	}
	return 0
}
