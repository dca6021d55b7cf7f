package keycloaksync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/keycloak"
)

// Decrypter opens secrets bound to a context string.
type Decrypter interface {
	Decrypt(ctx context.Context, ciphertext string, aad string) ([]byte, error)
}

// ErrNoKeycloak reports a tenant without Keycloak settings: nothing to sync.
var ErrNoKeycloak = errors.New("tenant has no Keycloak settings")

// Realm is one tenant's Keycloak realm with its settings. Client serves full reconciles
// (Keycloak's default timeouts: a page of a large realm may take seconds); Syncer serves
// the event path, whose client gives up on a request after eventRequestTimeout so that a
// hung realm is noticed, and its tenant parked, within one record's deadline.
type Realm struct {
	Tenant   dynamo.Tenant
	Client   *keycloak.Client
	Syncer   *keycloak.Syncer
	OnDelete keycloak.OnDelete

	readAt time.Time
}

const (
	// eventRequestTimeout bounds an event-path request; a Keycloak answer to one user or
	// group operation takes milliseconds. The event path makes one attempt: a failure
	// parks the tenant for a second or more (Health), which is the retry, and keeps a
	// hung realm from holding delivery slots through attempt after attempt.
	eventRequestTimeout = 3 * time.Second
	eventMaxAttempts    = 1
	// settingsMaxAge is how long a tenant's Keycloak settings are used before the tenant
	// row is read again: settings changes take effect within it, and a busy tenant costs
	// one read of its row per settingsMaxAge rather than one per record.
	settingsMaxAge = 10 * time.Second
)

// NewHTTPClient is the one HTTP client every realm's Keycloak client shares: one pool of
// connections, sized for many Keycloak hosts and a few requests in flight to each, with
// no overall timeout (each request is bounded by its Keycloak client's RequestTimeout).
func NewHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4096
	tr.MaxIdleConnsPerHost = 32
	tr.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: tr}
}

// Realms builds and caches a client per tenant, rebuilt when the tenant's settings change.
type Realms struct {
	tenants *dynamo.Tenants
	secrets Decrypter
	http    *http.Client
	metrics *keycloak.Metrics
	log     *zap.Logger
	now     func() time.Time

	// eventTimeout bounds an event-path request (eventRequestTimeout).
	eventTimeout time.Duration

	mu    sync.Mutex
	cache map[string]*Realm
}

// NewRealms is the realm cache; httpClient is shared by every realm (NewHTTPClient).
func NewRealms(tenants *dynamo.Tenants, secrets Decrypter, httpClient *http.Client, m *keycloak.Metrics, log *zap.Logger) *Realms {
	return &Realms{tenants: tenants, secrets: secrets, http: httpClient, metrics: m, log: log, now: time.Now,
		eventTimeout: eventRequestTimeout, cache: map[string]*Realm{}}
}

// WithEventRequestTimeout sets how long an event-path request waits for its realm (a test
// that must tell "held by a hung realm" from "timed out" makes it long); realms already
// cached keep theirs.
func (r *Realms) WithEventRequestTimeout(d time.Duration) *Realms {
	if d > 0 {
		r.eventTimeout = d
	}
	return r
}

// Get is the tenant's realm, with settings at most settingsMaxAge old.
func (r *Realms) Get(ctx context.Context, system, tenant string) (*Realm, error) {
	r.mu.Lock()
	cached, ok := r.cache[system+"/"+tenant]
	r.mu.Unlock()
	if ok && r.now().Sub(cached.readAt) < settingsMaxAge {
		return cached, nil
	}
	row, err := r.tenants.Get(ctx, system, tenant)
	if err != nil {
		return nil, err
	}
	return r.For(ctx, row)
}

// For is the realm of a tenant row already read.
func (r *Realms) For(ctx context.Context, row dynamo.Tenant) (*Realm, error) {
	if row.KeycloakURL == "" {
		return nil, ErrNoKeycloak
	}
	key := row.SystemID + "/" + row.TenantID
	r.mu.Lock()
	cached, ok := r.cache[key]
	if ok && sameSettings(cached.Tenant, row) {
		fresh := *cached
		fresh.Tenant, fresh.readAt = row, r.now()
		r.cache[key] = &fresh
		r.mu.Unlock()
		return &fresh, nil
	}
	r.mu.Unlock()
	secret, err := r.secrets.Decrypt(ctx, row.ClientSecret, "client_secret:"+key)
	if err != nil {
		return nil, fmt.Errorf("decrypt the client secret of %s: %w", key, err)
	}
	onDelete, err := keycloak.ParseOnDelete(row.OnDelete)
	if err != nil {
		return nil, err
	}
	// Both clients of a realm share the object locks, so that the event path and a
	// reconcile never interleave their reads and writes of one user or group.
	cfg := keycloak.ClientConfig{BaseURL: row.KeycloakURL, Realm: row.KeycloakRealm, ClientID: row.ClientID,
		ClientSecret: string(secret), Locks: keycloak.NewLocks(), Logger: r.log.With(zap.String("tenant", key)), Metrics: r.metrics}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("keycloak settings of %s: %w", key, err)
	}
	events := cfg
	events.RequestTimeout, events.MaxAttempts = r.eventTimeout, eventMaxAttempts
	realm := &Realm{Tenant: row, Client: keycloak.New(cfg, r.http),
		Syncer:   keycloak.NewSyncer(keycloak.New(events, r.http), keycloak.SyncerOptions{}),
		OnDelete: onDelete, readAt: r.now()}
	r.mu.Lock()
	r.cache[key] = realm
	r.mu.Unlock()
	return realm, nil
}

func sameSettings(a, b dynamo.Tenant) bool {
	return a.KeycloakURL == b.KeycloakURL && a.KeycloakRealm == b.KeycloakRealm && a.ClientID == b.ClientID &&
		a.ClientSecret == b.ClientSecret && a.OnDelete == b.OnDelete
}
