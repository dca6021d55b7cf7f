package eventbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awseb "github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/eventbridge"
	"github.com/ssodir/ssodir/internal/eventbridge/eventbridgetest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const bus = "ssodir-test-bus"

// client is an EventBridge client of the SDK pointed at the double.
func client(srv *eventbridgetest.Server) *awseb.Client {
	return awseb.NewFromConfig(aws.Config{Region: "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")},
		func(o *awseb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
}

// fixture is a feed table with changes of several aggregates in two tenants, some large.
type fixture struct {
	db      *dynamodb.Client
	table   string
	tenants []eventbridge.Tenant
	// want are the changes appended, by event id: tenant, aggregate, version, the event.
	want map[string]change
}

type change struct {
	tenant    eventbridge.Tenant
	aggregate string
	version   int64
	event     []byte
}

func newFixture(t *testing.T, aggregates, versions int) *fixture {
	t.Helper()
	f := &fixture{db: dynamotest.Current(t).DynamoDB(), want: map[string]change{},
		tenants: []eventbridge.Tenant{{System: "s1", Tenant: "t1"}, {System: "s1", Tenant: "t2"}}}
	f.table = changefeed.TableName(dynamo.Names{Prefix: dynamotest.UniqueName("eb")})
	if err := dynamo.EnsureTable(context.Background(), f.db, changefeed.Table(f.table)); err != nil {
		t.Fatal(err)
	}
	a := changefeed.NewAppender(f.db, f.table, changefeed.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, len(f.tenants)*aggregates)
	var mu sync.Mutex
	for _, tn := range f.tenants {
		for g := range aggregates {
			wg.Add(1)
			go func() {
				defer wg.Done()
				agg := fmt.Sprintf("%s-agg-%d", tn.Tenant, g)
				for v := int64(1); v <= int64(versions); v++ {
					pad := 100
					switch {
					case g == 0 && v == 2:
						pad = 300_000 // over PutEvents' 256 KB alone: goes trimmed to the bus
					case g%3 == 1:
						pad = 90_000 // three of these fill a call's 256 KB
					}
					id := fmt.Sprintf("%s-v%d", agg, v)
					ev, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": id, "source": changefeed.Source(tn.System, tn.Tenant),
						"type": "io.ssodir.user.updated", "subject": "user:" + agg, "time": time.Now().UTC(), "datacontenttype": "application/json",
						"data": map[string]any{"id": agg, "version": v, "actor": "test", "changes": map[string]any{},
							"state": map[string]any{"pad": strings.Repeat("x", pad)}}})
					if err := a.Append(context.Background(), changefeed.Change{System: tn.System, Tenant: tn.Tenant, Aggregate: agg, Version: v, Event: ev}); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					f.want[id] = change{tenant: tn, aggregate: agg, version: v, event: ev}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return f
}

// config is a publisher's; callTimeout is short where a lease must expire soon.
func (f *fixture) config(api eventbridge.API, db eventbridge.DB, owner string, callTimeout time.Duration) eventbridge.Config {
	return eventbridge.Config{Bus: bus, API: api, DB: db, Table: f.table, Owner: owner,
		Tenants:     func(context.Context) ([]eventbridge.Tenant, error) { return f.tenants, nil },
		CallTimeout: callTimeout, Interval: 50 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
}

type arrival struct {
	ID   string `json:"id"`
	Data struct {
		ID        string `json:"id"`
		Version   int64  `json:"version"`
		Truncated bool   `json:"truncated"`
		Href      string `json:"href"`
	} `json:"data"`
}

// check proves what reached the double: every change at least once (exactly once when
// exact: no call's outcome was unknown), each aggregate's first arrivals in version
// order, every entry as API.md says, and no call over PutEvents' limits.
func (f *fixture) check(t *testing.T, srv *eventbridgetest.Server, exact bool) {
	t.Helper()
	if v := srv.Violations(); len(v) > 0 {
		t.Fatalf("calls over PutEvents' limits or rules: %v", v)
	}
	count := map[string]int{}
	last := map[string]int64{}
	for _, e := range srv.Accepted() {
		var a arrival
		if err := json.Unmarshal([]byte(e.Detail), &a); err != nil {
			t.Fatalf("detail %q is no CloudEvent: %v", e.Detail[:min(len(e.Detail), 80)], err)
		}
		w, ok := f.want[a.ID]
		if !ok {
			t.Fatalf("the bus got a change never appended: %s", a.ID)
		}
		if e.Bus != bus || e.Source != "ssodir."+w.tenant.System+"."+w.tenant.Tenant || e.DetailType != "io.ssodir.user.updated" {
			t.Fatalf("entry of %s: bus %q source %q detail-type %q", a.ID, e.Bus, e.Source, e.DetailType)
		}
		if e.Size+14 > eventbridgetest.MaxRequestBytes {
			t.Fatalf("entry of %s is %d bytes", a.ID, e.Size)
		}
		if len(w.event)+len(e.Source)+len(e.DetailType)+14 > eventbridge.MaxRequestBytes {
			if !a.Data.Truncated || a.Data.Href != changefeed.Source(w.tenant.System, w.tenant.Tenant)+"/users/"+w.aggregate {
				t.Fatalf("an oversized change went as %s", e.Detail[:min(len(e.Detail), 300)])
			}
		} else if e.Detail != string(w.event) {
			t.Fatalf("the detail of %s is not its CloudEvent", a.ID)
		}
		count[a.ID]++
		if count[a.ID] > 1 {
			if exact {
				t.Fatalf("%s arrived %d times", a.ID, count[a.ID])
			}
			continue
		}
		if a.Data.Version != last[w.aggregate]+1 {
			t.Fatalf("%s v%d arrived first after v%d: not in version order", w.aggregate, a.Data.Version, last[w.aggregate])
		}
		last[w.aggregate] = a.Data.Version
	}
	for id := range f.want {
		if count[id] == 0 {
			t.Fatalf("%s never reached the bus (%d of %d did)", id, len(count), len(f.want))
		}
	}
}

// Every change reaches the bus once and in order, with entries refused in partial
// failures sent again, and nothing over PutEvents' limits.
func TestEveryChangeReachesTheBusOnceInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 6, 8)
	srv := eventbridgetest.New(eventbridgetest.Options{FailRate: 0.3, Seed: 7})
	defer srv.Close()
	p, err := eventbridge.New(f.config(client(srv), f.db, "one", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n, err := p.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n != len(f.want) {
		t.Fatalf("published %d, want %d", n, len(f.want))
	}
	// A call that failed whole may have been accepted (a timeout): then a change may
	// arrive twice. Without one, each arrives once.
	f.check(t, srv, p.Stats().CallErrors == 0)
	if st := p.Stats(); st.FailedEntries == 0 {
		t.Fatalf("no entry failed (stats %+v): the partial failures were not exercised", st)
	}
	// The position was kept: a second run publishes nothing again.
	if n, err := p.Once(context.Background()); err != nil || n != 0 {
		t.Fatalf("a second run published %d (%v), want 0", n, err)
	}
}

// A throttled call is sent again with backoff until the bucket lets it through.
func TestThrottledCallsAreSentAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, 3)
	// One call of 10 entries empties the bucket, which takes 2 s to refill for the next.
	srv := eventbridgetest.New(eventbridgetest.Options{Rate: 5, Burst: eventbridgetest.MaxEntries})
	defer srv.Close()
	p, err := eventbridge.New(f.config(client(srv), f.db, "one", 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.check(t, srv, false)
	if _, throttled, _ := srv.Counts(); throttled == 0 {
		t.Fatal("the double never throttled: the test did not exercise throttling")
	}
}

// dying is a process's DynamoDB that stops answering after a number of writes: the
// process is gone without giving up its lease.
type dying struct {
	eventbridge.DB
	writes atomic.Int64
	after  int64
}

var errDead = errors.New("the process is gone")

func (d *dying) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.writes.Add(1) > d.after {
		return nil, errDead
	}
	return d.DB.UpdateItem(ctx, in, opts...)
}

// Two processes publish the same tenants: one dies mid-way holding its leases, the other
// takes them when they expire and goes on from the kept positions. Every change reaches
// the bus at least once and each aggregate's changes first arrive in version order.
func TestALeaseMovesWhenItsHolderDies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 4, 6)
	srv := eventbridgetest.New(eventbridgetest.Options{FailRate: 0.2, Seed: 11})
	defer srv.Close()
	// Leases of 6 s (the least for a call timeout of 1 s), not the default minute: the
	// second takes over once the first's has run out.
	withLease := func(c eventbridge.Config) eventbridge.Config { c.LeaseDuration = 6 * time.Second; return c }
	first, err := eventbridge.New(withLease(f.config(client(srv), &dying{DB: f.db, after: 5}, "first", time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	second, err := eventbridge.New(withLease(f.config(client(srv), f.db, "second", time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go first.Run(ctx)
	// The first takes the leases before the second starts (its fifth write kills it).
	deadline := time.Now().Add(2 * time.Minute)
	for first.Stats().Published == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	go second.Run(ctx)
	for time.Now().Before(deadline) {
		seen := map[string]bool{}
		for _, e := range srv.Accepted() {
			var a arrival
			_ = json.Unmarshal([]byte(e.Detail), &a)
			seen[a.ID] = true
		}
		if len(seen) == len(f.want) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	f.check(t, srv, false)
	if second.Stats().Published == 0 {
		t.Fatal("the second process published nothing: the lease never moved")
	}
}
