package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The problem codes of API.md, "Errors".
const (
	CodeValidationFailed     = "validation_failed"
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUsernameTaken        = "username_taken"
	CodeEmailTaken           = "email_taken"
	CodeGroupExists          = "group_exists"
	CodeTenantExists         = "tenant_exists"
	CodeTenantNotReady       = "tenant_not_ready"
	CodeVersionMismatch      = "version_mismatch"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	CodeTableQuotaExceeded   = "table_quota_exceeded"
	CodeUnavailable          = "unavailable"
	CodeCursorExpired        = "cursor_expired"
	CodeInternal             = "internal"
)

// Error is a problem+json answer (RFC 9457) of either API, or a non-2xx answer without one.
type Error struct {
	// Method and Path are the request that got it.
	Method string `json:"-"`
	Path   string `json:"-"`
	// Status is the HTTP status.
	Status int    `json:"status"`
	Type   string `json:"type"`
	Title  string `json:"title"`
	// Code is API.md's stable error code ("email_taken"); for an answer that was not
	// problem+json it is derived from the status.
	Code   string       `json:"code"`
	Detail string       `json:"detail"`
	Errors []FieldError `json:"errors"`
	// RetryAfter is the answer's Retry-After, zero when it had none.
	RetryAfter time.Duration `json:"-"`
}

// FieldError names a field at fault in a validation_failed answer.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s", e.Method, e.Path, e.Status, e.Code)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	} else if e.Title != "" {
		b.WriteString(": " + e.Title)
	}
	for _, f := range e.Errors {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Message)
	}
	return b.String()
}

// HasCode reports whether err is (or wraps) an *Error with that code.
func HasCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// IsNotFound reports whether err is a 404 not_found answer.
func IsNotFound(err error) bool { return HasCode(err, CodeNotFound) }

// IsConflict reports whether err is a 409 answer (a name or email taken, a tenant there
// with other settings, a tenant not ready yet).
func IsConflict(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == http.StatusConflict
}

var statusCodes = map[int]string{
	400: CodeValidationFailed, 401: CodeUnauthorized, 403: CodeForbidden, 404: CodeNotFound,
	405: CodeMethodNotAllowed, 412: CodeVersionMismatch, 413: CodePayloadTooLarge,
	415: CodeUnsupportedMediaType, 422: CodeIdempotencyKeyReused, 503: CodeUnavailable, 500: CodeInternal,
}

// problem turns a non-2xx answer into an *Error.
func problem(r *request, resp *response) *Error {
	e := &Error{}
	if err := json.Unmarshal(resp.body, e); err != nil || e.Code == "" {
		e = &Error{Detail: strings.TrimSpace(string(truncate(resp.body, 200)))}
		e.Code = statusCodes[resp.status]
		if e.Code == "" {
			e.Code = "http_" + strconv.Itoa(resp.status)
		}
	}
	e.Method, e.Path, e.Status = r.method, r.path, resp.status
	if s, err := strconv.Atoi(strings.TrimSpace(resp.header.Get("Retry-After"))); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	} else if t, err := http.ParseTime(resp.header.Get("Retry-After")); err == nil {
		e.RetryAfter = max(time.Until(t), 0)
	}
	return e
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}
