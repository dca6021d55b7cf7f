package streams

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// errLeaseLost means a conditional write found the lease held by someone else (or by a
// newer lease of ours): the shard must be let go without writing anything more.
var errLeaseLost = errors.New("lease lost")

// apiCode is the service's error code, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func isExpiredIterator(err error) bool { return apiCode(err) == "ExpiredIteratorException" }

func isTrimmed(err error) bool { return apiCode(err) == "TrimmedDataAccessException" }

func isResourceNotFound(err error) bool { return apiCode(err) == "ResourceNotFoundException" }

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf) || apiCode(err) == "ConditionalCheckFailedException"
}

func isResourceInUse(err error) bool {
	var riu *types.ResourceInUseException
	return errors.As(err, &riu) || apiCode(err) == "ResourceInUseException"
}

// readErrorKind classifies a failed Streams call for the retry metric and log level, with
// the SDK's own checks (the ones its retryer uses). Everything but expiry, trimming and a
// missing resource is retried with backoff on the same iterator; the kinds only say why.
func readErrorKind(err error) string {
	switch {
	case retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary:
		return "throttled"
	case apiCode(err) == "InternalServerError" || apiCode(err) == "InternalFailure" || apiCode(err) == "ServiceUnavailable":
		return "server"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case apiCode(err) != "":
		// Another answer of the service: its message is not a connection's state.
		return "other"
	// DynamoDB Local drops connections on larger responses (see DYNAMODB-LOCAL.md).
	case retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary:
		return "connection"
	}
	return "other"
}
