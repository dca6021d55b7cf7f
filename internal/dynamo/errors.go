package dynamo

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// retryAfter is what a client is told to wait when DynamoDB throttles or is unreachable.
const retryAfter = 2 * time.Second

// translate turns SDK faults that a client may retry (throttling, capacity, an unreachable
// endpoint) into apperr.Unavailable; every other error is returned unchanged. This is the
// only place that knows the SDK's error types.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := apperr.As(err); ok {
		return err
	}
	if isUnavailable(err) {
		return apperr.Unavailable(err, retryAfter)
	}
	return err
}

// The SDK's own checks, the ones its retryer uses: a service answer is judged by its error
// code (throttling and timeout codes) or HTTP status (500, 502, 503, 504); any other
// failure by whether it is a connection that failed or dropped.
var (
	sdkThrottle       = retry.IsErrorThrottles(retry.DefaultThrottles)
	sdkRetryableCode  = retry.RetryableErrorCode{Codes: retry.DefaultRetryableErrorCodes}
	sdkRetryableHTTP  = retry.RetryableHTTPStatusCode{Codes: retry.DefaultRetryableHTTPStatusCodes}
	sdkRetryableConns = retry.IsErrorRetryables(retry.DefaultRetryables)
)

func isUnavailable(err error) bool {
	var mae *retry.MaxAttemptsError
	if errors.As(err, &mae) || errors.Is(err, context.DeadlineExceeded) {
		// The SDK retried and gave up, or ran out of time: a passing fault.
		return true
	}
	// A service's answer is judged by its code and status, never by words in its message.
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "InternalServerError", "ServiceUnavailable", "TransactionConflictException":
			return true
		}
		return sdkThrottle.IsErrorThrottle(err) == aws.TrueTernary ||
			sdkRetryableCode.IsErrorRetryable(err) == aws.TrueTernary ||
			sdkRetryableHTTP.IsErrorRetryable(err) == aws.TrueTernary
	}
	return sdkRetryableConns.IsErrorRetryable(err) == aws.TrueTernary
}

// ErrTableMissing marks an error caused by a table that does not exist (yet, or any more).
var ErrTableMissing = errors.New("table missing")

// TranslateRead classifies an error of a read for the read side: faults a client may
// retry — throttling, an unreachable endpoint, a cancelled request, and a missing table
// (dropped by a replay, or not yet created) — become apperr.Unavailable; a missing table
// also matches ErrTableMissing. Anything else is returned unchanged.
func TranslateRead(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := apperr.As(err); ok {
		return err
	}
	if sdkerr.ResourceNotFound(err) {
		return apperr.Unavailable(errors.Join(ErrTableMissing, err), retryAfter)
	}
	if errors.Is(err, context.Canceled) {
		return apperr.Unavailable(err, retryAfter)
	}
	return translate(err)
}

// IsTableMissing reports whether err says a table does not exist (yet), for read-only
// commands that may run before any service created their tables.
func IsTableMissing(err error) bool {
	return errors.Is(err, ErrTableMissing) || sdkerr.ResourceNotFound(err)
}

// Translate is translate for packages that make their own DynamoDB calls (internal/erasure).
func Translate(err error) error { return translate(err) }
