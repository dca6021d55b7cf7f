package scim_test

import (
	"context"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// dbCount counts the calls the service makes to DynamoDB (Local) and the items they read:
// a wrapper around the real client, as SDK middleware.
type dbCount struct {
	mu    sync.Mutex
	calls map[string]int
	items int
	// counted are the items COUNT Queries read without returning them.
	counted int
}

func newDBCount() *dbCount { return &dbCount{calls: map[string]int{}} }

// register adds the counter to a client's middleware stack (dynamodb.Options.APIOptions).
func (c *dbCount) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("dbCount",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			c.record(awsmiddleware.GetOperationName(ctx), out.Result)
			return out, md, err
		}), middleware.After)
}

func (c *dbCount) record(op string, result any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
	switch r := result.(type) {
	case *dynamodb.GetItemOutput:
		if r.Item != nil {
			c.items++
		}
	case *dynamodb.QueryOutput:
		c.items += len(r.Items)
		if len(r.Items) == 0 {
			c.counted += int(r.ScannedCount)
		}
	case *dynamodb.ScanOutput:
		c.items += len(r.Items)
	case *dynamodb.BatchGetItemOutput:
		for _, items := range r.Responses {
			c.items += len(items)
		}
	case *dynamodb.TransactGetItemsOutput:
		for _, it := range r.Responses {
			if it.Item != nil {
				c.items++
			}
		}
	}
}

// snapshot is what was counted so far.
func (c *dbCount) snapshot() (map[string]int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := make(map[string]int, len(c.calls))
	for k, v := range c.calls {
		calls[k] = v
	}
	return calls, c.items
}

// since is what was counted after an earlier snapshot.
func (c *dbCount) since(calls map[string]int, items int) (map[string]int, int) {
	now, nowItems := c.snapshot()
	for k, v := range calls {
		now[k] -= v
		if now[k] == 0 {
			delete(now, k)
		}
	}
	return now, nowItems - items
}

// countedSoFar are the items COUNT Queries read so far.
func (c *dbCount) countedSoFar() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counted
}
