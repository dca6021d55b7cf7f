package keycloaksync

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/streams/streamstest"
)

// pipe is keycloak-sync's event path over the Streams fake: the tenant's history records
// are put on a fake stream (whose retention a test can make pass with Trim), read by a
// streams.Subscriber with leases and dead letters on DynamoDB Local, and handed to the
// world's handler with a Health of its own.
type pipe struct {
	w      *world
	f      *streamstest.Fake
	arn    string
	sub    *streams.Subscriber
	dl     *deadletters.Store
	health *Health
	mu     sync.Mutex
	put    map[string]bool // history items already on the stream (id + sk)
	acked  *atomic.Int64   // records handled without error
}

func (w *world) startPipe(parkMax time.Duration, maxAttempts int) *pipe {
	t := w.t
	t.Helper()
	ctx := t.Context()
	leases, dlq := dynamotest.UniqueName("leases"), dynamotest.UniqueName("dlq")
	if err := streams.EnsureTables(ctx, w.db, leases, dlq); err != nil {
		t.Fatal(err)
	}
	health, err := NewHealth(nil, "test", prometheus.NewRegistry(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	health.WithParkMax(parkMax)
	w.handler.cfg.Health = health
	f := streamstest.New()
	table := w.names.Commands(w.tenant.System, w.tenant.ID)
	arn := f.AddStream(table)
	f.AddShard(arn, "s1", "")
	dl := deadletters.New(w.db, dlq, "keycloak-sync")
	sub, err := streams.NewSubscriber(streams.Config{
		Consumer: "keycloak-sync", Owner: "test", LeaseTable: leases, DeadLetters: dl,
		Source:  streams.NewStaticSource(streams.Stream{System: w.tenant.System, Tenant: w.tenant.ID, Table: table, StreamARN: arn}),
		Streams: f, DB: w.db, OnGap: func(context.Context, streams.Gap) error { return nil },
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)), Registerer: prometheus.NewRegistry(),
		TimestampAttribute: "recorded_at_ms", LeaseDuration: time.Second,
		PollInterval: 10 * time.Millisecond, IdlePollMax: 40 * time.Millisecond, ShardReadRate: 400, DescribeStreamRate: 400,
		ListStreamsRate: 400, SourceInterval: 100 * time.Millisecond, ShardSyncInterval: 200 * time.Millisecond,
		CheckpointInterval: 50 * time.Millisecond, MaxAttempts: maxAttempts,
		RetryBackoff: 20 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	msgs, err := sub.Subscribe(runCtx, "records")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	acked := new(atomic.Int64)
	go func() {
		defer close(done)
		for msg := range msgs {
			go func() {
				if err := w.handler.HandleMessage(msg); err != nil {
					msg.Metadata.Set(streams.MetaFailureReason, err.Error())
					msg.Nack()
					return
				}
				acked.Add(1)
				msg.Ack()
			}()
		}
	}()
	t.Cleanup(func() { stop(); _ = sub.Close(); <-done })
	return &pipe{w: w, f: f, arn: arn, sub: sub, dl: dl, health: health, put: map[string]bool{}, acked: acked}
}

// feed puts the aggregates' history records not on the stream yet onto it, in order.
func (p *pipe) feed(aggregates ...string) {
	p.w.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, agg := range aggregates {
		for _, r := range p.w.records(agg) {
			key := agg + "/" + r.Keys["sk"].(*dtypes.AttributeValueMemberS).Value
			if p.put[key] {
				continue
			}
			p.put[key] = true
			p.f.Put(p.arn, "s1", stypes.Record{EventName: stypes.OperationTypeInsert, Dynamodb: &stypes.StreamRecord{
				Keys: toStreamAttrs(r.Keys), NewImage: toStreamAttrs(r.NewImage)}})
		}
	}
}

func toStreamAttrs(m map[string]dtypes.AttributeValue) map[string]stypes.AttributeValue {
	out := make(map[string]stypes.AttributeValue, len(m))
	for k, v := range m {
		out[k] = toStreamAttr(v)
	}
	return out
}

func toStreamAttr(v dtypes.AttributeValue) stypes.AttributeValue {
	switch a := v.(type) {
	case *dtypes.AttributeValueMemberS:
		return &stypes.AttributeValueMemberS{Value: a.Value}
	case *dtypes.AttributeValueMemberN:
		return &stypes.AttributeValueMemberN{Value: a.Value}
	case *dtypes.AttributeValueMemberB:
		return &stypes.AttributeValueMemberB{Value: a.Value}
	case *dtypes.AttributeValueMemberBOOL:
		return &stypes.AttributeValueMemberBOOL{Value: a.Value}
	case *dtypes.AttributeValueMemberNULL:
		return &stypes.AttributeValueMemberNULL{Value: a.Value}
	case *dtypes.AttributeValueMemberSS:
		return &stypes.AttributeValueMemberSS{Value: a.Value}
	case *dtypes.AttributeValueMemberNS:
		return &stypes.AttributeValueMemberNS{Value: a.Value}
	case *dtypes.AttributeValueMemberBS:
		return &stypes.AttributeValueMemberBS{Value: a.Value}
	case *dtypes.AttributeValueMemberM:
		return &stypes.AttributeValueMemberM{Value: toStreamAttrs(a.Value)}
	case *dtypes.AttributeValueMemberL:
		l := make([]stypes.AttributeValue, len(a.Value))
		for i, e := range a.Value {
			l[i] = toStreamAttr(e)
		}
		return &stypes.AttributeValueMemberL{Value: l}
	}
	panic(fmt.Sprintf("attribute type %T", v))
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// deadLetteredSKs are the sort keys of the records kept as dead letters.
func (p *pipe) deadLetteredSKs() map[string]bool {
	out := map[string]bool{}
	for _, dl := range p.deadLetters() {
		if sk, ok := dl.Record.Keys["sk"].(*dtypes.AttributeValueMemberS); ok {
			out[sk.Value] = true
		}
	}
	return out
}

func (p *pipe) deadLetters() []deadletters.Letter {
	dls, err := p.dl.List(context.Background(), deadletters.Filter{})
	if err != nil {
		p.w.t.Fatal(err)
	}
	return dls
}

// A realm that answers 500 to one user's PUT only, and everything else as usual: that is
// the record's failure, not the realm's. The tenant is not parked, its other users reach
// Keycloak, and the one user's record is retried and becomes a dead letter.
func TestOneRecordTheRealmRefusesDoesNotParkTheTenant(t *testing.T) {
	w := newWorld(t)
	p := w.startPipe(time.Hour, 4)
	names := []string{"ann", "bob", "cy", "dee", "eve"}
	for _, n := range names {
		w.exec(commands.CreateUser{Username: n, Email: n + "@example.com"})
		p.feed("user#" + n)
	}
	waitFor(t, 30*time.Second, "every user created in Keycloak", func() bool { return len(w.kc.Users(testRealm)) == len(names) })
	bob, _ := w.kc.UserByUsername(testRealm, "bob")
	w.kc.Inject(keycloaktest.Fault{Method: http.MethodPut, PathPrefix: keycloaktest.AdminPath(testRealm, "/users/"+bob.ID), Times: 1000, Status: 500})

	for _, n := range names {
		w.exec(commands.UpdateUser{Username: n, FirstName: ptr("Renamed " + n)})
		p.feed("user#" + n)
	}
	waitFor(t, 30*time.Second, "the other users updated in Keycloak", func() bool {
		for _, n := range names {
			u, _ := w.kc.UserByUsername(testRealm, n)
			if n != "bob" && u.FirstName != "Renamed "+n {
				return false
			}
		}
		return true
	})
	waitFor(t, 30*time.Second, "bob's update a dead letter", func() bool {
		dls := p.deadLetters()
		return len(dls) == 1 && dls[0].Aggregate == "user#bob"
	})
	if _, parked := p.health.Parked(w.tenant.System, w.tenant.ID); parked {
		t.Error("the tenant is parked for one record's failure")
	}
	if u, _ := w.kc.UserByUsername(testRealm, "bob"); u.FirstName == "Renamed bob" {
		t.Error("bob was updated through the fault")
	}
}

// A realm down for longer than the stream keeps records: the tenant is parked, past
// ParkMax its records become dead letters as they come (the stream is read on), so when
// the stream's retention trims them nothing is lost; once the realm answers, the re-drive
// sends the password changed meanwhile.
func TestARealmDownLongerThanTheStreamRetentionLosesNoPassword(t *testing.T) {
	w := newWorld(t)
	p := w.startPipe(time.Second, 100)
	w.exec(commands.CreateUser{Username: "ann", Email: "ann@example.com", Password: ptr("old-password")})
	p.feed("user#ann")
	waitFor(t, 30*time.Second, "ann in Keycloak", func() bool {
		u, ok := w.kc.UserByUsername(testRealm, "ann")
		pw, _ := w.kc.LastPassword(testRealm, u.ID)
		return ok && pw.Value == "old-password"
	})

	// The realm goes down: its token endpoint and Admin API answer 503.
	w.kc.RevokeTokens()
	w.kc.Inject(keycloaktest.Fault{PathPrefix: "/", Times: 1 << 30, Status: 503})
	w.exec(commands.ChangePassword{Username: "ann", Password: "new-password"})
	w.exec(commands.UpdateUser{Username: "ann", FirstName: ptr("Ann")})
	p.feed("user#ann")
	// The password change and the update become dead letters. So may the creation: a
	// record is delivered at least once, and one still in its handler (or not yet
	// checkpointed) when the realm went down is tried again and parked like the others.
	waitFor(t, 30*time.Second, "the tenant's records kept as dead letters", func() bool {
		kept := p.deadLetteredSKs()
		return kept[dynamo.HistorySK(2)] && kept[dynamo.HistorySK(3)]
	})
	// The stream's retention passes: every record is trimmed from it.
	p.f.Trim(p.arn, "s1", len(p.f.Sequences(p.arn, "s1")))

	// The realm answers again; the re-drive (every minute in keycloak-sync) sends them.
	w.kc.ClearFaults("/")
	// The next records of the tenant bring its probe once it is due.
	n := 0
	waitFor(t, 60*time.Second, "the tenant resumed", func() bool {
		if _, parked := p.health.Parked(w.tenant.System, w.tenant.ID); !parked {
			return true
		}
		n++
		name := fmt.Sprintf("later%d", n)
		w.exec(commands.CreateUser{Username: name, Email: name + "@example.com"})
		p.feed("user#" + name)
		time.Sleep(500 * time.Millisecond)
		return false
	})
	Redrive(t.Context(), p.dl, w.handler, zap.NewNop())
	u, _ := w.kc.UserByUsername(testRealm, "ann")
	if pw, _ := w.kc.LastPassword(testRealm, u.ID); pw.Value != "new-password" {
		t.Fatalf("Keycloak has password %q, want the one changed while the realm was down", pw.Value)
	}
	if u.FirstName != "Ann" {
		t.Errorf("Keycloak has first name %q, want Ann", u.FirstName)
	}
	if dls := p.deadLetters(); len(dls) != 0 {
		t.Errorf("dead letters left after the re-drive: %v", dls)
	}
}
