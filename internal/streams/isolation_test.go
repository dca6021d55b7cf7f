package streams_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/streams/streamstest"
)

// A tenant whose handler hangs (its Keycloak stopped answering, say) holds at most
// MaxInFlightPerShard slots, so another tenant's records keep flowing.
func TestAStuckStreamDoesNotHoldUpAnother(t *testing.T) {
	t.Parallel()
	h, f := newHarness(t), streamstest.New()
	stuckARN, stuck := fakeStream(f, "stuck", "s1")
	freeARN, free := fakeStream(f, "free", "s1")
	for i := 0; i < 20; i++ {
		f.Put(stuckARN, "s1", item(fmt.Sprintf("a%d", i), 1))
		f.Put(freeARN, "s1", item(fmt.Sprintf("b%d", i), 1))
	}
	release := make(chan struct{})
	defer close(release)
	s := h.newSubscriber(streams.NewStaticSource(stuck, free), f, nil, func(c *streams.Config) {
		c.MaxInFlight, c.MaxInFlightPerShard = 8, 2
	})
	rec := &recorder{}
	consume(t, s, rec, func(r streams.Record) error {
		if r.Tenant == "stuck" {
			<-release
		}
		return nil
	})
	eventually(t, 10*time.Second, "every record of the free tenant is applied", func() bool {
		n := 0
		for _, d := range rec.all() {
			if d.rec.Tenant == "free" {
				n++
			}
		}
		return n == 20
	})
}
