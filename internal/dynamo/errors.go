package dynamo

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/ssodir/ssodir/internal/apperr"
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

func isUnavailable(err error) bool {
	var (
		pte  *types.ProvisionedThroughputExceededException
		rle  *types.RequestLimitExceeded
		ise  *types.InternalServerError
		tce  *types.TransactionConflictException
		tipe *types.TransactionInProgressException
		mae  *retry.MaxAttemptsError
		ne   net.Error
		oe   *net.OpError
	)
	switch {
	case errors.As(err, &pte), errors.As(err, &rle), errors.As(err, &ise), errors.As(err, &tce),
		errors.As(err, &tipe), errors.As(err, &ne), errors.As(err, &oe):
		return true
	case errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &mae):
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ThrottlingException", "ServiceUnavailable", "LimitExceededException", "RequestLimitExceeded":
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "connection reset") ||
		strings.Contains(msg, "use of closed network connection") || strings.Contains(msg, "EOF")
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
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return apperr.Unavailable(errors.Join(ErrTableMissing, err), retryAfter)
	}
	if errors.Is(err, context.Canceled) {
		return apperr.Unavailable(err, retryAfter)
	}
	return translate(err)
}
