// Package apperr holds the few kinds of error ssodir's code returns, each with a stable code
// string. They are mapped to HTTP problem responses in exactly one place (internal/httpapi).
package apperr

import (
	"errors"
	"fmt"
	"time"
)

// Kind is the class of an error; it decides the HTTP status.
type Kind int

const (
	KindInternal Kind = iota
	KindInvalid
	KindUnauthenticated
	KindForbidden
	KindNotFound
	KindMethodNotAllowed
	KindConflict
	KindPrecondition
	KindTooLarge
	KindUnsupportedMedia
	KindUnprocessable
	KindUnavailable
	// KindGone: what was asked for is past its retention (410).
	KindGone
)

// Stable codes of API.md's "Errors" section.
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
	CodeTableQuotaExceeded   = "table_quota_exceeded"
	CodeVersionMismatch      = "version_mismatch"
	CodePayloadTooLarge      = "payload_too_large"
	CodeUnsupportedMediaType = "unsupported_media_type"
	CodeIdempotencyReused    = "idempotency_key_reused"
	CodeUnavailable          = "unavailable"
	CodeCursorExpired        = "cursor_expired"
	CodeInternal             = "internal"
	// CodeHistoryNotKept (400): an as-of read of an instant the kept history does not cover.
	CodeHistoryNotKept = "history_not_kept"
)

// FieldError names the input field at fault.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is an error with a kind, a stable code and a message safe to show to a client.
type Error struct {
	Kind    Kind
	Code    string
	Message string
	Fields  []FieldError
	// RetryAfter is a hint for unavailable errors.
	RetryAfter time.Duration
	// Err is the cause; it is logged, never shown.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// As finds the *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// KindOf is the kind of err, KindInternal when it carries none.
func KindOf(err error) Kind {
	if e, ok := As(err); ok {
		return e.Kind
	}
	return KindInternal
}

// CodeOf is the code of err, CodeInternal when it carries none.
func CodeOf(err error) string {
	if e, ok := As(err); ok {
		return e.Code
	}
	return CodeInternal
}

// Invalid is a validation failure; fields name the inputs at fault.
func Invalid(msg string, fields ...FieldError) *Error {
	return &Error{Kind: KindInvalid, Code: CodeValidationFailed, Message: msg, Fields: fields}
}

// InvalidField is a validation failure of one field.
func InvalidField(field, msg string) *Error {
	return Invalid("invalid "+field, FieldError{Field: field, Message: msg})
}

func NotFound(what string) *Error {
	return &Error{Kind: KindNotFound, Code: CodeNotFound, Message: what + " not found"}
}

func Conflict(code, msg string) *Error {
	return &Error{Kind: KindConflict, Code: code, Message: msg}
}

func VersionMismatch(expected, actual int64) *Error {
	return &Error{Kind: KindPrecondition, Code: CodeVersionMismatch,
		Message: fmt.Sprintf("expected version %d, current version is %d", expected, actual)}
}

func Unauthenticated(msg string) *Error {
	return &Error{Kind: KindUnauthenticated, Code: CodeUnauthorized, Message: msg}
}

func Forbidden(msg string) *Error {
	return &Error{Kind: KindForbidden, Code: CodeForbidden, Message: msg}
}

// Unavailable wraps a storage fault the client may retry after a while.
func Unavailable(err error, retryAfter time.Duration) *Error {
	return &Error{Kind: KindUnavailable, Code: CodeUnavailable, Message: "service temporarily unavailable, retry later",
		RetryAfter: retryAfter, Err: err}
}

// TableQuotaExceeded is a tenant provisioning refused because the AWS account's table
// quota is reached (a limit on concurrent table operations is not: that means later); a
// retry may succeed once an operator raised the quota or removed tables.
func TableQuotaExceeded(err error, retryAfter time.Duration) *Error {
	return &Error{Kind: KindUnavailable, Code: CodeTableQuotaExceeded,
		Message: "the account's DynamoDB table quota is reached; nothing was left half-made", RetryAfter: retryAfter, Err: err}
}

// CursorExpired answers a change-feed cursor older than the feed's retention (410).
func CursorExpired() *Error {
	return &Error{Kind: KindGone, Code: CodeCursorExpired,
		Message: "the cursor is older than the change feed's retention; start again without one"}
}

// TenantNotReady is a command on a tenant whose tables are still being made.
func TenantNotReady() *Error {
	return &Error{Kind: KindConflict, Code: CodeTenantNotReady,
		Message: "the tenant is still provisioning; retry once it is active"}
}

func IdempotencyKeyReused() *Error {
	return &Error{Kind: KindUnprocessable, Code: CodeIdempotencyReused,
		Message: "this Idempotency-Key was used for a different request"}
}

// Internal wraps an unexpected error; its text is never shown to a client.
func Internal(err error) *Error {
	return &Error{Kind: KindInternal, Code: CodeInternal, Message: "internal error", Err: err}
}

// Fields collects field errors so that a client learns everything wrong at once.
type Fields []FieldError

// Add records that field is at fault, and why.
func (f *Fields) Add(field, msg string) {
	*f = append(*f, FieldError{Field: field, Message: msg})
}

// Err is an Invalid error with msg and the collected fields, or nil when none was added.
func (f Fields) Err(msg string) error {
	if len(f) == 0 {
		return nil
	}
	return Invalid(msg, f...)
}
