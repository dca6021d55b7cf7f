package lambdafn

import (
	"encoding/json"
	"net/http"
	"path"

	"github.com/aws/aws-lambda-go/events"
)

// operatorOnly are the routes of the long-running processes that only operators reach
// (their port is not the public one): a function's HTTP events come from its public API,
// so they are not served there. In Lambda mode operators read CloudWatch instead of
// /metrics (whose counters would be one frozen instance's anyway).
var operatorOnly = map[string]bool{"/metrics": true}

// notServed answers a request for an operator-only route: 404, as a route that does not
// exist, in the problem format of every other error.
func notServed(req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, bool) {
	for _, p := range []string{req.RawPath, req.RequestContext.HTTP.Path} {
		if p != "" && operatorOnly[path.Clean("/"+p)] {
			body, _ := json.Marshal(map[string]any{"type": "about:blank", "title": http.StatusText(http.StatusNotFound),
				"status": http.StatusNotFound, "detail": "not served on the public API"})
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNotFound, Body: string(body),
				Headers: map[string]string{"Content-Type": "application/problem+json"}}, true
		}
	}
	return events.APIGatewayV2HTTPResponse{}, false
}
