package keycloak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Errors a caller can test for with errors.Is. A *StatusError matches the one for its
// status code.
var (
	// ErrNotFound: the object does not exist (404), or a lookup found nothing.
	ErrNotFound = errors.New("keycloak: not found")
	// ErrConflict: a username, email or group name is taken (409), or the object that
	// holds it is not the one ssodir expected.
	ErrConflict = errors.New("keycloak: conflict")
	// ErrUnauthorized: Keycloak refused the client's token even after a fresh one was
	// fetched (401), or the token endpoint refused the client credentials.
	ErrUnauthorized = errors.New("keycloak: unauthorized")
	// ErrForbidden: the service account lacks a realm-management role (403).
	ErrForbidden = errors.New("keycloak: forbidden")
	// ErrAttributesDropped: Keycloak accepted a user but did not keep its ssodir_id
	// attribute. Keycloak 24+ drops attributes its user profile does not declare unless
	// the realm's "Unmanaged attributes" policy is enabled; without the attribute ssodir
	// cannot recognise the users it manages, so it stops rather than create them.
	ErrAttributesDropped = errors.New("keycloak: realm drops the ssodir_id attribute: " +
		"enable unmanaged attributes (Realm settings > General) or declare ssodir_id in the user profile")
	// ErrUsernameReadOnly: the realm refused a username change (400
	// error-user-attribute-read-only): its "Edit username" setting (editUsernameAllowed)
	// is off, as it is by default.
	ErrUsernameReadOnly = errors.New("keycloak: the realm does not allow editing usernames (editUsernameAllowed is off)")
	// ErrUsernameRefused: the realm's user profile refuses a username (400
	// error-invalid-length or error-username-invalid-character on username). Keycloak's
	// default profile wants 3–255 characters, while the directory allows 1–255 (API.md):
	// a realm that keeps the default refuses 1–2 character usernames.
	ErrUsernameRefused = errors.New("keycloak: the realm's user profile refuses the username " +
		"(Keycloak's default wants at least 3 characters; the directory allows 1): lower the minimum of " +
		"the username's length validator (Realm settings > User profile > username), then re-drive")
	// ErrSafetyValve: a reconcile plan would delete more of the realm's managed users or
	// groups than PlanOptions allow; nothing was applied.
	ErrSafetyValve = errors.New("keycloak: safety valve")
)

// StatusError is an answer from Keycloak with a status the client does not turn into
// success. Message is Keycloak's own error text (errorMessage, error_description or error),
// which never contains request bodies, so it is safe to log.
type StatusError struct {
	Method string
	// Path is the request path below the realm's Admin API root, e.g. "/users/{id}".
	Path       string
	StatusCode int
	Message    string
	// Code is Keycloak's error code (the "error" of an {"error", "error_description"}
	// answer), e.g. invalidPasswordHistoryMessage; empty when it gave none.
	Code string
	// RetryAfter is the wait the server asked for, if any.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("keycloak: %s %s: %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is lets errors.Is(err, ErrNotFound) and friends match by status code.
func (e *StatusError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.StatusCode == http.StatusNotFound
	case ErrConflict:
		return e.StatusCode == http.StatusConflict
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrForbidden:
		return e.StatusCode == http.StatusForbidden
	case ErrUsernameRefused:
		return e.StatusCode == http.StatusBadRequest &&
			(e.Message == "username: error-invalid-length" || e.Message == "username: error-username-invalid-character")
	case ErrUsernameReadOnly:
		// Keycloak names the field: "username: error-user-attribute-read-only" (client.go).
		return e.StatusCode == http.StatusBadRequest &&
			(e.Message == "username: error-user-attribute-read-only" || e.Message == "error-user-attribute-read-only")
	}
	return false
}

// StatusCode is the HTTP status of the first *StatusError in err's chain, 0 if none.
func StatusCode(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode
	}
	return 0
}

// RealmUnavailable reports whether err says the realm itself is failing rather than the
// one request: no answer in time, a connection error, a token endpoint that does not
// answer, or a 429 or 5xx. A caller that sees it should stop sending that realm work for
// a while instead of retrying each request (see keycloaksync's parking).
func RealmUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if code := StatusCode(err); code != 0 {
		return code == http.StatusTooManyRequests || code >= 500
	}
	var te *tokenError
	if errors.As(err, &te) {
		return te.retryable()
	}
	var pe *permanentError
	if errors.As(err, &pe) {
		return false
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET)
}

// CodePasswordHistory is the error code of a reset-password that a realm's password
// history policy refuses: the password is the current one, or one of the last few.
const CodePasswordHistory = "invalidPasswordHistoryMessage"

// ErrorCode is Keycloak's error code in err (StatusError.Code), empty if none.
func ErrorCode(err error) string {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

// RetryAfterOf is the wait the realm asked for in err (a 429 or 503 with Retry-After), 0
// when it asked for none.
func RetryAfterOf(err error) time.Duration {
	var se *StatusError
	if errors.As(err, &se) {
		return se.RetryAfter
	}
	return 0
}

// keycloakCode is the "error" of an error body that also describes it (error_description):
// there "error" is a code, e.g. invalidPasswordHistoryMessage, not a sentence.
func keycloakCode(body []byte) string {
	var e struct {
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if json.Unmarshal(body, &e) != nil || e.ErrorDescription == "" || len(e.Error) > 100 {
		return ""
	}
	return e.Error
}
