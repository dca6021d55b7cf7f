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
// projector's probe listener (GET /v1/applied), as newline-delimited JSON. Its notices name
// aggregates (`user#<username>`) of every tenant, so it is not open: a request needs the
// service credential the projectors and query APIs share (SSO_PROGRESS_TOKEN, as
// `Authorization: Bearer`), at most MaxSubscribers streams are served at once (each holds a
// buffer of subscriberBuffer notices), and it is never offered to browsers (no CORS).
package progress

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
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

// DefaultMaxSubscribers caps the streams a feed serves at once: every query API process
// holds one per projector, so this is far above any deployment's query API count.
const DefaultMaxSubscribers = 64

// FeedConfig secures a Feed.
type FeedConfig struct {
	// Token is the credential a follower must present (SSO_PROGRESS_TOKEN); empty refuses
	// every follower.
	Token string
	// MaxSubscribers caps the streams served at once; 0 means DefaultMaxSubscribers.
	MaxSubscribers int
}

// Feed fans notices out to the query APIs following it. Publish never blocks.
type Feed struct {
	token  []byte
	max    int
	mu     sync.Mutex
	subs   map[chan Notice]struct{}
	closed chan struct{}
	once   sync.Once
}

// NewFeed is a feed without subscribers.
func NewFeed(cfg FeedConfig) *Feed {
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = DefaultMaxSubscribers
	}
	return &Feed{token: []byte(cfg.Token), max: cfg.MaxSubscribers, subs: map[chan Notice]struct{}{}, closed: make(chan struct{})}
}

// retryFull is the Retry-After of a refusal beyond the subscriber cap.
const retryFull = 10 * time.Second

// authorized reports whether r carries the feed's token.
func (f *Feed) authorized(r *http.Request) bool {
	if len(f.token) == 0 {
		return false
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), f.token) == 1
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

// ServeHTTP is Serve for a plain HTTP server: a refusal is answered with its status.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := f.Serve(w, r); err != nil {
		status := http.StatusServiceUnavailable
		if apperr.KindOf(err) == apperr.KindUnauthenticated {
			status = http.StatusUnauthorized
		}
		http.Error(w, err.Error(), status)
	}
}

// Serve streams notices as JSON lines until the client leaves or the feed closes. Before
// anything is written it refuses a request without the token (apperr unauthenticated) and
// one beyond the subscriber cap (apperr unavailable, with Retry-After); the caller answers
// those.
func (f *Feed) Serve(w http.ResponseWriter, r *http.Request) error {
	if !f.authorized(r) {
		return apperr.Unauthenticated("the progress feed needs the service token (SSO_PROGRESS_TOKEN) as a bearer token")
	}
	ch := make(chan Notice, subscriberBuffer)
	f.mu.Lock()
	if len(f.subs) >= f.max {
		f.mu.Unlock()
		return apperr.Unavailable(fmt.Errorf("the progress feed serves at most %d followers at once", f.max), retryFull)
	}
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
		return nil
	}
	enc := json.NewEncoder(w)
	ticker := time.NewTicker(keepAlive)
	defer ticker.Stop()
	for {
		select {
		case n, ok := <-ch:
			if !ok {
				return nil // dropped: too slow
			}
			if err := rc.SetWriteDeadline(time.Now().Add(keepAlive)); err != nil {
				return nil
			}
			if enc.Encode(n) != nil {
				return nil
			}
			// Whatever else is queued goes out with it, in one flush.
			for range len(ch) {
				if n, ok = <-ch; !ok || enc.Encode(n) != nil {
					return nil
				}
			}
			if flush() != nil {
				return nil
			}
		case <-ticker.C:
			if _, err := w.Write([]byte("\n")); err != nil || flush() != nil {
				return nil
			}
		case <-r.Context().Done():
			return nil
		case <-f.closed:
			return nil
		}
	}
}

// Follow reads the feed at url (a projector's probe listener, e.g. http://host:8082) until
// ctx is done, handing each notice to notify. It reconnects after a failure, after a
// pause that doubles up to 10 s while the feed cannot be reached and is 100 ms again once a
// stream was served, and tells connected when it starts and stops reading.
func Follow(ctx context.Context, client *http.Client, url, token string, notify func(Notice), connected func(bool), log *zap.Logger) {
	const firstPause = 100 * time.Millisecond
	pause := firstPause
	for ctx.Err() == nil {
		served, err := follow(ctx, client, url+Path, token, notify, connected)
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
func follow(ctx context.Context, client *http.Client, url, token string, notify func(Notice), connected func(bool)) (served bool, err error) {
	// A feed that says nothing for three keep-alives is dead.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
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
