// Package sdkerr is the one place that reads the AWS SDK's error types and codes: every
// package that needs to tell one DynamoDB or Streams fault from another asks here
// (STYLE.md: SDK errors are translated inside internal/dynamo and nowhere else). It sits
// below internal/dynamo so that internal/streams, which dynamo imports, can use it too.
package sdkerr

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Code is the service's error code, or "".
func Code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// ExpiredIterator reports a Streams shard iterator that is no longer valid.
func ExpiredIterator(err error) bool { return Code(err) == "ExpiredIteratorException" }

// Trimmed reports a Streams read of records already past the stream's retention.
func Trimmed(err error) bool { return Code(err) == "TrimmedDataAccessException" }

// ResourceNotFound reports a table, stream or shard that does not exist (yet, or any more).
func ResourceNotFound(err error) bool {
	var rnf *types.ResourceNotFoundException
	return errors.As(err, &rnf) || Code(err) == "ResourceNotFoundException"
}

// ConditionFailed reports a single write whose condition did not hold.
func ConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf) || Code(err) == "ConditionalCheckFailedException"
}

// ResourceInUse reports a table that is being created, updated or deleted already.
func ResourceInUse(err error) bool {
	var riu *types.ResourceInUseException
	return errors.As(err, &riu) || Code(err) == "ResourceInUseException"
}

// ConditionFailures reports whether err is a failed condition of conditional writes — an
// expected outcome, not a fault — and for a cancelled transaction which of its items
// failed. A transaction cancelled for any other reason (a conflict, throttling) is a
// fault for the caller to retry, and so is not ok.
func ConditionFailures(err error) (failed []int, ok bool) {
	if err == nil {
		return nil, false
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, true
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, false
	}
	for i, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "ConditionalCheckFailed":
			failed = append(failed, i)
		case "", "None":
		default:
			return nil, false
		}
	}
	return failed, len(failed) > 0
}

// StreamReadKind classifies a failed Streams call for a retry metric and log level, with
// the SDK's own checks (the ones its retryer uses): "throttled", "server", "timeout",
// "connection" or "other".
func StreamReadKind(err error) string {
	switch {
	case retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary:
		return "throttled"
	case Code(err) == "InternalServerError" || Code(err) == "InternalFailure" || Code(err) == "ServiceUnavailable":
		return "server"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case Code(err) != "":
		// Another answer of the service: its message is not a connection's state.
		return "other"
	// DynamoDB Local drops connections on larger responses (see DYNAMODB-LOCAL.md).
	case retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary:
		return "connection"
	}
	return "other"
}
