// Package auth turns a bearer token into a Principal: a JWT from the configured OIDC issuer
// (Keycloak), or the development bootstrap token.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
)

// Scopes of API.md's "Authentication" section.
const (
	ScopeWrite        = "directory:write"
	ScopeRead         = "directory:read"
	ScopeTenantsAdmin = "tenants:admin"
	// ScopeErase erases a person (POST /users/{username}/erase); no other scope implies it.
	ScopeErase = "directory:erase"
)

// AllTenants in the sso_tenants claim lets a token touch every tenant.
const AllTenants = "*"

// BootstrapSubject is the actor recorded for the development bootstrap token.
const BootstrapSubject = "bootstrap"

const (
	// discoveryTimeout bounds one fetch of the discovery document, so a hanging issuer does
	// not hold requests for longer than a client would wait.
	discoveryTimeout = 5 * time.Second
	// defaultRetryEvery is how long a failed discovery is remembered before the next request
	// tries again; it keeps a down issuer from being hit by every request.
	defaultRetryEvery = 2 * time.Second
)

// Config selects the kinds of token accepted. Either field may be empty; with both empty,
// every token is rejected.
type Config struct {
	BootstrapToken string
	OIDCIssuer     string
	OIDCAudience   string
}

// Principal is who sent a request and what they may do.
type Principal struct {
	// Subject is the JWT's sub, or BootstrapSubject; it is the actor of the commands sent.
	Subject string
	Scopes  map[string]bool
	// Tenants are "system/tenant" pairs, or AllTenants.
	Tenants   []string
	Bootstrap bool
}

// HasScope reports whether the principal was granted scope.
func (p Principal) HasScope(scope string) bool { return p.Scopes[scope] }

// AllowsTenant reports whether the principal may touch the tenant of system.
func (p Principal) AllowsTenant(system, tenant string) bool {
	return slices.Contains(p.Tenants, AllTenants) || slices.Contains(p.Tenants, system+"/"+tenant)
}

// Authenticator verifies bearer tokens. It is safe for concurrent use.
type Authenticator struct {
	bootstrapHash [sha256.Size]byte
	hasBootstrap  bool

	issuer   string
	audience string
	client   *http.Client

	// mu guards the lazily discovered verifier: the issuer may start after this process.
	mu          sync.Mutex
	verifier    *oidc.IDTokenVerifier
	lastFailure time.Time
	lastErr     error
	retryEvery  time.Duration
}

// New builds an Authenticator. With an issuer it tries discovery once, but an unreachable
// issuer does not fail start-up: discovery is retried on use, and until it succeeds tokens
// are answered with unavailable. httpClient may be nil.
func New(ctx context.Context, cfg Config, httpClient *http.Client, log *zap.Logger) (*Authenticator, error) {
	if cfg.OIDCIssuer != "" && cfg.OIDCAudience == "" {
		return nil, errors.New("auth: an OIDC audience is required with an OIDC issuer")
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 10 * time.Second}
	}
	a := &Authenticator{
		issuer:     cfg.OIDCIssuer,
		audience:   cfg.OIDCAudience,
		client:     httpClient,
		retryEvery: defaultRetryEvery,
	}
	if cfg.BootstrapToken != "" {
		a.bootstrapHash = sha256.Sum256([]byte(cfg.BootstrapToken))
		a.hasBootstrap = true
		log.Warn("development bootstrap token accepted: every request bearing it has all scopes on all tenants")
	}
	if a.issuer != "" {
		if _, err := a.discover(ctx); err != nil {
			log.Warn("OIDC issuer not reachable yet; retrying on first use",
				zap.String("issuer", a.issuer), zap.Error(err))
		}
	}
	return a, nil
}

// Authenticate verifies bearerToken. Missing, malformed, expired or foreign tokens are
// unauthenticated; a token that cannot be checked because the issuer is unreachable is
// unavailable, so clients retry instead of discarding a good token.
func (a *Authenticator) Authenticate(ctx context.Context, bearerToken string) (Principal, error) {
	if bearerToken == "" {
		return Principal{}, apperr.Unauthenticated("missing bearer token")
	}
	// Hashing first makes the comparison constant-time in the token's length too.
	if a.hasBootstrap {
		h := sha256.Sum256([]byte(bearerToken))
		if subtle.ConstantTimeCompare(h[:], a.bootstrapHash[:]) == 1 {
			return bootstrapPrincipal(), nil
		}
	}
	if a.issuer == "" {
		return Principal{}, apperr.Unauthenticated("invalid bearer token")
	}
	verifier, err := a.discover(ctx)
	if err != nil {
		return Principal{}, apperr.Unavailable(fmt.Errorf("discover OIDC issuer %s: %w", a.issuer, err), a.retryAfter())
	}

	var fetch fetchFailure
	token, err := verifier.Verify(context.WithValue(ctx, fetchFailureKey{}, &fetch), bearerToken)
	switch {
	case fetch.err != nil:
		return Principal{}, apperr.Unavailable(fmt.Errorf("fetch JWKS of %s: %w", a.issuer, fetch.err), a.retryAfter())
	case err != nil:
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return Principal{}, unauthenticated("token expired", err)
		}
		return Principal{}, unauthenticated("invalid bearer token", err)
	}
	return principalFromToken(token)
}

func (a *Authenticator) retryAfter() time.Duration {
	return max(a.retryEvery, time.Second)
}

// discover returns the verifier, fetching the discovery document if it has not been yet.
// A failure is remembered for retryEvery so that a down issuer costs one request per
// interval, not one per client request.
func (a *Authenticator) discover(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifier != nil {
		return a.verifier, nil
	}
	if a.lastErr != nil && time.Since(a.lastFailure) < a.retryEvery {
		return nil, a.lastErr
	}

	// Other requests wait for this discovery, so the caller going away must not cut it short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discoveryTimeout)
	defer cancel()
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, a.client), a.issuer)
	if err != nil {
		a.lastErr, a.lastFailure = err, time.Now()
		return nil, err
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil {
		a.lastErr, a.lastFailure = fmt.Errorf("read discovery document: %w", err), time.Now()
		return nil, a.lastErr
	}
	if doc.JWKSURI == "" {
		a.lastErr, a.lastFailure = errors.New("discovery document names no jwks_uri"), time.Now()
		return nil, a.lastErr
	}

	// The key set fetches in the background, so it gets a context that only carries the
	// client, never the cancellation of the request that happened to discover it.
	keys := oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), a.client), doc.JWKSURI)
	a.verifier = oidc.NewVerifier(a.issuer, reportingKeySet{keys}, &oidc.Config{
		ClientID:             a.audience,
		SupportedSigningAlgs: []string{oidc.RS256, oidc.ES256},
	})
	a.lastErr = nil
	return a.verifier, nil
}

type fetchFailureKey struct{}

// fetchFailure receives, for one Verify call, the error of a JWKS fetch that failed.
type fetchFailure struct{ err error }

// reportingKeySet tells a JWKS that could not be fetched apart from a bad signature.
// go-oidc flattens key set errors into text, so the distinction travels beside the error,
// through the context of the Verify call.
type reportingKeySet struct{ remote *oidc.RemoteKeySet }

func (k reportingKeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	payload, err := k.remote.VerifySignature(ctx, jwt)
	// A RemoteKeySet wraps the cause only when fetching the keys failed; a signature that
	// matches no key is a plain error.
	if err != nil && errors.Unwrap(err) != nil {
		if f, ok := ctx.Value(fetchFailureKey{}).(*fetchFailure); ok {
			f.err = err
		}
	}
	return payload, err
}

// claims are the parts of a Keycloak access token that grant rights.
type claims struct {
	Scope       string `json:"scope"`
	RealmAccess struct {
		Roles []string `json:"roles"`
	} `json:"realm_access"`
	Tenants stringList `json:"sso_tenants"`
}

// stringList accepts a single string as well as a list: a Keycloak attribute mapper that is
// not marked multivalued emits a string.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = []string{s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return err
	}
	*l = list
	return nil
}

func principalFromToken(token *oidc.IDToken) (Principal, error) {
	if token.Subject == "" {
		return Principal{}, apperr.Unauthenticated("token has no subject")
	}
	var c claims
	if err := token.Claims(&c); err != nil {
		return Principal{}, unauthenticated("token claims are malformed", err)
	}
	scopes := make(map[string]bool)
	for _, s := range strings.Fields(c.Scope) {
		scopes[s] = true
	}
	for _, r := range c.RealmAccess.Roles {
		scopes[r] = true
	}
	return Principal{Subject: token.Subject, Scopes: scopes, Tenants: c.Tenants}, nil
}

func bootstrapPrincipal() Principal {
	return Principal{
		Subject:   BootstrapSubject,
		Scopes:    map[string]bool{ScopeWrite: true, ScopeRead: true, ScopeTenantsAdmin: true, ScopeErase: true},
		Tenants:   []string{AllTenants},
		Bootstrap: true,
	}
}

// unauthenticated keeps the verifier's reason as the cause, for logs only.
func unauthenticated(msg string, cause error) *apperr.Error {
	e := apperr.Unauthenticated(msg)
	e.Err = cause
	return e
}
