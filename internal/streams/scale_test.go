package streams_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/streams/streamstest"
)

// tenantSet counts the tenants a consumer has read.
type tenantSet struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (s *tenantSet) add(r streams.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seen[r.Tenant] = true
	return nil
}

func (s *tenantSet) has(tenants ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range tenants {
		if !s.seen[t] {
			return false
		}
	}
	return true
}

func (s *tenantSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// Thousands of tenants, two consumers (projector and keycloak-sync), the Streams fake
// enforcing AWS's rates: no call is ever throttled, every tenant is read by both, and
// tenants added later (with their stream ARN, and by table name only) are picked up
// without waiting behind the sweep of the others.
//
// The 5,000 tenants without the race detector (`make scale-test`; 2.5 to 6 minutes
// here), 500 under it (`make test`): the race detector allows 8,128 live
// goroutines per process (a followed shard has two), and slows the lease-table writes
// (four per shard and consumer at first sight: row, acquire, dead-letter check,
// checkpoint) that set the pace. STREAMS_SCALE_TENANTS sets another count.
//
// Not parallel: it would take DynamoDB Local and the CPU from the other tests, whose
// one-second leases need heartbeats that get through.
func TestThousandsOfTenantsTwoConsumersNeverThrottled(t *testing.T) {
	tenants := 5000
	if raceEnabled {
		tenants = 500
	}
	if n, err := strconv.Atoi(os.Getenv("STREAMS_SCALE_TENANTS")); err == nil && n > 0 {
		if raceEnabled && n > 3500 {
			t.Fatalf("STREAMS_SCALE_TENANTS=%d needs more goroutines than the race detector allows; run it without -race", n)
		}
		tenants = n
	}
	const scale = 50
	h, f := newHarness(t), streamstest.New()
	limits := streamstest.Limits{
		ShardReads:     streamstest.AWSLimits.ShardReads,
		DescribeStream: streamstest.AWSLimits.DescribeStream * scale,
		ListStreams:    streamstest.AWSLimits.ListStreams * scale,
	}
	f.EnforceLimits(limits)
	var list []streams.Stream
	for i := range tenants {
		arn, st := fakeStream(f, fmt.Sprintf("t%d", i), "s1")
		f.Put(arn, "s1", item("u", 1))
		list = append(list, st)
	}
	src := streams.NewStaticSource(list...)
	awsRates := func(consumer string) func(*streams.Config) {
		return func(c *streams.Config) {
			c.Consumer = consumer
			c.Logger = zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
			c.LeaseDuration = 10 * time.Second
			c.PollInterval, c.IdlePollMax = 250*time.Millisecond, time.Second
			c.SourceInterval, c.ShardSyncInterval = time.Second, time.Minute
			c.Consumers = 2
			c.ShardReadRate = limits.ShardReads
			c.DescribeStreamRate, c.ListStreamsRate = limits.DescribeStream, limits.ListStreams
		}
	}
	sets := map[string]*tenantSet{}
	start := time.Now()
	for _, consumer := range []string{"projector", "keycloak-sync"} {
		set := &tenantSet{seen: map[string]bool{}}
		sets[consumer] = set
		s := h.newSubscriber(src, f, nil, awsRates(consumer))
		consume(t, s, &recorder{}, set.add)
	}
	progress := func() string {
		return fmt.Sprintf("projector %d, keycloak-sync %d of %d; throttled GetRecords %d, DescribeStream %d, ListStreams %d",
			sets["projector"].len(), sets["keycloak-sync"].len(), tenants,
			f.Throttled("GetRecords"), f.Throttled("DescribeStream"), f.Throttled("ListStreams"))
	}
	eventually(t, 15*time.Minute, "both consumers have read every tenant", func() bool {
		if time.Since(start)%(10*time.Second) < 20*time.Millisecond {
			t.Log(progress())
		}
		return sets["projector"].len() == tenants && sets["keycloak-sync"].len() == tenants
	})
	t.Logf("%d tenants read by both consumers in %s; %d goroutines", tenants, time.Since(start).Round(time.Millisecond), runtime.NumGoroutine())

	// Idle: every shard read, nothing new. The calls it costs per shard and second.
	reads := f.Calls("GetRecords")
	time.Sleep(3 * time.Second)
	perShard := float64(f.Calls("GetRecords")-reads) / 3 / float64(tenants)
	t.Logf("idle: %.2f GetRecords per shard per second, both consumers together (ceiling 2 at IdlePollMax 1s)", perShard)

	// New tenants: five with their stream ARN, five by table name only (ListStreams).
	var added []string
	for i := range 10 {
		name := fmt.Sprintf("new%d", i)
		arn, st := fakeStream(f, name, "s1")
		f.Put(arn, "s1", item("u", 1))
		if i%2 == 1 {
			st.StreamARN = ""
		}
		src.Add(st)
		added = append(added, name)
	}
	addedAt := time.Now()
	for name, set := range sets {
		eventually(t, time.Minute, name+" has read the new tenants", func() bool { return set.has(added...) })
	}
	t.Logf("new tenants read by both consumers %s after they were added", time.Since(addedAt).Round(time.Millisecond))

	for _, op := range []string{"GetRecords", "DescribeStream", "ListStreams"} {
		if n := f.Throttled(op); n != 0 {
			t.Errorf("%d %s calls throttled, want none", n, op)
		}
	}
}
