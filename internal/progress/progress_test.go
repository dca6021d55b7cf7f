package progress

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
)

const testToken = "progress-secret"

// follower follows a feed and keeps what it heard.
type follower struct {
	mu        sync.Mutex
	notices   []Notice
	connected int
}

func (f *follower) notify(n Notice) { f.mu.Lock(); f.notices = append(f.notices, n); f.mu.Unlock() }
func (f *follower) up(up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if up {
		f.connected++
	} else {
		f.connected--
	}
}
func (f *follower) state() (int, []Notice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connected, append([]Notice(nil), f.notices...)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestFeed: a query API following a projector's feed over HTTP hears every notice
// published while it is connected, in order; a feed restarted at the same address is
// followed again; Close ends the streams so the server can stop.
func TestFeed(t *testing.T) {
	feed := NewFeed(FeedConfig{Token: testToken})
	var serving atomic.Pointer[Feed] // the projector now listening at the address
	serving.Store(feed)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != Path {
			http.NotFound(w, r)
			return
		}
		serving.Load().ServeHTTP(w, r)
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var f follower
	go Follow(ctx, srv.Client(), srv.URL, testToken, f.notify, f.up, zap.NewNop())
	eventually(t, "the follower to connect", func() bool { return feed.Subscribers() == 1 })
	want := []Notice{{"acme", "eu", "user#ann", 1}, {"acme", "eu", "group#staff", 7}, {"acme", "us", "user#ann", 2}}
	for _, n := range want {
		feed.Publish(n)
	}
	eventually(t, "the notices", func() bool { _, got := f.state(); return len(got) == len(want) })
	if connected, got := f.state(); connected != 1 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("connected %d, heard %v, want %v", connected, got, want)
	}

	// The projector stops (its feed closes), and a new one serves at the same address.
	feed.Close()
	eventually(t, "the follower to notice the end", func() bool { c, _ := f.state(); return c == 0 })
	next := NewFeed(FeedConfig{Token: testToken})
	serving.Store(next)
	eventually(t, "the follower to reconnect", func() bool { return next.Subscribers() == 1 })
	next.Publish(Notice{"acme", "eu", "user#bob", 3})
	eventually(t, "the notice of the new feed", func() bool { _, got := f.state(); return len(got) == 4 })
	if c, _ := f.state(); c != 1 {
		t.Fatalf("connected %d after the reconnect, want 1", c)
	}
	cancel()
	eventually(t, "the follower to leave", func() bool { return next.Subscribers() == 0 })
	next.Close()
}

// TestPublishDropsASlowSubscriber: a subscriber whose buffer is full is dropped (its
// stream ends and it reconnects) rather than slowing the projector down.
func TestPublishDropsASlowSubscriber(t *testing.T) {
	feed := NewFeed(FeedConfig{Token: testToken})
	slow := make(chan Notice, 2)
	fast := make(chan Notice, 10)
	feed.subs[slow], feed.subs[fast] = struct{}{}, struct{}{}
	for v := range int64(3) {
		feed.Publish(Notice{"acme", "eu", "user#ann", v + 1})
	}
	if feed.Subscribers() != 1 {
		t.Fatalf("%d subscribers, want the slow one dropped", feed.Subscribers())
	}
	if n := len(fast); n != 3 {
		t.Fatalf("the fast subscriber got %d notices, want 3", n)
	}
	<-slow
	<-slow
	if _, open := <-slow; open {
		t.Fatal("the slow subscriber's channel is still open")
	}
}

// TestFeedOutlivesTheListenersTimeouts: every ssodir listener has read and write timeouts
// (httpapi.DefaultLimits, 30 s each) for its requests; a feed is one request that lasts as
// long as the projector, so they must not cut it (each write of the feed sets its own
// deadline, and net/http clears the read deadline once a request without a body has been
// read).
func TestFeedOutlivesTheListenersTimeouts(t *testing.T) {
	feed := NewFeed(FeedConfig{Token: testToken})
	defer feed.Close()
	srv := httptest.NewUnstartedServer(feed)
	srv.Config.ReadTimeout = 100 * time.Millisecond
	srv.Config.WriteTimeout = 100 * time.Millisecond
	srv.Start()
	defer srv.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var f follower
	var ups atomic.Int32
	go Follow(ctx, srv.Client(), srv.URL, testToken, f.notify, func(up bool) {
		if up {
			ups.Add(1)
		}
		f.up(up)
	}, zap.NewNop())
	eventually(t, "the follower to connect", func() bool { return feed.Subscribers() == 1 })
	for v := range int64(5) {
		time.Sleep(100 * time.Millisecond)
		feed.Publish(Notice{"acme", "eu", "user#ann", v + 1})
	}
	eventually(t, "the notices", func() bool { _, got := f.state(); return len(got) == 5 })
	if c, _ := f.state(); c != 1 || ups.Load() != 1 {
		t.Fatalf("connected %d after %d connections, want one connection that lasted", c, ups.Load())
	}
}

// TestFollowReconnectsAtOnceAfterAStreamThatWorked: the pause before reconnecting grows
// while connecting fails, and starts again from its minimum once a stream was served, so
// that a feed lost now and then (a projector restarted) is back within 100 ms each time.
func TestFollowReconnectsAtOnceAfterAStreamThatWorked(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Each stream brings one notice and ends.
		served.Add(1)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"system":"acme","tenant":"eu","id":"user#ann","version":1}` + "\n"))
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var f follower
	go Follow(ctx, srv.Client(), srv.URL, testToken, f.notify, f.up, zap.NewNop())
	// Growing pauses (100, 200, 400, 800 ms …) allow 4 streams in 1.6 s; pauses that start
	// again at 100 ms allow about 16.
	time.Sleep(1600 * time.Millisecond)
	if n := served.Load(); n < 8 {
		t.Fatalf("%d streams in 1.6 s: the pause kept growing after streams that worked", n)
	}
}

// TestFeedNeedsTheServiceToken: a request without the token, with another, or to a feed
// that has none configured, is refused before it subscribes; a follower with the wrong
// token never hears a notice.
func TestFeedNeedsTheServiceToken(t *testing.T) {
	feed := NewFeed(FeedConfig{Token: testToken})
	defer feed.Close()
	open := NewFeed(FeedConfig{})
	defer open.Close()
	for _, c := range []struct {
		name, auth string
		feed       *Feed
	}{
		{"no token", "", feed},
		{"another token", "Bearer other", feed},
		{"the token without Bearer", testToken, feed},
		{"a feed without a token configured", "Bearer ", open},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, Path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		c.feed.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401", c.name, rec.Code)
		}
		if c.feed.Subscribers() != 0 {
			t.Errorf("%s: subscribed", c.name)
		}
	}

	srv := httptest.NewServer(feed)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var f follower
	go Follow(ctx, srv.Client(), srv.URL, "wrong", f.notify, func(bool) {}, zap.NewNop())
	time.Sleep(300 * time.Millisecond) // several attempts (100 ms, 200 ms …)
	feed.Publish(Notice{"acme", "eu", "user#ann", 1})
	if n := feed.Subscribers(); n != 0 {
		t.Fatalf("a follower with the wrong token subscribed (%d)", n)
	}
	if _, got := f.state(); len(got) != 0 {
		t.Fatalf("a follower with the wrong token heard %v", got)
	}
}

// TestFeedCapsItsSubscribers: beyond MaxSubscribers a request is refused (503) before it
// holds a buffer; once one leaves, another is served.
func TestFeedCapsItsSubscribers(t *testing.T) {
	feed := NewFeed(FeedConfig{Token: testToken, MaxSubscribers: 2})
	defer feed.Close()
	srv := httptest.NewServer(feed)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var a, b follower
	go Follow(ctx, srv.Client(), srv.URL, testToken, a.notify, a.up, zap.NewNop())
	bctx, leave := context.WithCancel(ctx)
	go Follow(bctx, srv.Client(), srv.URL, testToken, b.notify, b.up, zap.NewNop())
	eventually(t, "two followers", func() bool { return feed.Subscribers() == 2 })

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+Path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a third follower: status %d, want 503", resp.StatusCode)
	}
	if n := feed.Subscribers(); n != 2 {
		t.Fatalf("%d subscribers after the refusal, want 2", n)
	}
	leave()
	eventually(t, "the second follower to leave", func() bool { return feed.Subscribers() == 1 })
	resp, err = srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a follower after one left: status %d, want 200", resp.StatusCode)
	}
}
