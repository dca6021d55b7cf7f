package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

// throttlingClient is DynamoDB Local's client whose first n BatchWriteItem requests are
// throttled, as AWS may throttle them (DynamoDB Local never does).
func throttlingClient(t *testing.T, n int) *dynamodb.Client {
	t.Helper()
	var mu sync.Mutex
	mw := middleware.InitializeMiddlewareFunc("throttle", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		if awsmiddleware.GetOperationName(ctx) == "BatchWriteItem" {
			mu.Lock()
			throttle := n > 0
			n--
			mu.Unlock()
			if throttle {
				return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate of requests exceeds the allowed throughput."}
			}
		}
		return next.HandleInitialize(ctx, in)
	})
	return dynamodb.NewFromConfig(dynamotest.Current(t).AWSConfig(), func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error { return s.Initialize.Add(mw, middleware.Before) })
	})
}

// The lease guard of a members change runs before every request, a retry of a throttled
// one included, so no retry goes out after the lease could have run out; a guard that
// finds the lease lost stops the writes.
func TestTheMembersLeaseGuardRunsBeforeEveryRetry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("guard")}
	db := throttlingClient(t, 2)
	plain := dynamotest.Current(t).DynamoDB()
	if err := dynamo.EnsureSharedTables(ctx, plain, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	if err := dynamo.NewTenantStore(plain, names).EnsureTables(ctx, "acme", "eu"); err != nil {
		t.Fatal(err)
	}
	store := dynamo.NewCommandStore(db, names, events.NewRegistry(), 0)
	tenant := commands.Tenant{System: "acme", ID: "eu"}
	w := commands.MembersWrite{GroupKey: "g1", Version: 2, At: time.Now()}
	for i := range 3 {
		w.Added = append(w.Added, events.Member{Username: fmt.Sprintf("u%d", i), UserID: fmt.Sprintf("id-%d", i), MembershipRev: 1})
	}
	var guards int
	guard := func(context.Context) error { guards++; return nil }
	if err := store.WriteMembers(ctx, tenant, w, guard); err != nil {
		t.Fatal(err)
	}
	// Two phases of one request each, the first throttled twice: 3 + 1 requests.
	if guards != 4 {
		t.Errorf("guard ran %d times for 4 requests (2 of them retries)", guards)
	}

	lost := errors.New("lease lost")
	db2 := throttlingClient(t, 1)
	store = dynamo.NewCommandStore(db2, names, events.NewRegistry(), 0)
	calls := 0
	err := store.WriteMembers(ctx, tenant, w, func(context.Context) error {
		calls++
		if calls > 1 {
			return lost
		}
		return nil
	})
	if !errors.Is(err, lost) || calls != 2 {
		t.Errorf("write with the lease lost before the retry: %v after %d guards, want the guard's error at the retry", err, calls)
	}
}
