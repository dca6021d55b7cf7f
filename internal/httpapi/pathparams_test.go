package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/httpapi"
)

// TestPathParametersAreDecodedOnce: a handler sees every path parameter decoded exactly
// once, however the client encoded the path.
func TestPathParametersAreDecodedOnce(t *testing.T) {
	e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "test"})
	e.GET("/t/:tenant/users/:username", func(c echo.Context) error {
		return c.String(http.StatusOK, c.Param("tenant")+" "+c.Param("username"))
	})
	for _, tc := range []struct{ name, path, want string }{
		{"plain", "/t/eu/users/jdoe", "eu jdoe"},
		{"a literal @ and +", "/t/eu/users/ann+eu@example.com", "eu ann+eu@example.com"},
		{"an encoded @ and +", "/t/eu/users/ann%2Beu%40example.com", "eu ann+eu@example.com"},
		{"every parameter encoded", "/t/%65%75/users/j%C3%B6rg", "eu jörg"},
		{"a literal non-ASCII letter", "/t/eu/users/jörg", "eu jörg"},
		{"an encoded percent sign stays one", "/t/eu/users/a%2540b", "eu a%40b"},
		{"an encoded slash is part of the parameter", "/t/eu/users/a%2Fb", "eu a/b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.URL, req.RequestURI = u, u.RequestURI()
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || rec.Body.String() != tc.want {
				t.Errorf("GET %s: %d %q, want 200 %q", tc.path, rec.Code, rec.Body, tc.want)
			}
		})
	}
	t.Run("a malformed escape that reaches the router is a 400, not a 500", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL = &url.URL{Path: "/t/eu/users/a%zz", RawPath: "/t/eu/users/a%zz"}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("got %d %s, want 400", rec.Code, rec.Body)
		}
	})
}
