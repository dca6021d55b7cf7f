package lambdafn

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/labstack/echo/v4"
)

// /metrics is an operator's route: the public API a function serves answers 404 for it,
// however the path is written, while the other open routes still answer.
func TestMetricsAreNotServedOnThePublicAPI(t *testing.T) {
	e := echo.New()
	e.GET("/metrics", func(c echo.Context) error { return c.String(http.StatusOK, "ssodir_up 1") })
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	f := &Function{HTTP: e}
	get := func(p string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		payload, _ := json.Marshal(events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: p,
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: p}}})
		out, err := f.Invoke(t.Context(), payload)
		if err != nil {
			t.Fatal(err)
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, p := range []string{"/metrics", "/metrics/", "//metrics", "/./metrics", "/x/../metrics"} {
		if r := get(p); r.StatusCode != http.StatusNotFound || r.Headers["Content-Type"] != "application/problem+json" {
			t.Errorf("GET %s: %d %v %s", p, r.StatusCode, r.Headers, r.Body)
		}
	}
	if r := get("/healthz"); r.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: %d", r.StatusCode)
	}
}
