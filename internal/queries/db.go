package queries

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/dynamo"
)

// DB is the part of DynamoDB the read side uses. It holds only reads, so the compiler keeps
// this package from ever writing.
type DB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	// Scan reads the access report (asof.Report).
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

// storageRetryAfter is what a client is told to wait when DynamoDB cannot answer.
const storageRetryAfter = 2 * time.Second

// storageError classifies an SDK error through internal/dynamo, the one place that knows
// the SDK's error types.
func storageError(err error) error { return dynamo.TranslateRead(err) }
