package keycloak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// liveDirectory is a write model that changes while a reconcile runs, with a read model
// that lags behind it.
type liveDirectory struct {
	mu      sync.Mutex
	rng     *rand.Rand
	users   map[string]DirectoryUser // live users by username
	nextID  int
	history []map[string]DirectoryUser // the read model's view after each change
	lag     int                        // how many changes the read model is behind
	// touched are the ids changed or deleted since the realm was first filled.
	touched map[string]bool
	// onChange, when set, is told each new state (the event path syncing it).
	onChange func(u DirectoryUser, deleted bool)
	pending  sync.WaitGroup
}

func (d *liveDirectory) snapshot() {
	snap := make(map[string]DirectoryUser, len(d.users))
	for k, v := range d.users {
		snap[k] = v
	}
	d.history = append(d.history, snap)
}

// change applies one random command: a create, an update, a deactivation or a delete.
func (d *liveDirectory) change() {
	d.mu.Lock()
	names := make([]string, 0, len(d.users))
	for n := range d.users {
		names = append(names, n)
	}
	var changed DirectoryUser
	deleted := false
	switch op := d.rng.IntN(4); {
	case op == 0 || len(names) == 0:
		d.nextID++
		name := fmt.Sprintf("user%02d", d.rng.IntN(30))
		if old, ok := d.users[name]; ok {
			d.touched[old.ID] = true
			name = fmt.Sprintf("new%03d", d.nextID)
		}
		changed = DirectoryUser{ID: fmt.Sprintf("id%03d", d.nextID), Username: name, Email: name + "@example.com", Active: true, Version: 1}
		d.users[name] = changed
	default:
		name := names[d.rng.IntN(len(names))]
		u := d.users[name]
		d.touched[u.ID] = true
		u.Version++
		switch op {
		case 1:
			u.FirstName = fmt.Sprintf("v%d", u.Version)
			d.users[name] = u
		case 2:
			u.Active = !u.Active
			d.users[name] = u
		case 3:
			delete(d.users, name)
			deleted = true
		}
		changed = u
	}
	d.snapshot()
	notify := d.onChange
	// The event path syncs some changes as they happen and misses others, as a lagging or
	// failing one would.
	synced := d.rng.IntN(2) == 0
	d.mu.Unlock()
	if notify != nil && synced {
		// The event path runs beside the reconcile, in the same process.
		d.pending.Add(1)
		go func() {
			defer d.pending.Done()
			notify(changed, deleted)
		}()
	}
}

func (d *liveDirectory) Users(context.Context) iter.Seq2[DirectoryUser, error] {
	d.mu.Lock()
	view := d.history[max(0, len(d.history)-1-d.lag)]
	users := make([]DirectoryUser, 0, len(view))
	for _, u := range view {
		users = append(users, u)
	}
	d.mu.Unlock()
	return func(yield func(DirectoryUser, error) bool) {
		for _, u := range users {
			if !yield(u, nil) {
				return
			}
		}
	}
}

func (d *liveDirectory) Groups(context.Context) iter.Seq2[DirectoryGroup, error] {
	return func(func(DirectoryGroup, error) bool) {}
}

func (d *liveDirectory) User(_ context.Context, username string) (DirectoryUser, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, ok := d.users[strings.ToLower(username)]
	return u, ok, nil
}

func (d *liveDirectory) Group(context.Context, string) (DirectoryGroup, bool, error) {
	return DirectoryGroup{}, false, nil
}

func (d *liveDirectory) Member(context.Context, string, string) (string, string, bool, error) {
	return "", "", false, nil
}

// interleaver sits between a reconcile's client and the realm: before each request it may
// change the directory, and it records every user write that carries an older
// ssodir_version than the one the realm holds at that moment.
type interleaver struct {
	next    http.RoundTripper
	kc      *keycloaktest.Server
	dir     *liveDirectory
	rate    float64
	mu      sync.Mutex
	rng     *rand.Rand
	olderIn []string
}

func (i *interleaver) RoundTrip(req *http.Request) (*http.Response, error) {
	i.mu.Lock()
	change := i.rng.Float64() < i.rate
	i.mu.Unlock()
	if change {
		i.dir.change()
	}
	if (req.Method == http.MethodPut || req.Method == http.MethodPost) && strings.Contains(req.URL.Path, "/users") &&
		!strings.Contains(req.URL.Path, "/groups/") && !strings.HasSuffix(req.URL.Path, "/reset-password") && req.Body != nil {
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		var w struct {
			Username   string              `json:"username"`
			Attributes map[string][]string `json:"attributes"`
		}
		if json.Unmarshal(body, &w) == nil {
			sent := versionOf(w.Attributes)
			if held, ok := i.kc.UserByUsername(realm, w.Username); ok && firstValue(held.Attributes, AttrSsodirID) == firstValue(w.Attributes, AttrSsodirID) {
				if h := versionOf(held.Attributes); sent < h {
					i.mu.Lock()
					i.olderIn = append(i.olderIn, fmt.Sprintf("%s %s: version %d over %d", req.Method, w.Username, sent, h))
					i.mu.Unlock()
				}
			}
		}
	}
	return i.next.RoundTrip(req)
}

// TestReconcileInterleavings is a property test of the whole reconcile: whatever commands
// land between its reads, its plan and its writes (and whatever the event path syncs
// meanwhile, with a read model that lags), no write puts an older version over a newer
// one, no user live in the directory all along is removed, and a quiet reconcile
// afterwards leaves the realm equal to the directory.
func TestReconcileInterleavings(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			ctx := t.Context()
			kc := keycloaktest.NewServer(t, keycloaktest.Config{NoSpec: true})
			kc.AddRealm(realm, clientID, secret)
			must(t, kc.SetUnmanagedAttributes(realm, true))
			cfg := ClientConfig{BaseURL: kc.URL(), Realm: realm, ClientID: clientID, ClientSecret: secret, Locks: NewLocks()}
			rng := rand.New(rand.NewPCG(seed, 11))
			dir := &liveDirectory{rng: rand.New(rand.NewPCG(seed, 13)), users: map[string]DirectoryUser{},
				touched: map[string]bool{}, lag: rng.IntN(4)}
			dir.snapshot()
			// The event path: a syncer on its own client.
			events := NewSyncer(New(cfg, nil), SyncerOptions{})
			for range 12 {
				dir.change()
			}
			initial := map[string]bool{}
			for _, u := range dir.users {
				must(t, events.UpsertUser(ctx, u))
				initial[u.ID] = true
			}
			clear(dir.touched)
			dir.onChange = func(u DirectoryUser, deleted bool) {
				if deleted {
					_ = events.DeleteUser(ctx, u.ID, u.Version, OnDeleteDelete)
				} else {
					_ = events.UpsertUser(ctx, u)
				}
			}
			il := &interleaver{next: http.DefaultTransport, kc: kc, dir: dir, rate: 0.3, rng: rand.New(rand.NewPCG(seed, 17))}
			rcfg := cfg
			rcfg.Concurrency = 2
			c := New(rcfg, &http.Client{Transport: il})
			opts := PlanOptions{PageSize: 4, Valve: &SafetyValve{MaxShare: 1}}
			p, err := NewPlan(ctx, dir, c, opts)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Apply(ctx, p, c, ApplyOptions{Check: dir}); err != nil {
				t.Fatalf("apply: %v", err)
			}
			dir.pending.Wait()
			if len(il.olderIn) > 0 {
				t.Fatalf("older over newer:\n%s\nplan:\n%s", strings.Join(il.olderIn, "\n"), p)
			}
			dir.mu.Lock()
			for _, u := range dir.users {
				if initial[u.ID] && !dir.touched[u.ID] {
					if got, ok := kc.UserByUsername(realm, u.Username); !ok || got.Attributes[AttrSsodirID][0] != u.ID {
						t.Fatalf("%s (%s) was live and unchanged throughout, and is gone from the realm; plan:\n%s", u.Username, u.ID, p)
					}
				}
			}
			dir.onChange, il.rate, dir.lag = nil, 0, 0
			dir.mu.Unlock()
			reconcileUntilQuiet(t, c, dir, opts)
			dir.mu.Lock()
			defer dir.mu.Unlock()
			managed := 0
			for _, got := range kc.Users(realm) {
				want, ok := dir.users[got.Username]
				if !ok || got.Attributes[AttrSsodirID][0] != want.ID || versionOf(got.Attributes) != want.Version || got.Enabled != want.Active {
					t.Fatalf("realm user %s %v does not match the directory's %+v", got.Username, got.Attributes, want)
				}
				managed++
			}
			if managed != len(dir.users) {
				t.Fatalf("realm has %d users, directory %d", managed, len(dir.users))
			}
		})
	}
}

// reconcileUntilQuiet applies the plan and checks that one more reconcile finds nothing.
func reconcileUntilQuiet(t *testing.T, c *Client, dir *liveDirectory, opts PlanOptions) {
	t.Helper()
	p, err := NewPlan(t.Context(), dir, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(t.Context(), p, c, ApplyOptions{Check: dir}); err != nil {
		t.Fatal(err)
	}
	if again, err := NewPlan(t.Context(), dir, c, opts); err != nil || !again.Empty() {
		t.Fatalf("a quiet reconcile is not the last: %v\n%s", err, again)
	}
}
