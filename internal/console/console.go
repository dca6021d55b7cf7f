// Package console is ssodir's web console: a dependency-free single-page application (ES
// modules, no build step) embedded in the binary and served by the query API at /console/.
// It talks only to the public HTTP APIs: the query and command APIs, and the probes and
// metrics of the projector and keycloak-sync.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

//go:embed assets
var assets embed.FS

// Path is where the console is served.
const Path = "/console/"

// DefaultReadTimeout is how long the console waits for a read when Config names no time.
const DefaultReadTimeout = 15 * time.Second

// Config is what the console learns from the server at /console/config.json: how to sign
// in with OIDC, where the command API and the operations endpoints are, and how long to
// wait for a read. The addresses come from the operator's environment and from nowhere a
// link could set; the Content-Security-Policy lets the console connect only to them.
type Config struct {
	// OIDCIssuer is SSO_OIDC_ISSUER; the console discovers its endpoints.
	OIDCIssuer string `json:"oidc_issuer,omitempty"`
	// ClientID is SSO_CONSOLE_CLIENT_ID, a public client (Authorization Code with PKCE).
	ClientID string `json:"client_id,omitempty"`
	// CommandAPI, Projector and KeycloakSync are SSO_CONSOLE_COMMAND_API,
	// SSO_CONSOLE_PROJECTOR and SSO_CONSOLE_KEYCLOAK_SYNC. When none is set (a development
	// setup) the user may type loopback addresses on the sign-in page instead.
	CommandAPI   string `json:"command_api,omitempty"`
	Projector    string `json:"projector,omitempty"`
	KeycloakSync string `json:"keycloak_sync,omitempty"`
	// ReadTimeout is SSO_CONSOLE_READ_TIMEOUT: how long a read may take before the console
	// says it had no answer and offers to try again.
	ReadTimeout time.Duration `json:"-"`
}

// configJSON is config.json: Config with the timeout in milliseconds.
type configJSON struct {
	Config
	ReadTimeoutMS int64 `json:"read_timeout_ms"`
}

// loopbackSources are what the console may connect to beyond its own origin when the
// operator named no address: services on the user's own machine, typed on the sign-in page.
const loopbackSources = "http://localhost:* http://127.0.0.1:*"

// connectSrc is the CSP connect-src of cfg: the console's own origin (the query API), the
// origins of the configured services and of the OIDC issuer (discovery and the token
// endpoint), or loopback when no service address is configured.
func (cfg Config) connectSrc() string {
	sources := []string{"'self'"}
	configured := false
	for _, a := range []string{cfg.CommandAPI, cfg.Projector, cfg.KeycloakSync} {
		if o := origin(a); o != "" {
			configured = true
			sources = append(sources, o)
		}
	}
	if o := origin(cfg.OIDCIssuer); o != "" {
		sources = append(sources, o)
	}
	if !configured {
		sources = append(sources, loopbackSources)
	}
	return strings.Join(slices.Compact(sources), " ")
}

// origin is scheme://host[:port] of an absolute URL, or "" for anything else.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// file is an asset with its validator.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Register serves the console on e. Its routes are open, like /openapi.json: the data the
// console shows needs a token like any other client.
func Register(e *echo.Echo, cfg Config) error {
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	files, err := load()
	if err != nil {
		return err
	}
	e.GET(strings.TrimSuffix(Path, "/"), func(c echo.Context) error {
		return c.Redirect(http.StatusMovedPermanently, Path)
	})
	csp := "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src " +
		cfg.connectSrc() + "; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
	e.GET(Path+"config.json", func(c echo.Context) error {
		secure(c, csp)
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, configJSON{Config: cfg, ReadTimeoutMS: cfg.ReadTimeout.Milliseconds()})
	})
	e.GET(Path+"*", func(c echo.Context) error {
		name := c.Param("*")
		if name == "" {
			name = "index.html"
		}
		f, ok := files[name]
		if !ok {
			return echo.ErrNotFound
		}
		secure(c, csp)
		h := c.Response().Header()
		h.Set("Content-Type", f.contentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.etag)
		// ServeContent answers If-None-Match with 304 and serves HEAD and ranges.
		http.ServeContent(c.Response(), c.Request(), name, time.Time{}, bytes.NewReader(f.body))
		return nil
	})
	return nil
}

// secure sets the headers that keep the console's pages from being framed, sniffed or
// leaking a URL (which may carry an authorization code) to other sites. Scripts and styles
// come only from the console itself; connections only to the configured services.
func secure(c echo.Context, csp string) {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// load reads every embedded asset once, with its content type and a strong ETag.
func load() (map[string]file, error) {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	files := map[string]file{}
	err = fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(root, p)
		if err != nil {
			return err
		}
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		sum := sha256.Sum256(body)
		files[p] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	return files, nil
}
