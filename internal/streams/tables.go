package streams

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of the lease table. One partition per consumer holds a row per
// (stream, shard) and a heartbeat row per live process, so one Query shows a process the
// whole picture it balances on.
const (
	attrConsumer   = "consumer"
	attrLeaseKey   = "lease_key" // "shard#<stream arn>#<shard id>" | "owner#<owner id>"
	attrStreamARN  = "stream_arn"
	attrShardID    = "shard_id"
	attrParent     = "parent_shard_id"
	attrSystem     = "system_id"
	attrTenant     = "tenant_id"
	attrTable      = "table_name"
	attrOwner      = "lease_owner"
	attrToken      = "lease_token"
	attrHandover   = "handover_to"
	attrCheckpoint = "checkpoint"
	attrGapAfter   = "gap_after"
	attrGapAt      = "gap_at"
	attrUpdatedAt  = "updated_at"
	attrOwnerID    = "owner_id"
	attrHeartbeat  = "heartbeat"
	attrBeatAt     = "heartbeat_at"
	attrAddress    = "address"
	attrAsks       = "handover_asks"
	attrReleases   = "releases"
)

// attrEntryKey is the sort key of the dead-letter table (internal/deadletters), which has
// the lease table's partition key.
const attrEntryKey = "entry_key"

// TableAPI is what EnsureTables needs; *dynamodb.Client implements it.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// EnsureTables creates the lease table and the dead-letter table if they do not exist
// (on-demand capacity) and waits until both are active. It is safe to call from every
// process at every start.
func EnsureTables(ctx context.Context, db TableAPI, leaseTable, deadLetterTable string) error {
	if err := ensureTable(ctx, db, leaseTable, attrConsumer, attrLeaseKey); err != nil {
		return err
	}
	return ensureTable(ctx, db, deadLetterTable, attrConsumer, attrEntryKey)
}

// LeaseTableInput is the lease table's definition (on-demand capacity), for a creator that
// adds the stage's table settings (internal/dynamo).
func LeaseTableInput(name string) *dynamodb.CreateTableInput {
	return tableInput(name, attrConsumer, attrLeaseKey)
}

// DeadLetterTableInput is the dead-letter table's definition.
func DeadLetterTableInput(name string) *dynamodb.CreateTableInput {
	return tableInput(name, attrConsumer, attrEntryKey)
}

func tableInput(name, pk, sk string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(pk), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(sk), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange},
		},
	}
}

func ensureTable(ctx context.Context, db TableAPI, name, pk, sk string) error {
	_, err := db.CreateTable(ctx, tableInput(name, pk, sk))
	if err != nil && !isResourceInUse(err) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	// Another process may have created it a moment ago and it may still be CREATING.
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 200 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 5*time.Minute); err != nil {
		return fmt.Errorf("wait for table %s: %w", name, err)
	}
	return nil
}
