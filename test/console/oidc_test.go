package console

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-jose/go-jose/v4"

	"github.com/ssodir/ssodir/internal/auth/authtest"
)

// authServer is a small OIDC provider for the console's sign-in: discovery, JWKS, and the
// Authorization Code flow for one public client, which must prove its PKCE verifier (S256).
// Tokens are signed as authtest signs them.
type authServer struct {
	URL      string
	clientID string
	key      *rsa.PrivateKey
	tenants  []string
	t        *testing.T

	mu        sync.Mutex
	grants    map[string]grant
	exchanged int
	refused   []string
}

type grant struct{ challenge, redirectURI string }

func newAuthServer(t *testing.T, clientID string, tenants []string) *authServer {
	a := &authServer{clientID: clientID, key: authtest.NewRSAKey(t), tenants: tenants, t: t, grants: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer": a.URL, "authorization_endpoint": a.URL + "/authorize", "token_endpoint": a.URL + "/token",
			"jwks_uri": a.URL + "/keys", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported": []string{"S256"}, "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: a.key.Public(), KeyID: authtest.RSAKeyID, Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	srv := httptest.NewUnstartedServer(mux)
	// The handlers read URL: set it before the server runs.
	a.URL = "http://" + srv.Listener.Addr().String()
	srv.Start()
	t.Cleanup(srv.Close)
	return a
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	// The console calls discovery and the token endpoint from the browser, as Keycloak allows
	// for a client's web origins.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (a *authServer) refuse(w http.ResponseWriter, why string) {
	a.mu.Lock()
	a.refused = append(a.refused, why)
	a.mu.Unlock()
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": why})
}

// authorize signs the user in at once (no login form) and sends the browser back with a code.
func (a *authServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case q.Get("response_type") != "code":
		a.refuse(w, "response_type must be code")
		return
	case q.Get("client_id") != a.clientID:
		a.refuse(w, "unknown client "+q.Get("client_id"))
		return
	case q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43:
		a.refuse(w, "PKCE with S256 is required")
		return
	case q.Get("state") == "" || !strings.Contains(q.Get("scope"), "openid"):
		a.refuse(w, "state and the openid scope are required")
		return
	}
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || redirect.Path != "/console/" {
		a.refuse(w, "redirect_uri must be the console's page")
		return
	}
	code := rand.Text()
	a.mu.Lock()
	a.grants[code] = grant{challenge: q.Get("code_challenge"), redirectURI: q.Get("redirect_uri")}
	a.mu.Unlock()
	redirect.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token exchanges a code once, for the client that asked for it, with the verifier whose
// S256 hash is the challenge.
func (a *authServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		a.refuse(w, "not a form")
		return
	}
	f := r.PostForm
	a.mu.Lock()
	g, ok := a.grants[f.Get("code")]
	delete(a.grants, f.Get("code"))
	a.mu.Unlock()
	sum := sha256.Sum256([]byte(f.Get("code_verifier")))
	switch {
	case f.Get("grant_type") != "authorization_code" || !ok:
		a.refuse(w, "unknown or used code")
		return
	case f.Get("client_id") != a.clientID || f.Get("redirect_uri") != g.redirectURI:
		a.refuse(w, "client or redirect_uri differ from the authorization request")
		return
	case base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge:
		a.refuse(w, "code_verifier does not match the code_challenge")
		return
	}
	now := time.Now()
	access := authtest.Sign(a.t, jose.RS256, a.key, authtest.RSAKeyID, map[string]any{
		"iss": a.URL, "aud": authtest.Audience, "sub": "f3c1-alice", "preferred_username": "alice",
		"scope": "openid directory:read directory:write", "sso_tenants": a.tenants,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	a.mu.Lock()
	a.exchanged++
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 3600})
}

// eventually evaluates js until it is true, across the navigations of a sign-in (an
// evaluation whose page goes away fails; the next one runs in the new page).
func eventually(js string) action {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			ok, err := chromedp.Evaluate[bool](js)(ctx, t)
			if err == nil && ok {
				return chromedp.Void{}, nil
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

func TestSignInWithOIDCAuthorizationCodeAndPKCE(t *testing.T) {
	auth := newAuthServer(t, "ssodir-console", []string{"demo/acme", "demo/beta"})
	in := newInstall(t, "SSO_OIDC_ISSUER="+auth.URL, "SSO_OIDC_AUDIENCE="+authtest.Audience, "SSO_CONSOLE_CLIENT_ID=ssodir-console")
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	for _, tenant := range []string{"acme", "beta", "gamma"} {
		mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants", map[string]any{"tenant_id": tenant})
	}
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants/acme/users",
		map[string]any{"username": "asmith", "email": "asmith@example.com", "first_name": "Ann", "last_name": "Smith"})
	waitProjected(t, in, "/users", 1)

	b := newBrowser(t)
	a := b.ctx
	b.run(a, "the sign-in page offers single sign-on",
		chromedp.Navigate(in.url("query-api")+"/console/"), waitText("main", "Signs in at "+auth.URL), waitFor("#sso"))
	b.run(a, "sign in at the issuer and come back with a token",
		click("#sso"),
		eventually(`location.search === "" && location.hash === "#/tenants" && !!document.querySelector(".tenants")`))
	auth.mu.Lock()
	exchanged, refused := auth.exchanged, auth.refused
	auth.mu.Unlock()
	if exchanged != 1 || len(refused) > 0 {
		t.Fatalf("token exchanges %d, refused %v", exchanged, refused)
	}
	b.run(a, "the tenant picker offers exactly the token's tenants",
		waitText(".tenants", "demo/acme"), waitText(".tenants", "demo/beta"), waitNoText(".tenants", "gamma"),
		poll(`!document.querySelector("#tenant-form")`), waitText("#who", "alice"))
	b.run(a, "the query API accepts the console's token",
		click(`.tenants button:first-child`),
		waitText("#users tbody", "asmith"), waitText("#who", "demo/acme"))
	b.run(a, "a tenant outside the token is not offered",
		goHash("#/t/demo/gamma/users"), waitText("main", "Your sign-in does not cover tenant demo/gamma"))
	b.noErrors()
}
