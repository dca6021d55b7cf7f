package sdkerr_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	streamstypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

func TestClassifiersReadTheTypeOrTheCode(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("call: %w", err) }
	cases := []struct {
		name string
		is   func(error) bool
		err  error
		want bool
	}{
		{"a DynamoDB missing table", sdkerr.ResourceNotFound, wrapped(&types.ResourceNotFoundException{}), true},
		{"a Streams missing shard", sdkerr.ResourceNotFound, wrapped(&streamstypes.ResourceNotFoundException{}), true},
		{"a missing resource named only by its code", sdkerr.ResourceNotFound, &smithy.GenericAPIError{Code: "ResourceNotFoundException"}, true},
		{"a failed condition is not a missing table", sdkerr.ResourceNotFound, &types.ConditionalCheckFailedException{}, false},
		{"a failed condition", sdkerr.ConditionFailed, wrapped(&types.ConditionalCheckFailedException{}), true},
		{"a cancelled transaction is not a single failed condition", sdkerr.ConditionFailed, &types.TransactionCanceledException{}, false},
		{"a table in use", sdkerr.ResourceInUse, wrapped(&types.ResourceInUseException{}), true},
		{"an expired iterator", sdkerr.ExpiredIterator, wrapped(&streamstypes.ExpiredIteratorException{}), true},
		{"trimmed records", sdkerr.Trimmed, wrapped(&streamstypes.TrimmedDataAccessException{}), true},
		{"trimmed records are not an expired iterator", sdkerr.ExpiredIterator, &streamstypes.TrimmedDataAccessException{}, false},
		{"a plain error", sdkerr.ResourceNotFound, io.EOF, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.is(c.err); got != c.want {
				t.Errorf("%v: got %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func TestConditionFailuresNamesTheFailedItemsOfATransaction(t *testing.T) {
	reason := func(code string) types.CancellationReason { return types.CancellationReason{Code: aws.String(code)} }
	cases := []struct {
		name   string
		err    error
		failed []int
		ok     bool
	}{
		{"no error", nil, nil, false},
		{"a single failed condition", &types.ConditionalCheckFailedException{}, nil, true},
		{"items 1 and 2 failed their conditions", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{reason("None"), reason("ConditionalCheckFailed"), reason("ConditionalCheckFailed")}}, []int{1, 2}, true},
		{"a conflict is a fault, not a failed condition", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{reason("ConditionalCheckFailed"), reason("TransactionConflict")}}, nil, false},
		{"a cancellation without failed conditions", &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{reason("None")}}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			failed, ok := sdkerr.ConditionFailures(c.err)
			if ok != c.ok || fmt.Sprint(failed) != fmt.Sprint(c.failed) {
				t.Errorf("got %v %v, want %v %v", failed, ok, c.failed, c.ok)
			}
		})
	}
}

func TestStreamReadKind(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"throttling", &streamstypes.LimitExceededException{}, "throttled"},
		{"a server fault", &smithy.GenericAPIError{Code: "InternalServerError"}, "server"},
		{"a deadline", fmt.Errorf("get records: %w", context.DeadlineExceeded), "timeout"},
		{"a dropped connection", &smithyhttp.RequestSendError{Err: io.EOF}, "connection"},
		{"another answer of the service", &smithy.GenericAPIError{Code: "ValidationException", Message: "connection reset"}, "other"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sdkerr.StreamReadKind(c.err); got != c.want {
				t.Errorf("%v: %q, want %q", c.err, got, c.want)
			}
		})
	}
}
