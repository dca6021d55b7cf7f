package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/auth"
	"github.com/ssodir/ssodir/internal/auth/authtest"
	"github.com/ssodir/ssodir/internal/httpapi"
)

const (
	bootstrapToken = "dev-bootstrap-token"
	userRoute      = "/v1/systems/:system/tenants/:tenant/users/:username"
)

// testAPI is a real server with NewEcho's setup and a few routes that exercise it.
type testAPI struct {
	url    string
	logs   *observer.ObservedLogs
	issuer *authtest.Issuer
	reg    *prometheus.Registry
}

type testBody struct {
	Name   string   `json:"name"`
	Age    int      `json:"age"`
	Tags   []string `json:"tags"`
	Nested struct {
		Flag bool `json:"flag"`
	} `json:"nested"`
}

func newTestAPI(t *testing.T, corsOrigins ...string) *testAPI {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	log := zap.New(core)
	iss := authtest.NewIssuer(t)
	authn, err := auth.New(t.Context(), auth.Config{
		BootstrapToken: bootstrapToken, OIDCIssuer: iss.URL, OIDCAudience: authtest.Audience,
	}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e := httpapi.NewEcho(httpapi.Options{
		Log: log, Metrics: httpapi.NewMetrics(reg), Service: "test", CORSOrigins: corsOrigins,
	})
	httpapi.RegisterProbes(e, nil, reg)

	e.GET(userRoute, func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"subject": httpapi.PrincipalFrom(c).Subject})
	}, httpapi.RequireScope(authn, auth.ScopeRead))
	e.POST("/v1/systems/:system/tenants", func(c echo.Context) error {
		return c.NoContent(http.StatusNoContent)
	}, httpapi.RequireScope(authn, auth.ScopeTenantsAdmin))
	e.POST("/decode", func(c echo.Context) error {
		var b testBody
		if err := httpapi.DecodeJSON(c, &b); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, b)
	})
	e.POST("/ignore-body", func(c echo.Context) error {
		return c.NoContent(http.StatusNoContent)
	})
	e.GET("/panic", func(c echo.Context) error {
		panic("database password is hunter2")
	})
	e.GET("/fail", func(c echo.Context) error {
		return failures[c.QueryParam("case")]
	})

	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &testAPI{url: srv.URL, logs: logs, issuer: iss, reg: reg}
}

// failures are what the /fail route returns, by its case query parameter.
var failures = map[string]error{
	"invalid":       apperr.Invalid("invalid email", apperr.FieldError{Field: "email", Message: "not an address"}),
	"unauth":        apperr.Unauthenticated("token expired"),
	"forbidden":     apperr.Forbidden("no"),
	"notfound":      apperr.NotFound("user"),
	"conflict":      apperr.Conflict(apperr.CodeEmailTaken, "jdoe@example.com is taken"),
	"precondition":  apperr.VersionMismatch(2, 3),
	"unprocessable": apperr.IdempotencyKeyReused(),
	"unavailable":   apperr.Unavailable(errors.New("throttled"), 2500*time.Millisecond),
	"unavailable0":  apperr.Unavailable(errors.New("throttled"), 0),
	"plain":         errors.New("dial tcp 10.0.0.7:8000: secret dsn"),
	"internal":      apperr.Internal(errors.New("secret dsn")),
	"nocode":        &apperr.Error{Kind: apperr.KindConflict, Message: "secret dsn"},
}

type problemBody struct {
	Type   string              `json:"type"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Code   string              `json:"code"`
	Detail string              `json:"detail"`
	Errors []apperr.FieldError `json:"errors"`
}

type response struct {
	status int
	header http.Header
	body   string
}

func (r response) problem(t *testing.T) problemBody {
	t.Helper()
	if ct := r.header.Get(echo.HeaderContentType); ct != httpapi.MIMEProblemJSON {
		t.Fatalf("Content-Type = %q, want %q (body %s)", ct, httpapi.MIMEProblemJSON, r.body)
	}
	var p problemBody
	if err := json.Unmarshal([]byte(r.body), &p); err != nil {
		t.Fatalf("problem body %q: %v", r.body, err)
	}
	if p.Status != r.status || p.Type != "urn:ssodir:problem:"+p.Code || p.Title == "" {
		t.Errorf("inconsistent problem %+v for status %d", p, r.status)
	}
	return p
}

func do(t *testing.T, method, url string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
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
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

func TestErrorHandler(t *testing.T) {
	api := newTestAPI(t)
	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantCode   string
		wantHeader map[string]string
		check      func(t *testing.T, p problemBody)
	}{
		{
			name: "a validation failure is 400 and names the field", method: "GET", path: "/fail?case=invalid",
			wantStatus: 400, wantCode: apperr.CodeValidationFailed,
			check: func(t *testing.T, p problemBody) {
				if len(p.Errors) != 1 || p.Errors[0].Field != "email" {
					t.Errorf("errors = %+v, want one for email", p.Errors)
				}
			},
		},
		{
			name: "an unauthenticated request is 401 with a Bearer challenge", method: "GET", path: "/fail?case=unauth",
			wantStatus: 401, wantCode: apperr.CodeUnauthorized,
			wantHeader: map[string]string{"WWW-Authenticate": "Bearer"},
		},
		{
			name: "a forbidden request is 403", method: "GET", path: "/fail?case=forbidden",
			wantStatus: 403, wantCode: apperr.CodeForbidden,
		},
		{
			name: "a missing entity is 404", method: "GET", path: "/fail?case=notfound",
			wantStatus: 404, wantCode: apperr.CodeNotFound,
		},
		{
			name: "a taken email is 409 with its own title", method: "GET", path: "/fail?case=conflict",
			wantStatus: 409, wantCode: apperr.CodeEmailTaken,
			check: func(t *testing.T, p problemBody) {
				if p.Title != "Email already in use" || p.Detail != "jdoe@example.com is taken" {
					t.Errorf("title %q, detail %q", p.Title, p.Detail)
				}
			},
		},
		{
			name: "a version mismatch is 412", method: "GET", path: "/fail?case=precondition",
			wantStatus: 412, wantCode: apperr.CodeVersionMismatch,
		},
		{
			name: "a reused idempotency key is 422", method: "GET", path: "/fail?case=unprocessable",
			wantStatus: 422, wantCode: apperr.CodeIdempotencyReused,
		},
		{
			name: "unavailable is 503 with Retry-After rounded up to whole seconds", method: "GET", path: "/fail?case=unavailable",
			wantStatus: 503, wantCode: apperr.CodeUnavailable,
			wantHeader: map[string]string{"Retry-After": "3"},
		},
		{
			name: "unavailable without a hint still says Retry-After 1", method: "GET", path: "/fail?case=unavailable0",
			wantStatus: 503, wantCode: apperr.CodeUnavailable,
			wantHeader: map[string]string{"Retry-After": "1"},
		},
		{
			name: "an unexpected error is 500 internal", method: "GET", path: "/fail?case=plain",
			wantStatus: 500, wantCode: apperr.CodeInternal,
		},
		{
			name: "an internal error is 500 internal", method: "GET", path: "/fail?case=internal",
			wantStatus: 500, wantCode: apperr.CodeInternal,
		},
		{
			name: "an error without a code is a bug answered as 500", method: "GET", path: "/fail?case=nocode",
			wantStatus: 500, wantCode: apperr.CodeInternal,
		},
		{
			name: "a panicking handler is 500 internal", method: "GET", path: "/panic",
			wantStatus: 500, wantCode: apperr.CodeInternal,
		},
		{
			name: "an unknown route is 404 not_found", method: "GET", path: "/v2/nothing/here",
			wantStatus: 404, wantCode: apperr.CodeNotFound,
		},
		{
			name: "a known route with another method is 405 with Allow", method: "DELETE", path: "/healthz",
			wantStatus: 405, wantCode: apperr.CodeMethodNotAllowed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := do(t, tt.method, api.url+tt.path, nil, nil)
			if res.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", res.status, tt.wantStatus, res.body)
			}
			p := res.problem(t)
			if p.Code != tt.wantCode {
				t.Errorf("code = %q, want %q", p.Code, tt.wantCode)
			}
			for k, v := range tt.wantHeader {
				if got := res.header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if tt.wantStatus == 405 && !strings.Contains(res.header.Get("Allow"), "GET") {
				t.Errorf("Allow = %q, want it to list GET", res.header.Get("Allow"))
			}
			if tt.wantStatus == 500 {
				if strings.Contains(res.body, "secret") || strings.Contains(res.body, "hunter2") {
					t.Errorf("500 body leaks internals: %s", res.body)
				}
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
}

func TestPanicIsLoggedOnceWithItsStack(t *testing.T) {
	api := newTestAPI(t)
	res := do(t, "GET", api.url+"/panic", nil, nil)

	errorsLogged := api.logs.FilterLevelExact(zapcore.ErrorLevel).All()
	if len(errorsLogged) != 1 {
		t.Fatalf("got %d error entries, want 1: %+v", len(errorsLogged), errorsLogged)
	}
	fields := errorsLogged[0].ContextMap()
	if !strings.Contains(fields["error"].(string), "hunter2") {
		t.Errorf("the log does not say what panicked: %v", fields["error"])
	}
	if stack, _ := fields["stack"].(string); !strings.Contains(stack, "httpapi_test") {
		t.Errorf("the log has no stack of the panic: %q", stack)
	}
	if fields["request_id"] != res.header.Get(echo.HeaderXRequestID) {
		t.Errorf("logged request_id %v, response has %q", fields["request_id"], res.header.Get(echo.HeaderXRequestID))
	}
}

func TestRequireScope(t *testing.T) {
	api := newTestAPI(t)
	iss := api.issuer
	token := func(scope string, tenants ...string) string {
		return "Bearer " + iss.Token(t, map[string]any{"scope": scope, "sso_tenants": tenants})
	}
	const path = "/v1/systems/acme/tenants/eu/users/jdoe"

	tests := []struct {
		name          string
		method, path  string
		authorization string
		wantStatus    int
		wantSubject   string
	}{
		{name: "a request without a token is 401", method: "GET", path: path, wantStatus: 401},
		{name: "a non-Bearer scheme is 401", method: "GET", path: path, authorization: "Basic dXNlcjpwYXNz", wantStatus: 401},
		{name: "a Bearer scheme without a token is 401", method: "GET", path: path, authorization: "Bearer ", wantStatus: 401},
		{name: "a token that does not verify is 401", method: "GET", path: path, authorization: "Bearer nonsense", wantStatus: 401},
		{
			name: "a token without the route's scope is 403", method: "GET", path: path,
			authorization: token(auth.ScopeWrite, "acme/eu"), wantStatus: 403,
		},
		{
			name: "a token without the path's tenant is 403", method: "GET", path: path,
			authorization: token(auth.ScopeRead, "acme/us"), wantStatus: 403,
		},
		{
			name: "a token with the scope and the tenant passes", method: "GET", path: path,
			authorization: token(auth.ScopeRead, "acme/eu"), wantStatus: 200, wantSubject: "user-1",
		},
		{
			name: "a token for all tenants passes", method: "GET", path: path,
			authorization: token(auth.ScopeRead, auth.AllTenants), wantStatus: 200, wantSubject: "user-1",
		},
		{
			name: "the scheme is case-insensitive", method: "GET", path: path,
			authorization: strings.Replace(token(auth.ScopeRead, "acme/eu"), "Bearer", "bearer", 1), wantStatus: 200,
			wantSubject: "user-1",
		},
		{
			name: "the bootstrap token passes as the bootstrap principal", method: "GET", path: path,
			authorization: "Bearer " + bootstrapToken, wantStatus: 200, wantSubject: auth.BootstrapSubject,
		},
		{
			name: "a route without a tenant in its path checks only the scope", method: "POST",
			path: "/v1/systems/acme/tenants", authorization: token(auth.ScopeTenantsAdmin), wantStatus: 204,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var header map[string]string
			if tt.authorization != "" {
				header = map[string]string{"Authorization": tt.authorization}
			}
			res := do(t, tt.method, api.url+tt.path, nil, header)
			if res.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", res.status, tt.wantStatus, res.body)
			}
			switch {
			case tt.wantStatus == 401:
				if res.problem(t).Code != apperr.CodeUnauthorized || res.header.Get("WWW-Authenticate") != "Bearer" {
					t.Errorf("401 without the unauthorized problem and Bearer challenge: %v %s", res.header, res.body)
				}
			case tt.wantStatus == 403:
				if res.problem(t).Code != apperr.CodeForbidden {
					t.Errorf("403 without the forbidden problem: %s", res.body)
				}
			case tt.wantSubject != "":
				if want := `{"subject":"` + tt.wantSubject + `"}`; strings.TrimSpace(res.body) != want {
					t.Errorf("body = %s, want %s", res.body, want)
				}
			}
		})
	}
}

func TestRequireScopeIssuerDown(t *testing.T) {
	api := newTestAPI(t)
	const path = "/v1/systems/acme/tenants/eu/users/jdoe"
	get := func(token string) response {
		return do(t, "GET", api.url+path, nil, map[string]string{"Authorization": "Bearer " + token})
	}
	token := api.issuer.Token(t, map[string]any{"scope": auth.ScopeRead, "sso_tenants": []string{"acme/eu"}})
	rotated := authtest.Sign(t, "RS256", authtest.NewRSAKey(t), "rotated-key",
		api.issuer.Claims(map[string]any{"scope": auth.ScopeRead, "sso_tenants": []string{"acme/eu"}}))
	if res := get(token); res.status != 200 {
		t.Fatalf("with the issuer up: status %d, want 200", res.status)
	}
	api.issuer.Close()

	// The keys fetched while the issuer was up still verify; a token naming a key never seen
	// needs the JWKS, which is gone: the client must retry, not drop its token.
	if res := get(token); res.status != 200 {
		t.Errorf("known key with the issuer down: status %d, want 200", res.status)
	}
	// go-oidc shares a key fetch among the verifications that need one while it runs, and
	// lets go of it a moment after it ends: a verification in that moment gets the keys the
	// issuer had just served, which lack the new key (401). On a loaded machine that moment
	// lasted past the close (CI, -p 3); the next fetch is the one the issuer's absence fails.
	res := get(rotated)
	for deadline := time.Now().Add(5 * time.Second); res.status == 401 && time.Now().Before(deadline); res = get(rotated) {
		time.Sleep(20 * time.Millisecond)
	}
	if res.status != 503 || res.problem(t).Code != apperr.CodeUnavailable || res.header.Get("Retry-After") == "" {
		t.Errorf("unknown key with the issuer down: status %d, Retry-After %q, want 503 with Retry-After",
			res.status, res.header.Get("Retry-After"))
	}
}

func TestDecodeJSON(t *testing.T) {
	api := newTestAPI(t)
	const jsonType = "application/json"
	tests := []struct {
		name        string
		contentType string
		body        string
		wantStatus  int
		wantField   string // the field the problem names, if any
		wantDetail  string // a part of the detail, if any
	}{
		{name: "a well-formed object is decoded", contentType: jsonType,
			body: `{"name":"x","age":3,"tags":["a"],"nested":{"flag":true}}`, wantStatus: 200},
		{name: "a UTF-8 charset is accepted", contentType: "application/json; charset=UTF-8",
			body: `{"name":"x"}`, wantStatus: 200},
		{name: "another charset is 415", contentType: "application/json; charset=latin1",
			body: `{"name":"x"}`, wantStatus: 415},
		{name: "text/plain is 415", contentType: "text/plain", body: `{"name":"x"}`, wantStatus: 415},
		{name: "a missing Content-Type is 415", body: `{"name":"x"}`, wantStatus: 415},
		{name: "an unknown field is 400 and named", contentType: jsonType,
			body: `{"name":"x","nickname":"y"}`, wantStatus: 400, wantField: "nickname"},
		{name: "a syntax error is 400 and gives the offset", contentType: jsonType,
			body: `{"name": x}`, wantStatus: 400, wantDetail: "offset 10"},
		{name: "a wrong type is 400 and names the field", contentType: jsonType,
			body: `{"age":"three"}`, wantStatus: 400, wantField: "age"},
		{name: "a wrong type in a nested object names the path", contentType: jsonType,
			body: `{"nested":{"flag":"yes"}}`, wantStatus: 400, wantField: "nested.flag"},
		{name: "data after the object is 400", contentType: jsonType,
			body: `{"name":"x"} {"name":"y"}`, wantStatus: 400},
		{name: "trailing whitespace is fine", contentType: jsonType, body: "{\"name\":\"x\"}\n\t ", wantStatus: 200},
		{name: "an empty body is 400", contentType: jsonType, body: "", wantStatus: 400},
		{name: "null is 400", contentType: jsonType, body: "null", wantStatus: 400},
		{name: "an array is 400", contentType: jsonType, body: `[{"name":"x"}]`, wantStatus: 400},
		{name: "a truncated object is 400", contentType: jsonType, body: `{"name":"x"`, wantStatus: 400},
		{name: "a body over 64 KiB is 413", contentType: jsonType,
			body: `{"name":"` + strings.Repeat("x", httpapi.MaxBodyBytes) + `"}`, wantStatus: 413},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := map[string]string{}
			if tt.contentType != "" {
				header["Content-Type"] = tt.contentType
			}
			res := do(t, "POST", api.url+"/decode", strings.NewReader(tt.body), header)
			if res.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", res.status, tt.wantStatus, res.body)
			}
			if tt.wantStatus == 200 {
				return
			}
			p := res.problem(t)
			if tt.wantField != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tt.wantField) {
				t.Errorf("errors = %+v, want one naming %q", p.Errors, tt.wantField)
			}
			if !strings.Contains(p.Detail, tt.wantDetail) {
				t.Errorf("detail = %q, want it to contain %q", p.Detail, tt.wantDetail)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	api := newTestAPI(t)
	big := strings.Repeat("x", httpapi.MaxBodyBytes+1)

	t.Run("a declared oversized body is refused before the handler reads it", func(t *testing.T) {
		res := do(t, "POST", api.url+"/ignore-body", strings.NewReader(big), nil)
		if res.status != 413 || res.problem(t).Code != apperr.CodePayloadTooLarge {
			t.Errorf("status %d body %s, want 413 payload_too_large", res.status, res.body)
		}
	})
	t.Run("an oversized chunked body is cut off while reading", func(t *testing.T) {
		// A reader without a known length makes the client send it chunked.
		body := io.MultiReader(strings.NewReader(`{"name":"`), strings.NewReader(big), strings.NewReader(`"}`))
		res := do(t, "POST", api.url+"/decode", body, map[string]string{"Content-Type": "application/json"})
		if res.status != 413 || res.problem(t).Code != apperr.CodePayloadTooLarge {
			t.Errorf("status %d body %s, want 413 payload_too_large", res.status, res.body)
		}
	})
}

func TestCORS(t *testing.T) {
	const origin = "https://ui.example.com"
	preflight := map[string]string{
		"Origin":                         origin,
		"Access-Control-Request-Method":  "PATCH",
		"Access-Control-Request-Headers": "authorization,content-type,if-match",
	}
	path := "/v1/systems/acme/tenants/eu/users/jdoe"

	t.Run("without origins no CORS headers are sent", func(t *testing.T) {
		api := newTestAPI(t)
		for _, res := range []response{
			do(t, "OPTIONS", api.url+path, nil, preflight),
			do(t, "GET", api.url+path, nil, map[string]string{"Origin": origin}),
		} {
			for k := range res.header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("CORS header %s sent while CORS is off", k)
				}
			}
		}
	})

	api := newTestAPI(t, origin)
	t.Run("a preflight from an allowed origin is answered", func(t *testing.T) {
		res := do(t, "OPTIONS", api.url+path, nil, preflight)
		if res.status != http.StatusNoContent {
			t.Fatalf("status = %d, want 204", res.status)
		}
		if got := res.header.Get("Access-Control-Allow-Origin"); got != origin {
			t.Errorf("Allow-Origin = %q", got)
		}
		allowed := strings.ToLower(res.header.Get("Access-Control-Allow-Headers"))
		for _, h := range []string{"authorization", "content-type", "if-match", "idempotency-key", "x-min-version"} {
			if !strings.Contains(allowed, h) {
				t.Errorf("Allow-Headers %q lacks %s", allowed, h)
			}
		}
		if !strings.Contains(res.header.Get("Access-Control-Allow-Methods"), "PATCH") {
			t.Errorf("Allow-Methods = %q, want PATCH among them", res.header.Get("Access-Control-Allow-Methods"))
		}
	})
	t.Run("a response to an allowed origin exposes the API's headers, errors included", func(t *testing.T) {
		res := do(t, "GET", api.url+path, nil, map[string]string{"Origin": origin})
		if res.status != 401 || res.header.Get("Access-Control-Allow-Origin") != origin {
			t.Fatalf("status %d, Allow-Origin %q", res.status, res.header.Get("Access-Control-Allow-Origin"))
		}
		exposed := strings.ToLower(res.header.Get("Access-Control-Expose-Headers"))
		for _, h := range []string{"etag", "location", "x-command-id", "retry-after"} {
			if !strings.Contains(exposed, h) {
				t.Errorf("Expose-Headers %q lacks %s", exposed, h)
			}
		}
	})
	t.Run("another origin gets no CORS headers", func(t *testing.T) {
		res := do(t, "OPTIONS", api.url+path, nil, map[string]string{
			"Origin": "https://evil.example.com", "Access-Control-Request-Method": "GET"})
		if got := res.header.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("Allow-Origin = %q for a foreign origin", got)
		}
	})
}

func TestMetricsAndAccessLog(t *testing.T) {
	api := newTestAPI(t)
	authz := map[string]string{"Authorization": "Bearer " + bootstrapToken}
	for range 2 {
		do(t, "GET", api.url+"/v1/systems/acme/tenants/eu/users/jdoe?email=jdoe@example.com", nil, authz)
	}
	do(t, "GET", api.url+"/v1/systems/acme/tenants/eu/users/asmith", nil, nil)
	do(t, "GET", api.url+"/wp-admin/jdoe", nil, nil)
	do(t, "BREW", api.url+"/healthz", nil, nil)

	res := do(t, "GET", api.url+"/metrics", nil, nil)
	if res.status != 200 {
		t.Fatalf("GET /metrics: %d", res.status)
	}
	for _, want := range []string{
		`http_requests_total{method="GET",route="` + userRoute + `",service="test",status="200"} 2`,
		`http_requests_total{method="GET",route="` + userRoute + `",service="test",status="401"} 1`,
		`http_requests_total{method="GET",route="unmatched",service="test",status="404"} 1`,
		`http_requests_total{method="OTHER",route="/healthz",service="test",status="405"} 1`,
		`http_request_duration_seconds_count{method="GET",route="` + userRoute + `",service="test",status="200"} 2`,
	} {
		if !strings.Contains(res.body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, raw := range []string{"jdoe", "asmith", "wp-admin", "BREW"} {
		if strings.Contains(res.body, raw) {
			t.Errorf("metrics contain the raw request value %q", raw)
		}
	}

	entries := api.logs.FilterMessage("request").All()
	if len(entries) < 5 {
		t.Fatalf("got %d access log entries, want at least 5", len(entries))
	}
	for _, e := range entries {
		fields := e.ContextMap()
		for _, key := range []string{"method", "route", "status", "latency", "request_id"} {
			if _, ok := fields[key]; !ok {
				t.Errorf("access log entry lacks %s: %v", key, fields)
			}
		}
		for k, v := range fields {
			s, _ := v.(string)
			for _, secret := range []string{"jdoe", "asmith", bootstrapToken} {
				if strings.Contains(s, secret) {
					t.Errorf("access log field %s = %q carries request data", k, s)
				}
			}
		}
	}
}

func TestRequestID(t *testing.T) {
	api := newTestAPI(t)
	tests := []struct {
		name     string
		incoming string
		keep     bool
	}{
		{"a request without an id gets one", "", false},
		{"a sane incoming id is kept", "trace-42.abc", true},
		{"an incoming id with spaces is replaced", "id with spaces", false},
		{"an overlong incoming id is replaced", strings.Repeat("a", 200), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := map[string]string{}
			if tt.incoming != "" {
				header[echo.HeaderXRequestID] = tt.incoming
			}
			got := do(t, "GET", api.url+"/healthz", nil, header).header.Get(echo.HeaderXRequestID)
			if got == "" || (got == tt.incoming) != tt.keep {
				t.Errorf("X-Request-Id = %q for incoming %q, keep = %v", got, tt.incoming, tt.keep)
			}
		})
	}
}

func TestProbes(t *testing.T) {
	newServer := func(t *testing.T, ready func(context.Context) error) string {
		reg := prometheus.NewRegistry()
		e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Metrics: httpapi.NewMetrics(reg), Service: "test"})
		httpapi.RegisterProbes(e, ready, reg)
		srv := httptest.NewServer(e)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	notReady := func(context.Context) error { return errors.New("dynamodb: connection refused") }

	t.Run("healthz is 200 ok", func(t *testing.T) {
		res := do(t, "GET", newServer(t, notReady)+"/healthz", nil, nil)
		if res.status != 200 || strings.TrimSpace(res.body) != `{"status":"ok"}` {
			t.Errorf("status %d body %s", res.status, res.body)
		}
	})
	t.Run("readyz is 200 when the dependencies answer", func(t *testing.T) {
		res := do(t, "GET", newServer(t, func(context.Context) error { return nil })+"/readyz", nil, nil)
		if res.status != 200 {
			t.Errorf("status %d body %s", res.status, res.body)
		}
	})
	t.Run("readyz is 503 unavailable when they do not", func(t *testing.T) {
		res := do(t, "GET", newServer(t, notReady)+"/readyz", nil, nil)
		if res.status != 503 || res.problem(t).Code != apperr.CodeUnavailable || res.header.Get("Retry-After") == "" {
			t.Errorf("status %d body %s", res.status, res.body)
		}
		if strings.Contains(res.body, "connection refused") {
			t.Errorf("readyz leaks the cause: %s", res.body)
		}
	})
	t.Run("readyz gives up on a dependency that hangs", func(t *testing.T) {
		hang := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		if res := do(t, "GET", newServer(t, hang)+"/readyz", nil, nil); res.status != 503 {
			t.Errorf("status %d body %s", res.status, res.body)
		}
	})
	t.Run("metrics is open", func(t *testing.T) {
		if res := do(t, "GET", newServer(t, notReady)+"/metrics", nil, nil); res.status != 200 {
			t.Errorf("status %d", res.status)
		}
	})
}
