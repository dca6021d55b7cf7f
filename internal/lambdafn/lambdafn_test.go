package lambdafn

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/labstack/echo/v4"
)

func TestEachEventGoesWhereItBelongsAndAnythingElseIsRefused(t *testing.T) {
	e := echo.New()
	e.GET("/v1/ping", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"q": c.QueryParam("q")}) })
	ran := 0
	f := &Function{HTTP: e, Tasks: map[string]func(context.Context) error{"tick": func(context.Context) error { ran++; return nil }}}

	req := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/v1/ping", RawQueryString: "q=1",
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/v1/ping"}}}
	payload, _ := json.Marshal(req)
	out, err := f.Invoke(t.Context(), payload)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, `"q":"1"`) {
		t.Errorf("HTTP answer %s, %v", out, err)
	}

	if _, err := f.Invoke(t.Context(), []byte(`{"ssodir_task":"tick"}`)); err != nil || ran != 1 {
		t.Errorf("task: %v, ran %d", err, ran)
	}
	for _, bad := range []string{`{"ssodir_task":"nope"}`, `not json`, `{"Records":[{"eventSource":"aws:dynamodb"}]}`, `{"detail-type":"x"}`} {
		if _, err := f.Invoke(t.Context(), []byte(bad)); err == nil {
			t.Errorf("%s was taken", bad)
		}
	}
}
