package auth

import (
	"context"
	"crypto/x509"
	"slices"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/auth/authtest"
)

const testBootstrap = "dev-bootstrap-token"

func newAuthenticator(t *testing.T, cfg Config) *Authenticator {
	t.Helper()
	a, err := New(t.Context(), cfg, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestAuthenticate(t *testing.T) {
	iss := authtest.NewIssuer(t)
	a := newAuthenticator(t, Config{BootstrapToken: testBootstrap, OIDCIssuer: iss.URL, OIDCAudience: authtest.Audience})
	otherRSA := authtest.NewRSAKey(t)
	publicDER, err := x509.MarshalPKIXPublicKey(iss.RSA.Public())
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name        string
		token       string
		wantErr     apperr.Kind // checked when wantSubject is empty
		wantSubject string
		wantScopes  []string
		wantTenants []string
	}{
		{
			name:        "a valid RS256 token is accepted",
			token:       authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(nil)),
			wantSubject: "user-1",
		},
		{
			name:        "a valid ES256 token is accepted",
			token:       authtest.Sign(t, jose.ES256, iss.EC, authtest.ECKeyID, iss.Claims(nil)),
			wantSubject: "user-1",
		},
		{
			name:        "a token whose audiences include ours is accepted",
			token:       authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{"aud": []string{"account", authtest.Audience}})),
			wantSubject: "user-1",
		},
		{
			name:    "a token from another issuer is rejected",
			token:   authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{"iss": "https://evil.example.com"})),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "a token whose issuer differs only by a trailing slash is rejected",
			token:   authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{"iss": iss.URL + "/"})),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "a token for another audience is rejected",
			token:   authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{"aud": "other-api"})),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "an expired token is rejected",
			token:   authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{"exp": time.Now().Add(-time.Minute).Unix()})),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "a token signed by a key the issuer does not publish is rejected",
			token:   authtest.Sign(t, jose.RS256, otherRSA, authtest.RSAKeyID, iss.Claims(nil)),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "a token naming an unknown key id is rejected",
			token:   authtest.Sign(t, jose.RS256, otherRSA, "rsa-unknown", iss.Claims(nil)),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "an unsigned alg none token is rejected",
			token:   authtest.Unsigned(t, iss.Claims(nil)),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "an HS256 token keyed with the issuer's public key is rejected",
			token:   authtest.Sign(t, jose.HS256, publicDER, authtest.RSAKeyID, iss.Claims(nil)),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "a token without a subject is rejected",
			token:   authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{"sub": nil})),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "a token that is not a JWT is rejected",
			token:   "not-a-jwt",
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:    "an empty token is rejected",
			token:   "",
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name: "scopes come from the space separated scope claim",
			token: authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{
				"scope": "openid directory:read  directory:write"})),
			wantSubject: "user-1",
			wantScopes:  []string{ScopeRead, ScopeWrite},
		},
		{
			name: "scopes come from Keycloak's realm roles",
			token: authtest.Sign(t, jose.ES256, iss.EC, authtest.ECKeyID, iss.Claims(map[string]any{
				"realm_access": map[string]any{"roles": []string{"tenants:admin", "offline_access"}}})),
			wantSubject: "user-1",
			wantScopes:  []string{ScopeTenantsAdmin},
		},
		{
			name: "tenants come from the sso_tenants list",
			token: authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{
				"sso_tenants": []string{"acme/eu", "acme/us"}})),
			wantSubject: "user-1",
			wantTenants: []string{"acme/eu", "acme/us"},
		},
		{
			name: "a single-valued sso_tenants claim is read as a list of one",
			token: authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{
				"sso_tenants": "acme/eu"})),
			wantSubject: "user-1",
			wantTenants: []string{"acme/eu"},
		},
		{
			name: "malformed rights claims are rejected",
			token: authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(map[string]any{
				"sso_tenants": 42})),
			wantErr: apperr.KindUnauthenticated,
		},
		{
			name:        "the bootstrap token is accepted with every scope and every tenant",
			token:       testBootstrap,
			wantSubject: BootstrapSubject,
			wantScopes:  []string{ScopeRead, ScopeWrite, ScopeTenantsAdmin},
			wantTenants: []string{AllTenants},
		},
		{
			name:    "a token that differs from the bootstrap token is rejected",
			token:   testBootstrap + "x",
			wantErr: apperr.KindUnauthenticated,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := a.Authenticate(t.Context(), tt.token)
			if tt.wantSubject == "" {
				if got := apperr.KindOf(err); err == nil || got != tt.wantErr {
					t.Fatalf("Authenticate: got principal %+v, error %v; want kind %v", p, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if p.Subject != tt.wantSubject {
				t.Errorf("subject = %q, want %q", p.Subject, tt.wantSubject)
			}
			for _, s := range tt.wantScopes {
				if !p.HasScope(s) {
					t.Errorf("scope %q missing from %v", s, p.Scopes)
				}
			}
			if tt.wantTenants != nil && !slices.Equal(p.Tenants, tt.wantTenants) {
				t.Errorf("tenants = %v, want %v", p.Tenants, tt.wantTenants)
			}
			if p.Bootstrap != (tt.token == testBootstrap) {
				t.Errorf("bootstrap = %v", p.Bootstrap)
			}
		})
	}
}

func TestAuthenticateWithoutIssuer(t *testing.T) {
	iss := authtest.NewIssuer(t)
	token := authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(nil))

	a := newAuthenticator(t, Config{BootstrapToken: testBootstrap})
	if _, err := a.Authenticate(t.Context(), token); apperr.KindOf(err) != apperr.KindUnauthenticated {
		t.Errorf("JWT without a configured issuer: got %v, want unauthenticated", err)
	}
	none := newAuthenticator(t, Config{})
	if _, err := none.Authenticate(t.Context(), testBootstrap); apperr.KindOf(err) != apperr.KindUnauthenticated {
		t.Errorf("bootstrap token while it is off: got %v, want unauthenticated", err)
	}
}

func TestAuthenticateIssuerUnreachable(t *testing.T) {
	t.Run("an issuer that is down answers unavailable, not unauthenticated", func(t *testing.T) {
		iss := authtest.NewIssuer(t)
		token := authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(nil))
		iss.Close()

		a := newAuthenticator(t, Config{OIDCIssuer: iss.URL, OIDCAudience: authtest.Audience})
		_, err := a.Authenticate(t.Context(), token)
		e, ok := apperr.As(err)
		if !ok || e.Kind != apperr.KindUnavailable {
			t.Fatalf("got %v, want unavailable", err)
		}
		if e.RetryAfter < time.Second {
			t.Errorf("RetryAfter = %v, want at least a second", e.RetryAfter)
		}
	})

	t.Run("an issuer that comes up after start is discovered on use", func(t *testing.T) {
		iss := authtest.NewIssuer(t)
		iss.Down.Store(true)
		a := newAuthenticator(t, Config{OIDCIssuer: iss.URL, OIDCAudience: authtest.Audience})
		a.retryEvery = 0
		token := authtest.Sign(t, jose.ES256, iss.EC, authtest.ECKeyID, iss.Claims(nil))

		if _, err := a.Authenticate(t.Context(), token); apperr.KindOf(err) != apperr.KindUnavailable {
			t.Fatalf("while down: got %v, want unavailable", err)
		}
		iss.Down.Store(false)
		if _, err := a.Authenticate(t.Context(), token); err != nil {
			t.Fatalf("once up: %v", err)
		}
	})

	t.Run("a JWKS that cannot be fetched answers unavailable", func(t *testing.T) {
		iss := authtest.NewIssuer(t)
		iss.JWKSDown.Store(true)
		a := newAuthenticator(t, Config{OIDCIssuer: iss.URL, OIDCAudience: authtest.Audience})
		token := authtest.Sign(t, jose.RS256, iss.RSA, authtest.RSAKeyID, iss.Claims(nil))

		if _, err := a.Authenticate(t.Context(), token); apperr.KindOf(err) != apperr.KindUnavailable {
			t.Fatalf("got %v, want unavailable", err)
		}
		iss.JWKSDown.Store(false)
		// go-oidc hands a failed fetch's result to callers that arrive while it clears
		// the fetch, so a call right after the recovery may still see the old error.
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			_, err := a.Authenticate(t.Context(), token)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("once the JWKS is back: %v", err)
			}
		}
	})
}

func TestNew(t *testing.T) {
	t.Run("the bootstrap token is announced with a warning at start", func(t *testing.T) {
		core, logs := observer.New(zapcore.WarnLevel)
		if _, err := New(t.Context(), Config{BootstrapToken: testBootstrap}, nil, zap.New(core)); err != nil {
			t.Fatal(err)
		}
		entries := logs.All()
		if len(entries) != 1 {
			t.Fatalf("got %d warnings, want 1", len(entries))
		}
		for _, f := range entries[0].Context {
			if f.String == testBootstrap {
				t.Errorf("the warning logs the token itself in field %q", f.Key)
			}
		}
	})

	t.Run("an issuer without an audience is a configuration error", func(t *testing.T) {
		if _, err := New(context.Background(), Config{OIDCIssuer: "https://issuer.example.com"}, nil, zap.NewNop()); err == nil {
			t.Fatal("New accepted an issuer without an audience")
		}
	})
}

func TestPrincipal(t *testing.T) {
	tests := []struct {
		name           string
		tenants        []string
		system, tenant string
		want           bool
	}{
		{"a listed tenant is allowed", []string{"acme/eu"}, "acme", "eu", true},
		{"an unlisted tenant of the same system is refused", []string{"acme/eu"}, "acme", "us", false},
		{"the same tenant id in another system is refused", []string{"acme/eu"}, "other", "eu", false},
		{"the wildcard allows every tenant", []string{"acme/eu", AllTenants}, "other", "x", true},
		{"no tenants allow nothing", nil, "acme", "eu", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Principal{Subject: "s", Tenants: tt.tenants}
			if got := p.AllowsTenant(tt.system, tt.tenant); got != tt.want {
				t.Errorf("AllowsTenant(%q, %q) = %v, want %v", tt.system, tt.tenant, got, tt.want)
			}
		})
	}
	if (Principal{}).HasScope(ScopeRead) {
		t.Error("the zero principal has a scope")
	}
}
