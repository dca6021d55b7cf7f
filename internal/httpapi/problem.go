package httpapi

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
)

// MIMEProblemJSON is the media type of error responses (RFC 9457).
const MIMEProblemJSON = "application/problem+json"

// problem is the body of every error response, as in API.md's "Errors" section.
type problem struct {
	Type   string              `json:"type"`
	Title  string              `json:"title"`
	Status int                 `json:"status"`
	Code   string              `json:"code"`
	Detail string              `json:"detail"`
	Errors []apperr.FieldError `json:"errors,omitempty"`
}

var titles = map[string]string{
	apperr.CodeValidationFailed:     "Validation failed",
	apperr.CodeUnauthorized:         "Authentication required",
	apperr.CodeForbidden:            "Forbidden",
	apperr.CodeNotFound:             "Not found",
	apperr.CodeMethodNotAllowed:     "Method not allowed",
	apperr.CodeUsernameTaken:        "Username already in use",
	apperr.CodeEmailTaken:           "Email already in use",
	apperr.CodeGroupExists:          "Group already exists",
	apperr.CodeTenantExists:         "Tenant already exists",
	apperr.CodeVersionMismatch:      "Version mismatch",
	apperr.CodePayloadTooLarge:      "Payload too large",
	apperr.CodeUnsupportedMediaType: "Unsupported media type",
	apperr.CodeIdempotencyReused:    "Idempotency key reused",
	apperr.CodeUnavailable:          "Service unavailable",
	apperr.CodeCursorExpired:        "Cursor expired",
	apperr.CodeInternal:             "Internal error",
	apperr.CodeHistoryNotKept:       "History not kept",
}

var statuses = map[apperr.Kind]int{
	apperr.KindInvalid:          http.StatusBadRequest,
	apperr.KindUnauthenticated:  http.StatusUnauthorized,
	apperr.KindForbidden:        http.StatusForbidden,
	apperr.KindNotFound:         http.StatusNotFound,
	apperr.KindMethodNotAllowed: http.StatusMethodNotAllowed,
	apperr.KindConflict:         http.StatusConflict,
	apperr.KindPrecondition:     http.StatusPreconditionFailed,
	apperr.KindTooLarge:         http.StatusRequestEntityTooLarge,
	apperr.KindUnsupportedMedia: http.StatusUnsupportedMediaType,
	apperr.KindUnprocessable:    http.StatusUnprocessableEntity,
	apperr.KindUnavailable:      http.StatusServiceUnavailable,
	apperr.KindGone:             http.StatusGone,
}

// errorHandler is the one place where errors become HTTP responses. It logs only what a
// client cannot fix (internal and unavailable errors), once, with the request id.
func errorHandler(log *zap.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		e := toAppErr(err)
		status, ok := statuses[e.Kind]
		if !ok || e.Code == "" {
			// An error without a known kind or a code is a bug, not an answer for a client.
			status = http.StatusInternalServerError
		}

		switch status {
		case http.StatusInternalServerError:
			fields := []zap.Field{zap.Error(err), zap.String("request_id", requestIDOf(c))}
			var p *panicError
			if errors.As(err, &p) {
				fields = append(fields, zap.ByteString("stack", p.stack))
			}
			log.Error("request failed", fields...)
			// Whatever the error says stays in the log.
			e = apperr.Internal(nil)
		case http.StatusServiceUnavailable:
			log.Warn("request answered unavailable", zap.Error(err), zap.String("request_id", requestIDOf(c)))
		}

		if c.Response().Committed {
			return
		}
		h := c.Response().Header()
		switch status {
		case http.StatusUnauthorized:
			h.Set(echo.HeaderWWWAuthenticate, "Bearer")
		case http.StatusServiceUnavailable:
			h.Set(echo.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds(e.RetryAfter)))
		}

		if w, ok := c.Get(problemWriterKey).(ProblemWriter); ok {
			if err := w(c, status, e); err != nil {
				log.Debug("write problem", zap.Error(err), zap.String("request_id", requestIDOf(c)))
			}
			return
		}
		title, ok := titles[e.Code]
		if !ok {
			title = http.StatusText(status)
		}
		// Strings and ints only: encoding cannot fail.
		body, _ := json.Marshal(problem{
			Type:   "urn:ssodir:problem:" + e.Code,
			Title:  title,
			Status: status,
			Code:   e.Code,
			Detail: e.Message,
			Errors: e.Fields,
		})
		if err := c.Blob(status, MIMEProblemJSON, body); err != nil {
			// The client went away; there is no one left to answer.
			log.Debug("write problem", zap.Error(err), zap.String("request_id", requestIDOf(c)))
		}
	}
}

// ProblemWriter writes the body of an error response in a protocol's own shape (SCIM's
// Error schema, say) instead of problem+json. The error handler still decides the status,
// the headers (Retry-After, WWW-Authenticate) and what is logged; e is what a client may
// see (an internal error's cause is already gone from it).
type ProblemWriter func(c echo.Context, status int, e *apperr.Error) error

const problemWriterKey = "ssodir.problemWriter"

// UseProblemWriter makes the error handler answer the requests of the routes it guards
// with w.
func UseProblemWriter(w ProblemWriter) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Set(problemWriterKey, w)
			return next(c)
		}
	}
}

// toAppErr classifies err: an *apperr.Error as it is, echo's own routing and body errors by
// their status, anything else as internal.
func toAppErr(err error) *apperr.Error {
	if e, ok := apperr.As(err); ok {
		return e
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return apperr.NotFound("route")
		case http.StatusMethodNotAllowed:
			return &apperr.Error{Kind: apperr.KindMethodNotAllowed, Code: apperr.CodeMethodNotAllowed,
				Message: "this route does not accept this method"}
		case http.StatusRequestEntityTooLarge:
			return errTooLarge()
		case http.StatusUnsupportedMediaType:
			return errUnsupportedMedia()
		}
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return errTooLarge()
	}
	return apperr.Internal(err)
}

// retryAfterSeconds rounds up, and never says 0: "retry now" would invite a hot loop.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
