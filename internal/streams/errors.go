package streams

import (
	"context"
	"errors"
	"strings"

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

// readErrorKind classifies a failed Streams call for the retry metric and log level.
// Everything but expiry, trimming and a missing resource is retried with backoff on the
// same iterator; the kinds only say why.
func readErrorKind(err error) string {
	switch code := apiCode(err); code {
	case "LimitExceededException", "ProvisionedThroughputExceededException",
		"ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException":
		return "throttled"
	case "InternalServerError", "InternalFailure", "ServiceUnavailable":
		return "server"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	// DynamoDB Local drops connections on larger responses (see DYNAMODB-LOCAL.md).
	if strings.Contains(err.Error(), "use of closed network connection") ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "EOF") {
		return "connection"
	}
	return "other"
}
