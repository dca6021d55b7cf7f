package keycloaksync

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

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

// Realm is one tenant's Keycloak realm with its settings.
type Realm struct {
	Tenant   dynamo.Tenant
	Client   *keycloak.Client
	Syncer   *keycloak.Syncer
	OnDelete keycloak.OnDelete
}

// Realms builds and caches a client per tenant, rebuilt when the tenant's settings change.
type Realms struct {
	tenants *dynamo.Tenants
	secrets Decrypter
	http    *http.Client
	metrics *keycloak.Metrics
	log     *zap.Logger

	mu    sync.Mutex
	cache map[string]*Realm
}

// NewRealms is the realm cache.
func NewRealms(tenants *dynamo.Tenants, secrets Decrypter, httpClient *http.Client, m *keycloak.Metrics, log *zap.Logger) *Realms {
	return &Realms{tenants: tenants, secrets: secrets, http: httpClient, metrics: m, log: log, cache: map[string]*Realm{}}
}

// Get is the tenant's realm, reading the tenant row (so settings changes apply at once).
func (r *Realms) Get(ctx context.Context, system, tenant string) (*Realm, error) {
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
	r.mu.Unlock()
	if ok && sameSettings(cached.Tenant, row) {
		cached.Tenant = row
		return cached, nil
	}
	secret, err := r.secrets.Decrypt(ctx, row.ClientSecret, "client_secret:"+key)
	if err != nil {
		return nil, fmt.Errorf("decrypt the client secret of %s: %w", key, err)
	}
	onDelete, err := keycloak.ParseOnDelete(row.OnDelete)
	if err != nil {
		return nil, err
	}
	cfg := keycloak.ClientConfig{BaseURL: row.KeycloakURL, Realm: row.KeycloakRealm, ClientID: row.ClientID,
		ClientSecret: string(secret), Logger: r.log.With(zap.String("tenant", key)), Metrics: r.metrics}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("keycloak settings of %s: %w", key, err)
	}
	c := keycloak.New(cfg, r.http)
	realm := &Realm{Tenant: row, Client: c, Syncer: keycloak.NewSyncer(c, keycloak.SyncerOptions{}), OnDelete: onDelete}
	r.mu.Lock()
	r.cache[key] = realm
	r.mu.Unlock()
	return realm, nil
}

func sameSettings(a, b dynamo.Tenant) bool {
	return a.KeycloakURL == b.KeycloakURL && a.KeycloakRealm == b.KeycloakRealm && a.ClientID == b.ClientID &&
		a.ClientSecret == b.ClientSecret && a.OnDelete == b.OnDelete
}
