package projections

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestConditionFailed: only a failed condition of the projector's own writes counts as
// "already newer"; a transaction cancelled for any other reason must reach the caller so
// that it retries.
func TestConditionFailed(t *testing.T) {
	cancelled := func(codes ...string) error {
		reasons := make([]types.CancellationReason, len(codes))
		for i, c := range codes {
			reasons[i] = types.CancellationReason{Code: aws.String(c)}
		}
		return fmt.Errorf("transact: %w", &types.TransactionCanceledException{CancellationReasons: reasons})
	}
	for _, tc := range []struct {
		name   string
		err    error
		failed []int
		ok     bool
	}{
		{"no error is no failed condition", nil, nil, false},
		{"a wrapped ConditionalCheckFailedException is one", fmt.Errorf("put: %w", &types.ConditionalCheckFailedException{}), nil, true},
		{"a transaction cancelled by a guard names it", cancelled("None", "ConditionalCheckFailed", "None"), []int{1}, true},
		{"a transaction cancelled by its put and a guard names both", cancelled("ConditionalCheckFailed", "None", "ConditionalCheckFailed"), []int{0, 2}, true},
		{"a transaction cancelled by a conflict is a fault", cancelled("TransactionConflict", "None", "None"), nil, false},
		{"a failed condition next to throttling is a fault", cancelled("ConditionalCheckFailed", "ThrottlingError", "None"), nil, false},
		{"any other error is a fault", errors.New("connection reset"), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failed, ok := conditionFailed(tc.err)
			if ok != tc.ok || !slices.Equal(failed, tc.failed) {
				t.Errorf("got %v %v, want %v %v", failed, ok, tc.failed, tc.ok)
			}
		})
	}
}
