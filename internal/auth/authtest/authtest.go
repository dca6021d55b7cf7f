// Package authtest runs a real OIDC issuer on a local port for tests: a discovery document
// and a JWKS with one RSA and one EC P-256 key, and helpers to sign tokens with them.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Audience is the audience of the tokens Token signs.
const Audience = "ssodir"

// Key ids under which the issuer publishes its keys.
const (
	RSAKeyID = "rsa-1"
	ECKeyID  = "ec-1"
)

// Issuer is an OIDC issuer served by httptest.
type Issuer struct {
	URL string
	RSA *rsa.PrivateKey
	EC  *ecdsa.PrivateKey
	// Down makes every endpoint answer 503, as an issuer that is still starting.
	Down atomic.Bool
	// JWKSDown fails only the JWKS, as an issuer that went away after discovery.
	JWKSDown atomic.Bool

	srv *httptest.Server
}

// NewIssuer starts an issuer that stops when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{RSA: NewRSAKey(t)}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss.EC = ec

	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		if iss.Down.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, map[string]any{
			"issuer":                                iss.URL,
			"jwks_uri":                              iss.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		if iss.Down.Load() || iss.JWKSDown.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
			{Key: iss.RSA.Public(), KeyID: RSAKeyID, Algorithm: "RS256", Use: "sig"},
			{Key: iss.EC.Public(), KeyID: ECKeyID, Algorithm: "ES256", Use: "sig"},
		}})
	})
	// The URL is known before the server serves: its handlers read it, also for requests
	// from other processes, which the race detector cannot see come after this write.
	iss.srv = httptest.NewUnstartedServer(mux)
	iss.URL = "http://" + iss.srv.Listener.Addr().String()
	iss.srv.Start()
	t.Cleanup(iss.srv.Close)
	return iss
}

// Close stops the issuer, as one that is unreachable.
func (iss *Issuer) Close() { iss.srv.Close() }

// Claims are valid claims of this issuer for Audience, subject "user-1", with overrides
// applied; a nil override removes the claim.
func (iss *Issuer) Claims(overrides map[string]any) map[string]any {
	c := map[string]any{
		"iss": iss.URL,
		"aud": Audience,
		"sub": "user-1",
		"iat": time.Now().Unix(),
		"exp": time.Now().Add(time.Hour).Unix(),
	}
	for k, v := range overrides {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// Token is a valid RS256 token with Claims(overrides).
func (iss *Issuer) Token(t testing.TB, overrides map[string]any) string {
	t.Helper()
	return Sign(t, jose.RS256, iss.RSA, RSAKeyID, iss.Claims(overrides))
}

// Sign signs claims as a compact JWT with key under kid.
func Sign(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// Unsigned is an alg "none" token, which go-jose refuses to sign.
func Unsigned(t testing.TB, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
}

// NewRSAKey is a fresh 2048-bit key, for tokens signed by someone else.
func NewRSAKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
