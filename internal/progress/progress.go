// Package progress lets query APIs wait on the projector's progress instead of polling
// the read tables: a projector publishes a Notice on its Feed once an aggregate's view in
// the tenant's current read tables holds a record's version (as soon as the view's
// transaction is done; the record's activity and membership items may follow), and a query
// API that Follows the feed wakes the X-Min-Version reads waiting on that aggregate, which
// then read the view once.
//
// A notice is only a hint. Readers always answer from a strongly consistent read of the
// item, never from a notice, so a lost, late or duplicated notice costs time, never
// correctness: the readers' slow poll still finds the item. The feed is served on the
// projector's probe listener (GET /v1/applied), as newline-delimited JSON, with the same
// exposure as its /metrics (tenant and aggregate names, versions; no user data).
package progress

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Path is where a projector serves its feed.
const Path = "/v1/applied"

// Notice says that the view of the aggregate ID (its partition key, e.g. "user#ann") in the
// tenant's current read tables holds version Version or a newer one.
type Notice struct {
	System  string `json:"system"`
	Tenant  string `json:"tenant"`
	ID      string `json:"id"`
	Version int64  `json:"version"`
}

const (
	// subscriberBuffer is how many notices may wait for a slow subscriber; one that falls
	// further behind is dropped, and reconnects.
	subscriberBuffer = 4096
	// keepAlive is how often an idle feed writes an empty line, so that both ends notice a
	// dead connection, and how long a write may take.
	keepAlive = 10 * time.Second
)

// Feed fans notices out to the query APIs following it. Publish never blocks.
type Feed struct {
	mu     sync.Mutex
	subs   map[chan Notice]struct{}
	closed chan struct{}
	once   sync.Once
}

// NewFeed is a feed without subscribers.
func NewFeed() *Feed {
	return &Feed{subs: map[chan Notice]struct{}{}, closed: make(chan struct{})}
}

// Publish hands n to every subscriber. A subscriber whose buffer is full is dropped (its
// stream ends); it reconnects, and polls meanwhile.
func (f *Feed) Publish(n Notice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- n:
		default:
			delete(f.subs, ch)
			close(ch)
		}
	}
}

// Subscribers is how many streams are being served.
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// Close ends every stream, so that the HTTP server can shut down.
func (f *Feed) Close() { f.once.Do(func() { close(f.closed) }) }

// ServeHTTP streams notices as JSON lines until the client leaves or the feed closes.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ch := make(chan Notice, subscriberBuffer)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		if _, ok := f.subs[ch]; ok {
			delete(f.subs, ch)
		}
		f.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// The listener's write timeout is for requests, not for a stream: each write gets its own.
	flush := func() error {
		if err := rc.SetWriteDeadline(time.Now().Add(keepAlive)); err != nil {
			return err
		}
		return rc.Flush()
	}
	if flush() != nil {
		return
	}
	enc := json.NewEncoder(w)
	ticker := time.NewTicker(keepAlive)
	defer ticker.Stop()
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				return // dropped: too slow
			}
			if err := rc.SetWriteDeadline(time.Now().Add(keepAlive)); err != nil {
				return
			}
			if enc.Encode(n) != nil {
				return
			}
			// Whatever else is queued goes out with it, in one flush.
			for range len(ch) {
				if n, ok = <-ch; !ok || enc.Encode(n) != nil {
					return
				}
			}
			if flush() != nil {
				return
			}
		case <-ticker.C:
			if _, err := w.Write([]byte("\n")); err != nil || flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-f.closed:
			return
		}
	}
}

// Follow reads the feed at url (a projector's probe listener, e.g. http://host:8082) until
// ctx is done, handing each notice to notify. It reconnects after a failure, after a
// pause that doubles up to 10 s while the feed cannot be reached and is 100 ms again once a
// stream was served, and tells connected when it starts and stops reading.
func Follow(ctx context.Context, client *http.Client, url string, notify func(Notice), connected func(bool), log *zap.Logger) {
	const firstPause = 100 * time.Millisecond
	pause := firstPause
	for ctx.Err() == nil {
		served, err := follow(ctx, client, url+Path, notify, connected)
		if ctx.Err() != nil {
			return
		}
		if served {
			// The feed was there: a lost stream (a projector restarted) is not a feed that
			// keeps failing, so the next one is sought as soon as at first.
			pause = firstPause
		}
		log.Info("projector progress feed lost; X-Min-Version reads poll until it is back", zap.String("feed", url), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 10*time.Second)
	}
}

// follow reads one stream of the feed; served reports that the feed answered it.
func follow(ctx context.Context, client *http.Client, url string, notify func(Notice), connected func(bool)) (served bool, err error) {
	// A feed that says nothing for three keep-alives is dead.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	connected(true)
	defer connected(false)
	watchdog := time.AfterFunc(3*keepAlive, cancel)
	defer watchdog.Stop()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		watchdog.Reset(3 * keepAlive)
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var n Notice
		if err := json.Unmarshal(line, &n); err != nil {
			return true, fmt.Errorf("feed line %q: %w", line, err)
		}
		notify(n)
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	return true, fmt.Errorf("the feed ended")
}
