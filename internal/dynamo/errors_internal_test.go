package dynamo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ssodir/ssodir/internal/apperr"
)

func TestTranslateClassifiesWithTheSDKsChecks(t *testing.T) {
	status := func(code int) error {
		return &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("no known error code")}
	}
	cases := []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"a dropped connection", &smithyhttp.RequestSendError{Err: io.EOF}, true},
		{"a refused dial", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true},
		{"an HTTP 503 without a known code", status(http.StatusServiceUnavailable), true},
		{"an HTTP 500 without a known code", status(http.StatusInternalServerError), true},
		{"throttling", &smithy.GenericAPIError{Code: "ThrottlingException", Message: "slow down"}, true},
		{"provisioned throughput exceeded", &types.ProvisionedThroughputExceededException{Message: new(string)}, true},
		{"the account's request limit", &types.RequestLimitExceeded{}, true},
		{"a transaction conflict", &types.TransactionConflictException{}, true},
		{"a request timeout code", &smithy.GenericAPIError{Code: "RequestTimeoutException"}, true},
		{"retries exhausted", &retry.MaxAttemptsError{Attempt: 3, Err: errors.New("x")}, true},
		{"a deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), true},

		// Messages that merely mention EOF or a reset are not faults to retry.
		{"a decoding error mentioning EOF", fmt.Errorf("decode item: %w", io.ErrUnexpectedEOF), false},
		{"a validation error mentioning a connection reset", &smithy.GenericAPIError{Code: "ValidationException", Message: "value 'connection reset' is invalid"}, false},
		{"a failed condition", &types.ConditionalCheckFailedException{}, false},
		{"an HTTP 400 without a known code", status(http.StatusBadRequest), false},
		{"a cancelled request", context.Canceled, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := apperr.KindOf(translate(c.err)) == apperr.KindUnavailable
			if got != c.unavailable {
				t.Errorf("%v: unavailable %v, want %v", c.err, got, c.unavailable)
			}
		})
	}
}
