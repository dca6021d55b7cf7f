package console_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/console"
	"github.com/ssodir/ssodir/internal/httpapi"
)

func serve(t *testing.T, cfg console.Config) *httptest.Server {
	t.Helper()
	e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
	if err := console.Register(e, cfg); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestServesTheEmbeddedConsole(t *testing.T) {
	srv := serve(t, console.Config{})
	cases := []struct {
		name, path, contentType, contains string
	}{
		{"the page at /console/", "/console/", "text/html", `<script type="module" src="app.js">`},
		{"its module", "/console/app.js", "text/javascript", "function render()"},
		{"its style sheet", "/console/style.css", "text/css", ":focus-visible"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := get(t, srv.URL+c.path)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), c.contentType) || !strings.Contains(body, c.contains) {
				t.Fatalf("%s: %d %s, body has %q: %v", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), c.contains, strings.Contains(body, c.contains))
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("Content-Security-Policy: %q", csp)
			}
			if resp.Header.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("Referrer-Policy: %q", resp.Header.Get("Referrer-Policy"))
			}
			etag := resp.Header.Get("ETag")
			again, _ := get(t, srv.URL+c.path, "If-None-Match", etag)
			if etag == "" || again.StatusCode != http.StatusNotModified {
				t.Errorf("revalidation with ETag %q: %d", etag, again.StatusCode)
			}
		})
	}
}

func TestConsoleWithoutSlashRedirects(t *testing.T) {
	srv := serve(t, console.Config{})
	resp, _ := get(t, srv.URL+"/console")
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/console/" {
		t.Fatalf("%d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func TestUnknownAssetIsAProblem404(t *testing.T) {
	srv := serve(t, console.Config{})
	for _, p := range []string{"/console/nope.js", "/console/../go.mod", "/console/assets/app.js"} {
		resp, body := get(t, srv.URL+p)
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != httpapi.MIMEProblemJSON || !strings.Contains(body, `"not_found"`) {
			t.Errorf("%s: %d %s %s", p, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}

func TestConfigNamesTheIssuerClientAndAddresses(t *testing.T) {
	cases := []struct {
		name string
		cfg  console.Config
		want map[string]any
	}{
		{"dev token only", console.Config{}, map[string]any{"read_timeout_ms": 15000.0}},
		{"OIDC", console.Config{OIDCIssuer: "https://kc/realms/x", ClientID: "ssodir-console"},
			map[string]any{"oidc_issuer": "https://kc/realms/x", "client_id": "ssodir-console", "read_timeout_ms": 15000.0}},
		{"the operator's addresses and read timeout", console.Config{CommandAPI: "https://dir.example.com:8080", Projector: "https://ops.example.com/projector",
			KeycloakSync: "https://ops.example.com/sync", ReadTimeout: 3 * time.Second},
			map[string]any{"command_api": "https://dir.example.com:8080", "projector": "https://ops.example.com/projector",
				"keycloak_sync": "https://ops.example.com/sync", "read_timeout_ms": 3000.0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := get(t, serve(t, c.cfg).URL+"/console/config.json")
			var got map[string]any
			if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("config %v, want %v", got, c.want)
			}
			if resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q", resp.Header.Get("Cache-Control"))
			}
		})
	}
}

// connectSrc is the connect-src directive of a page's Content-Security-Policy.
func connectSrc(t *testing.T, resp *http.Response) string {
	t.Helper()
	for _, d := range strings.Split(resp.Header.Get("Content-Security-Policy"), ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(d), "connect-src "); ok {
			return v
		}
	}
	t.Fatalf("no connect-src in %q", resp.Header.Get("Content-Security-Policy"))
	return ""
}

func TestConnectSrcNamesTheConfiguredOrigins(t *testing.T) {
	cases := []struct {
		name string
		cfg  console.Config
		want string
	}{
		{"the operator's services and the issuer, nothing else",
			console.Config{CommandAPI: "https://dir.example.com:8080", Projector: "https://ops.example.com/projector",
				KeycloakSync: "https://ops.example.com/sync", OIDCIssuer: "https://sso.example.com/realms/staff", ClientID: "c"},
			"'self' https://dir.example.com:8080 https://ops.example.com https://sso.example.com"},
		{"one configured service is a production setup: no loopback",
			console.Config{CommandAPI: "https://dir.example.com"}, "'self' https://dir.example.com"},
		{"no address configured: the console itself and loopback, for addresses typed on the sign-in page",
			console.Config{}, "'self' http://localhost:* http://127.0.0.1:*"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := serve(t, c.cfg)
			for _, p := range []string{"/console/", "/console/app.js", "/console/config.json"} {
				resp, _ := get(t, srv.URL+p)
				if got := connectSrc(t, resp); got != c.want {
					t.Errorf("%s: connect-src %q, want %q", p, got, c.want)
				}
			}
		})
	}
}
