package httpapi_test

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/httpapi"
)

// FuzzDecodeJSON checks that no body and no Content-Type make DecodeJSON panic or fail
// with anything but a client error.
func FuzzDecodeJSON(f *testing.F) {
	for _, seed := range []struct{ contentType, body string }{
		{"application/json", `{"name":"x","age":3,"tags":["a"],"nested":{"flag":true}}`},
		{"application/json; charset=utf-8", `{"name":"x"}`},
		{"application/json", `{"nickname":"y"}`},
		{"application/json", `{"age":"three"}`},
		{"application/json", `{"age":1e400}`},
		{"application/json", `{"nested":{"flag":null}}`},
		{"application/json", `{"name":"x"} trailing`},
		{"application/json", `null`},
		{"application/json", `[]`},
		{"application/json", ``},
		{"application/json", `{"name":"\ud800"}`},
		{"application/json", strings.Repeat(`{"nested":`, 20000)},
		{"application/json", "{\"name\":\"\xff\"}"},
		{"text/plain", `{}`},
		{"application/json; charset=", `{}`},
		{";;;", `{}`},
	} {
		f.Add(seed.contentType, []byte(seed.body))
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		req := httptest.NewRequest("POST", "/", bytes.NewReader(body))
		req.Header.Set(echo.HeaderContentType, contentType)
		var v struct {
			Name   string   `json:"name"`
			Age    int      `json:"age"`
			Tags   []string `json:"tags"`
			Nested *struct {
				Flag bool `json:"flag"`
			} `json:"nested"`
			Attributes map[string][]string `json:"attributes"`
		}
		err := httpapi.DecodeJSON(e.NewContext(req, httptest.NewRecorder()), &v)
		if err == nil {
			return
		}
		ae, ok := apperr.As(err)
		if !ok {
			t.Fatalf("DecodeJSON(%q, %q) = %v, not an *apperr.Error", contentType, body, err)
		}
		switch ae.Kind {
		case apperr.KindInvalid, apperr.KindTooLarge, apperr.KindUnsupportedMedia:
		default:
			t.Fatalf("DecodeJSON(%q, %q) = %v of kind %v", contentType, body, err, ae.Kind)
		}
	})
}
