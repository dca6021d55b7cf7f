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
	"github.com/ssodir/ssodir/test/apitest"
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

	// lifetime is how long its access tokens are valid (an hour unless a test shortens it).
	lifetime time.Duration

	mu        sync.Mutex
	grants    map[string]grant
	exchanged int
	refused   []string
	// refreshTokens are the refresh tokens not used yet: each is good for one refresh
	// (rotation, as Keycloak can be set to do), and the answer carries the next one.
	refreshTokens map[string]bool
	refreshed     int
	// issued are the access tokens handed out, oldest first.
	issued []string
}

type grant struct{ challenge, redirectURI string }

func newAuthServer(t *testing.T, clientID string, tenants []string) *authServer {
	a := &authServer{clientID: clientID, key: authtest.NewRSAKey(t), tenants: tenants, t: t, grants: map[string]grant{},
		lifetime: time.Hour, refreshTokens: map[string]bool{}}
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
// S256 hash is the challenge; or a refresh token once, for the same client.
func (a *authServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		a.refuse(w, "not a form")
		return
	}
	f := r.PostForm
	if f.Get("grant_type") == "refresh_token" {
		a.mu.Lock()
		ok := a.refreshTokens[f.Get("refresh_token")]
		delete(a.refreshTokens, f.Get("refresh_token"))
		a.mu.Unlock()
		if !ok || f.Get("client_id") != a.clientID {
			a.refuse(w, "unknown or used refresh token, or another client")
			return
		}
		a.mu.Lock()
		a.refreshed++
		a.mu.Unlock()
		a.issue(w)
		return
	}
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
	a.mu.Lock()
	a.exchanged++
	a.mu.Unlock()
	a.issue(w)
}

// issue answers a new access token, valid for the server's lifetime, and a refresh token.
func (a *authServer) issue(w http.ResponseWriter) {
	now := time.Now()
	access := authtest.Sign(a.t, jose.RS256, a.key, authtest.RSAKeyID, map[string]any{
		"iss": a.URL, "aud": authtest.Audience, "sub": "f3c1-alice", "preferred_username": "alice",
		"scope": "openid directory:read directory:write", "sso_tenants": a.tenants,
		"iat": now.Unix(), "exp": now.Add(a.lifetime).Unix(), "jti": rand.Text(),
	})
	refresh := rand.Text()
	a.mu.Lock()
	a.refreshTokens[refresh] = true
	a.issued = append(a.issued, access)
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"access_token": access, "token_type": "Bearer",
		"expires_in": int(a.lifetime / time.Second), "refresh_token": refresh})
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

// An OIDC session renews itself with its refresh token before its access token expires:
// the console keeps working past the first token's life, on tokens the issuer renewed.
func TestOIDCSessionRenewsBeforeItsTokenExpires(t *testing.T) {
	auth := newAuthServer(t, "ssodir-console", []string{"demo/acme"})
	auth.lifetime = 8 * time.Second
	in := newInstall(t, "SSO_OIDC_ISSUER="+auth.URL, "SSO_OIDC_AUDIENCE="+authtest.Audience, "SSO_CONSOLE_CLIENT_ID=ssodir-console")
	in.start("command-api")
	in.start("projector")
	in.start("query-api")
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants", map[string]any{"tenant_id": "acme"})
	mustCall(t, 201, "POST", in.url("command-api")+"/v1/systems/demo/tenants/acme/users",
		map[string]any{"username": "asmith", "email": "asmith@example.com", "first_name": "Ann", "last_name": "Smith"})
	waitProjected(t, in, "/users", 1)

	b := newBrowser(t)
	a := b.ctx
	b.run(a, "sign in with SSO and open the tenant",
		chromedp.Navigate(in.url("query-api")+"/console/"), waitFor("#sso"), click("#sso"),
		eventually(`location.hash === "#/tenants" && !!document.querySelector(".tenants button")`),
		click(".tenants button"), waitText("#users tbody", "asmith"))
	auth.mu.Lock()
	first := auth.issued[0]
	auth.mu.Unlock()

	// Two renewals take longer than the first token's life.
	deadline := time.Now().Add(60 * time.Second)
	for {
		auth.mu.Lock()
		n, refused := auth.refreshed, auth.refused
		auth.mu.Unlock()
		if len(refused) > 0 {
			t.Fatalf("the issuer refused: %v", refused)
		}
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d refreshes within a minute of 8-second tokens, want 2", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, _, _ := apitest.Call(t, first, "GET", in.url("query-api")+"/v1/systems/demo/tenants/acme/users", nil); status != http.StatusUnauthorized {
		t.Fatalf("the first token, past its expiry, was answered %d: the test proves nothing", status)
	}
	b.run(a, "past the first token's life the console reads with a renewed one, still signed in",
		goHash("#/t/demo/acme/groups"), waitText("#groups tbody", "No groups yet"),
		goHash("#/t/demo/acme/users"), waitText("#users tbody", "asmith"), waitText("#who", "alice"))
	auth.mu.Lock()
	latest := auth.issued[len(auth.issued)-1]
	auth.mu.Unlock()
	got, err := chromedp.Run(a, chromedp.Evaluate[string](`JSON.parse(sessionStorage.getItem("ssodir.session")).token`))
	if err != nil || got == first || got != latest {
		t.Fatalf("the session holds the first token or not the newest (%v)", err)
	}
	b.noErrors()
}
