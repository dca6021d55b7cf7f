package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
)

// Tenant statuses.
const (
	TenantProvisioning = "provisioning"
	TenantActive       = "active"
	// TenantDropping marks a provisioning being undone (TenantStore.DropTenant): nothing
	// finishes it any more; its tables and then its row are deleted.
	TenantDropping = "dropping"
)

// Tenant is a tenant's row in `{p}_Config`.
type Tenant struct {
	SystemID      string `dynamodbav:"system_id"`
	TenantID      string `dynamodbav:"tenant_id"`
	Status        string `dynamodbav:"status"`
	SSOType       string `dynamodbav:"sso_type"`
	KeycloakURL   string `dynamodbav:"keycloak_url,omitempty"`
	KeycloakRealm string `dynamodbav:"keycloak_realm,omitempty"`
	ClientID      string `dynamodbav:"client_id,omitempty"`
	// ClientSecret is the ciphertext of the Keycloak client secret.
	ClientSecret  string `dynamodbav:"client_secret,omitempty"`
	OnDelete      string `dynamodbav:"on_delete,omitempty"`
	CommandsTable string `dynamodbav:"commands_table"`
	// CommandsStreamARN is the write table's stream, noted at provisioning so that stream
	// consumers need no ListStreams call (limited per account) to find it.
	CommandsStreamARN string `dynamodbav:"commands_stream_arn,omitempty"`
	UsersTable        string `dynamodbav:"users_table"`
	ActivitiesTable   string `dynamodbav:"activities_table"`
	// NextUsersTable and NextActivitiesTable are set while a replay builds a new
	// generation: the projector writes into them as well, so nothing is lost before the
	// switch.
	NextUsersTable      string `dynamodbav:"next_users_table,omitempty"`
	NextActivitiesTable string `dynamodbav:"next_activities_table,omitempty"`
	// Generation counts the read-table generations a replay has built.
	Generation   int    `dynamodbav:"generation"`
	ReplayNeeded bool   `dynamodbav:"replay_needed,omitempty"`
	ReplayReason string `dynamodbav:"replay_reason,omitempty"`
	CreatedAt    string `dynamodbav:"created_at"`
	UpdatedAt    string `dynamodbav:"updated_at"`
	RowVersion   int64  `dynamodbav:"row_version"`
}

// ItemGetter is the one call reading a tenant row needs: *dynamodb.Client has it, and so
// has the query API's narrower client.
type ItemGetter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// TenantReader reads tenant rows and the tenant-list marker; it is the read half of
// Tenants, for the processes that only read them.
type TenantReader struct {
	get   ItemGetter
	table string
}

// NewTenantReader reads the tenant rows of `{p}_Config` through db.
func NewTenantReader(db ItemGetter, names Names) *TenantReader {
	return &TenantReader{get: db, table: names.Config()}
}

// Tenants reads and writes tenant rows.
type Tenants struct {
	*TenantReader
	db    *dynamodb.Client
	table string
}

// NewTenants is the tenant store over the `{p}_Config` table.
func NewTenants(db *dynamodb.Client, names Names) *Tenants {
	return &Tenants{TenantReader: NewTenantReader(db, names), db: db, table: names.Config()}
}

// Get reads a tenant row (strongly consistent); apperr not_found when there is none.
func (t *TenantReader) Get(ctx context.Context, system, tenant string) (Tenant, error) {
	out, err := t.get.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(t.table),
		Key:            map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Tenant{}, fmt.Errorf("get tenant %s/%s: %w", system, tenant, TranslateRead(err))
	}
	if out.Item == nil {
		return Tenant{}, apperr.NotFound("tenant")
	}
	return DecodeTenant(out.Item)
}

// DecodeTenant is a tenant row as read from `{p}_Config` (a Query's or Scan's item).
func DecodeTenant(item map[string]types.AttributeValue) (Tenant, error) {
	var row Tenant
	if err := attributevalue.UnmarshalMap(item, &row); err != nil {
		return Tenant{}, fmt.Errorf("decode tenant row: %w", err)
	}
	return row, nil
}

// The marker row of `{p}_Config` (not a tenant): its counter moves whenever a tenant
// becomes active or its stream is noted, so that readers of the tenant list (the stream
// consumers' Source) read one small item per poll and Scan only when it moved.
const (
	markerSystem = "#ssodir"
	markerTenant = "#tenants"
)

func markerKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"system_id": str(markerSystem), "tenant_id": str(markerTenant)}
}

// ListVersion reads the marker's counter (strongly consistent; 0 before the first change).
func (t *TenantReader) ListVersion(ctx context.Context) (int64, error) {
	out, err := t.get.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(t.table), Key: markerKey(), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("read tenant list version: %w", TranslateRead(err))
	}
	var v int64
	if n, ok := out.Item["version"].(*types.AttributeValueMemberN); ok {
		v, _ = strconv.ParseInt(n.Value, 10, 64)
	}
	return v, nil
}

// markerUpdate is the marker's bump, alone or in a transaction.
func (t *Tenants) markerUpdate() *types.Update {
	return &types.Update{
		TableName: aws.String(t.table), Key: markerKey(),
		UpdateExpression:          aws.String("ADD version :one SET updated_at = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":u": str(FormatTime(time.Now()))},
	}
}

// List pages through every tenant row. The Config table holds one small row per tenant,
// so a Scan here is the discovery mechanism DESIGN.md prescribes, not a list endpoint.
func (t *Tenants) List(ctx context.Context) ([]Tenant, error) {
	return t.listWhere(ctx, "", nil, nil)
}

// listWhere scans the tenant rows, filtered by an expression when one is given.
func (t *Tenants) listWhere(ctx context.Context, filter string, names map[string]string, values map[string]types.AttributeValue) ([]Tenant, error) {
	var out []Tenant
	in := &dynamodb.ScanInput{TableName: aws.String(t.table), ConsistentRead: aws.Bool(true)}
	if filter != "" {
		in.FilterExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = aws.String(filter), names, values
	}
	p := dynamodb.NewScanPaginator(t.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list tenants: %w", translate(err))
		}
		var rows []Tenant
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &rows); err != nil {
			return nil, fmt.Errorf("decode tenants: %w", err)
		}
		for _, r := range rows {
			if r.SystemID != markerSystem {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// Put writes a tenant row, conditioned on the row version it was read at (0: absent). A
// new row is a tenant being provisioned, which no reader follows yet; a rewritten row moves
// the tenant-list marker in the same transaction, so that readers caching rows see it.
func (t *Tenants) Put(ctx context.Context, row Tenant, expectedRowVersion int64) error {
	row.RowVersion = expectedRowVersion + 1
	row.UpdatedAt = FormatTime(time.Now())
	item, err := attributevalue.MarshalMap(row)
	if err != nil {
		return fmt.Errorf("encode tenant %s/%s: %w", row.SystemID, row.TenantID, err)
	}
	if expectedRowVersion == 0 {
		_, err = t.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t.table), Item: item,
			ConditionExpression: aws.String("attribute_not_exists(system_id)")})
	} else {
		_, err = t.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(t.table), Item: item, ConditionExpression: aws.String("row_version = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(expectedRowVersion)}}},
			{Update: t.markerUpdate()},
		}})
	}
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	if errors.As(err, &ccf) || (errors.As(err, &tce) && len(tce.CancellationReasons) > 0 &&
		aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed") {
		return ErrStale
	}
	if err != nil {
		return fmt.Errorf("put tenant %s/%s: %w", row.SystemID, row.TenantID, translate(err))
	}
	return nil
}

// ErrStale reports a conditional write that lost to a concurrent one; reload and retry.
var ErrStale = errors.New("stale: changed concurrently")

// MarkReplayNeeded flags a tenant whose stream checkpoint fell behind retention.
func (t *Tenants) MarkReplayNeeded(ctx context.Context, system, tenant, reason string) error {
	_, err := t.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(t.table),
		Key:                 map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)},
		UpdateExpression:    aws.String("SET replay_needed = :t, replay_reason = :r, updated_at = :u ADD row_version :one"),
		ConditionExpression: aws.String("attribute_exists(system_id)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": boolean(true), ":r": str(reason), ":u": str(FormatTime(time.Now())), ":one": num(1),
		},
	})
	if err != nil {
		return fmt.Errorf("mark %s/%s for replay: %w", system, tenant, translate(err))
	}
	return nil
}
