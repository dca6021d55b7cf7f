package queries

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/progress"
)

// FollowProjectors follows the feeds discovery lists, with the service token, and leaves a
// projector's feed once it is no longer listed (it stopped; its heartbeat row is gone):
// X-Min-Version reads count on a feed only while every feed followed is connected.
func TestFollowProjectorsFollowsWhatDiscoveryFinds(t *testing.T) {
	const token = "feed-secret"
	feeds := make([]*progress.Feed, 2)
	urls := make([]string, 2)
	for i := range feeds {
		feeds[i] = progress.NewFeed(progress.FeedConfig{Token: token})
		srv := httptest.NewServer(feeds[i])
		t.Cleanup(func() { feeds[i].Close(); srv.Close() })
		urls[i] = srv.URL
	}
	svc, err := New(anyDB{}, dynamo.Names{Prefix: "fp"}, testKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	listed := urls
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	svc.FollowProjectors(ctx, &http.Client{}, token, func(context.Context) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return listed, nil
	}, zap.NewNop())
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(3 * DiscoveryInterval); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	wait("both feeds followed", func() bool {
		return feeds[0].Subscribers() == 1 && feeds[1].Subscribers() == 1 && svc.watches.feedsLive()
	})

	// The second projector stops: its row is gone from the next discovery.
	mu.Lock()
	listed = urls[:1]
	mu.Unlock()
	wait("the second feed left", func() bool { return feeds[1].Subscribers() == 0 })
	wait("the remaining feed counted live", func() bool {
		return svc.watches.feeds.Load() == 1 && svc.watches.connected.Load() == 1 && svc.watches.feedsLive()
	})
	feeds[0].Publish(progress.Notice{System: "acme", Tenant: "eu", ID: "user#ann", Version: 3})
	wait("the notice heard", func() bool { return svc.watches.notices.Load() == 1 })
}
