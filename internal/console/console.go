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
	"path"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

//go:embed assets
var assets embed.FS

// Path is where the console is served.
const Path = "/console/"

// Config is what the console learns from the server at /console/config.json: how to sign
// in with OIDC. The addresses of the command API and of the operations endpoints are the
// browser's own settings (make run puts them into the URL it prints).
type Config struct {
	// OIDCIssuer is SSO_OIDC_ISSUER; the console discovers its endpoints.
	OIDCIssuer string `json:"oidc_issuer,omitempty"`
	// ClientID is SSO_CONSOLE_CLIENT_ID, a public client (Authorization Code with PKCE).
	ClientID string `json:"client_id,omitempty"`
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
	files, err := load()
	if err != nil {
		return err
	}
	e.GET(strings.TrimSuffix(Path, "/"), func(c echo.Context) error {
		return c.Redirect(http.StatusMovedPermanently, Path)
	})
	e.GET(Path+"config.json", func(c echo.Context) error {
		secure(c)
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, cfg)
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
		secure(c)
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
// come only from the console itself; connections go to the APIs, wherever they are.
func secure(c echo.Context) {
	h := c.Response().Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src *; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
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
