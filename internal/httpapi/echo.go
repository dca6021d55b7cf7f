// Package httpapi is the HTTP setup every ssodir service shares: one echo configuration, the
// one error handler that writes problem+json, request decoding, bearer-token middleware,
// metrics, probes and graceful serving.
package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
)

// Options configure NewEcho.
type Options struct {
	// Log is required: the access log and unexpected errors go there.
	Log *zap.Logger
	// Metrics may be nil, as in tests that do not look at them.
	Metrics *Metrics
	// Service names the binary in metrics.
	Service string
	// CORSOrigins are the browser origins allowed to call the API; none turns CORS off.
	CORSOrigins []string
	// NoCORSPaths are never offered to browsers, whatever CORSOrigins says (a service
	// route such as the projector's progress feed).
	NoCORSPaths []string
}

// routeUnmatched labels requests that matched no route, so that scanners probing random
// paths cannot grow the metrics without bound.
const routeUnmatched = "unmatched"

// NewEcho returns an echo instance with the middleware every service needs, in this order:
// request id, access log and metrics (outermost, so they see the final status), panic
// recovery, CORS, body limit, and the decoding of path parameters (which runs after
// routing: echo runs e.Use middleware after routing).
func NewEcho(opts Options) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = errorHandler(opts.Log)

	e.Use(requestID, observe(opts.Log, opts.Metrics, opts.Service), recoverPanics)
	if len(opts.CORSOrigins) > 0 {
		e.Use(middleware.CORSWithConfig(middleware.CORSConfig{
			Skipper:      func(c echo.Context) bool { return slices.Contains(opts.NoCORSPaths, c.Request().URL.Path) },
			AllowOrigins: opts.CORSOrigins,
			AllowMethods: []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
				http.MethodPatch, http.MethodDelete},
			AllowHeaders: []string{echo.HeaderAuthorization, echo.HeaderContentType, "If-Match",
				"Idempotency-Key", "X-Min-Version"},
			ExposeHeaders: []string{"ETag", echo.HeaderLocation, "X-Command-Id", echo.HeaderRetryAfter,
				echo.HeaderXRequestID},
			MaxAge: int((10 * time.Minute).Seconds()),
		}))
	}
	e.Use(limitBody, decodePathParams)
	return e
}

// requestID keeps a caller's X-Request-Id when it is sane, so a trace can cross services,
// and makes one otherwise.
func requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := range len(id) {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func requestIDOf(c echo.Context) string {
	return c.Response().Header().Get(echo.HeaderXRequestID)
}

// observe writes the response of a failed request itself, through the error handler, so
// that the access log and the metrics record the status the client got.
func observe(log *zap.Logger, m *Metrics, service string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			latency := time.Since(start)
			route := routeOf(c, err)
			method := methodLabel(c.Request().Method)
			status := c.Response().Status
			if m != nil {
				m.observe(service, route, method, status, latency)
			}

			level := zap.InfoLevel
			if isProbe(route) {
				level = zap.DebugLevel
			}
			// Only the route template: raw paths and query strings carry usernames and emails.
			log.Log(level, "request",
				zap.String("method", method),
				zap.String("route", route),
				zap.Int("status", status),
				zap.Duration("latency", latency),
				zap.String("request_id", requestIDOf(c)))
			return nil
		}
	}
}

// routeOf is the template of the route that served c, or routeUnmatched.
func routeOf(c echo.Context, err error) string {
	if c.Path() == "" || errors.Is(err, echo.ErrNotFound) {
		return routeUnmatched
	}
	return c.Path()
}

// methodLabel folds methods no route serves into one label, for the same reason as
// routeUnmatched.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "OTHER"
}

func isProbe(route string) bool {
	return route == pathHealthz || route == pathReadyz || route == pathMetrics
}

// panicError carries a recovered panic to the error handler, which logs it with its stack.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// recoverPanics turns a panic in a handler into a 500, so no request crashes a process.
func recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			// The server's own way to abort a response; net/http handles it.
			if r == http.ErrAbortHandler {
				panic(r)
			}
			err = &panicError{value: r, stack: debug.Stack()}
		}()
		return next(c)
	}
}

// MaxBodyBytes is the largest request body any route accepts (API.md: 64 KiB).
const MaxBodyBytes = 64 << 10

// limitBody refuses a declared oversized body before reading it, and caps the bytes an
// undeclared (chunked) body can deliver.
func limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if req.ContentLength > MaxBodyBytes {
			return errTooLarge()
		}
		if req.Body != nil {
			req.Body = http.MaxBytesReader(c.Response().Writer, req.Body, MaxBodyBytes)
		}
		return next(c)
	}
}

func errTooLarge() *apperr.Error {
	return &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodePayloadTooLarge,
		Message: fmt.Sprintf("request body exceeds %d bytes", MaxBodyBytes)}
}
