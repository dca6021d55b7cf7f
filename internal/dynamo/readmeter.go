package dynamo

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ReadMeter wraps a client and counts its reads (GetItem, BatchGetItem, Query): the calls
// and the read capacity DynamoDB says they consumed. Tests and benchmarks use it to show
// what a piece of work reads.
type ReadMeter struct {
	*dynamodb.Client
	mu    sync.Mutex
	calls int
	units float64
}

func (c *ReadMeter) add(cc ...types.ConsumedCapacity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	for _, x := range cc {
		c.units += aws.ToFloat64(x.CapacityUnits)
	}
}

// Take returns the reads counted since the last Take, and starts counting again.
func (c *ReadMeter) Take() (calls int, units float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls, units, c.calls, c.units = c.calls, c.units, 0, 0
	return calls, units
}

func (c *ReadMeter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.Client.GetItem(ctx, in, o...)
	if err == nil && out.ConsumedCapacity != nil {
		c.add(*out.ConsumedCapacity)
	} else {
		c.add()
	}
	return out, err
}

func (c *ReadMeter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.Client.BatchGetItem(ctx, in, o...)
	if err == nil {
		c.add(out.ConsumedCapacity...)
	} else {
		c.add()
	}
	return out, err
}

func (c *ReadMeter) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityTotal
	out, err := c.Client.Query(ctx, in, o...)
	if err == nil && out.ConsumedCapacity != nil {
		c.add(*out.ConsumedCapacity)
	} else {
		c.add()
	}
	return out, err
}
