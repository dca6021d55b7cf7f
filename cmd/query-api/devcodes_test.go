package main

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// post sends POST path with the bearer token (none when empty) and a JSON body (none when
// empty).
func (a *app) post(t *testing.T, token, path, body string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, a.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}

func TestConsoleSignInCodes(t *testing.T) {
	a := startApp(t, options{oidc: true})

	mint := func(t *testing.T) string {
		t.Helper()
		r := a.post(t, bootstrap, "/console/dev-codes", "")
		var m struct {
			Code      string `json:"code"`
			ExpiresAt string `json:"expires_at"`
		}
		r.json(t, &m)
		expires, err := time.Parse(time.RFC3339, m.ExpiresAt)
		if r.status != http.StatusCreated || m.Code == "" || err != nil || time.Until(expires) > time.Minute || time.Until(expires) < 30*time.Second {
			t.Fatalf("mint: %d %s (%v)", r.status, r.body, err)
		}
		if r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("mint Cache-Control %q", r.header.Get("Cache-Control"))
		}
		return m.Code
	}
	redeemRefused := func(t *testing.T, body string) {
		t.Helper()
		r := a.post(t, "", "/console/dev-codes/redeem", body)
		if code, fields := r.problem(t); r.status != http.StatusBadRequest || code != "validation_failed" || !slices.Equal(fields, []string{"code"}) {
			t.Fatalf("redeem %s: %d %s, want 400 on code", body, r.status, r.body)
		}
	}

	t.Run("a code minted with the development token redeems once for it, without a token", func(t *testing.T) {
		code := mint(t)
		r := a.post(t, "", "/console/dev-codes/redeem", `{"code":"`+code+`"}`)
		var got struct{ Token, Subject string }
		r.json(t, &got)
		if r.status != http.StatusOK || got.Token != bootstrap || got.Subject != "bootstrap" || r.header.Get("Cache-Control") != "no-store" {
			t.Fatalf("redeem: %d %s Cache-Control %q", r.status, r.body, r.header.Get("Cache-Control"))
		}
		redeemRefused(t, `{"code":"`+code+`"}`)
	})
	t.Run("an unknown code is refused", func(t *testing.T) {
		redeemRefused(t, `{"code":"AAAAAAAAAAAAAAAAAAAAAAAAAA"}`)
		redeemRefused(t, `{"code":""}`)
	})
	t.Run("a malformed exchange is a 4xx that redeems nothing", func(t *testing.T) {
		code := mint(t)
		for _, body := range []string{`{"code":"` + code + `","token":"x"}`, `["` + code + `"]`, `{"code":`} {
			if r := a.post(t, "", "/console/dev-codes/redeem", body); r.status != http.StatusBadRequest {
				t.Errorf("redeem %s: %d %s, want 400", body, r.status, r.body)
			}
		}
		if r := a.post(t, "", "/console/dev-codes/redeem", ""); r.status != http.StatusUnsupportedMediaType {
			t.Errorf("redeem without a body: %d %s, want 415", r.status, r.body)
		}
		if r := a.post(t, "", "/console/dev-codes/redeem", `{"code":"`+code+`"}`); r.status != http.StatusOK {
			t.Errorf("the code after refused attempts: %d %s", r.status, r.body)
		}
	})
	t.Run("only the development token mints", func(t *testing.T) {
		if r := a.post(t, "", "/console/dev-codes", ""); r.status != http.StatusUnauthorized {
			t.Errorf("mint without a token: %d %s", r.status, r.body)
		}
		jwt := a.iss.token(t, "alice", "directory:read directory:write tenants:admin", "*")
		if r := a.post(t, jwt, "/console/dev-codes", ""); r.status != http.StatusForbidden {
			t.Errorf("mint with a JWT of every scope: %d %s", r.status, r.body)
		}
	})
}

func TestNoConsoleSignInCodesWithoutTheDevelopmentToken(t *testing.T) {
	a := startApp(t, options{oidc: true, env: map[string]string{"SSO_BOOTSTRAP_TOKEN": ""}})
	jwt := a.iss.token(t, "alice", "directory:read", "*")
	// Below /console/ only the console's files are served, by GET.
	for _, path := range []string{"/console/dev-codes", "/console/dev-codes/redeem"} {
		if r := a.post(t, jwt, path, `{"code":"x"}`); r.status != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %d %s, want 405", path, r.status, r.body)
		}
	}
}
