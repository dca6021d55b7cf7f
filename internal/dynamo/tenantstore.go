package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/commands"
)

var _ commands.TenantStore = (*TenantStore)(nil)

// TenantStore provisions tenants for the command side: their rows and tables.
type TenantStore struct {
	db       *dynamodb.Client
	names    Names
	tenants  *Tenants
	settings TableSettings
	// mappings, in Lambda mode, feed the tenant's stream to the consumer functions.
	mappings StreamMappings
	// tableQuota is the stage's tables at most (WithTableQuota; 0: none).
	tableQuota int
}

// NewTenantStore is the command side's tenant store; its tenants' tables get no settings
// until WithTableSettings.
func NewTenantStore(db *dynamodb.Client, names Names) *TenantStore {
	return &TenantStore{db: db, names: names, tenants: NewTenants(db, names)}
}

// WithTableSettings gives every table the store creates the stage's settings.
func (s *TenantStore) WithTableSettings(set TableSettings) *TenantStore {
	s.settings = set
	return s
}

// EnsureSharedTables prepares the tables of the command side that every tenant shares
// (Config, idempotency, SCIM tokens, the erasure ledger), and the stream-lease table, where
// a command writes the expiry due index (expiries.go).
func EnsureSharedTables(ctx context.Context, db *dynamodb.Client, names Names, set TableSettings) error {
	return EnsureSystemTables(ctx, db, set, ConfigTable(names.Config()), IdempotencyTable(names.Idempotency()), ScimTokensTable(names.ScimTokens()), ErasuresTable(names.Erasures()),
		StreamTables(names.StreamLeases(), names.DeadLetters())[0])
}

// GetTenant reads a tenant row.
func (s *TenantStore) GetTenant(ctx context.Context, system, tenant string) (commands.TenantRecord, error) {
	row, err := s.tenants.Get(ctx, system, tenant)
	if err != nil {
		return commands.TenantRecord{}, err
	}
	return toRecord(row), nil
}

func toRecord(row Tenant) commands.TenantRecord {
	rec := commands.TenantRecord{System: row.SystemID, ID: row.TenantID, Status: row.Status, RowVersion: row.RowVersion}
	rec.CreatedAt, _ = ParseTime(row.CreatedAt)
	rec.UpdatedAt, _ = ParseTime(row.UpdatedAt)
	if row.KeycloakURL != "" {
		rec.Keycloak = &commands.KeycloakSettings{
			URL: row.KeycloakURL, Realm: row.KeycloakRealm, ClientID: row.ClientID,
			ClientSecret: row.ClientSecret, OnDelete: row.OnDelete,
		}
	}
	return rec
}

// PutTenant creates a row (expected 0) or updates the fields the command side owns,
// leaving the read-table names (which a replay switches) alone.
func (s *TenantStore) PutTenant(ctx context.Context, rec commands.TenantRecord, expected int64) error {
	var k commands.KeycloakSettings
	if rec.Keycloak != nil {
		k = *rec.Keycloak
	}
	if expected == 0 {
		row := Tenant{
			SystemID: rec.System, TenantID: rec.ID, Status: rec.Status, SSOType: "keycloak",
			KeycloakURL: k.URL, KeycloakRealm: k.Realm, ClientID: k.ClientID, ClientSecret: k.ClientSecret, OnDelete: k.OnDelete,
			CommandsTable:   s.names.Commands(rec.System, rec.ID),
			UsersTable:      s.names.Users(rec.System, rec.ID, 0),
			ActivitiesTable: s.names.Activities(rec.System, rec.ID, 0),
			CreatedAt:       FormatTime(rec.CreatedAt),
		}
		err := s.tenants.Put(ctx, row, 0)
		if errors.Is(err, ErrStale) {
			return commands.ErrVersionConflict
		}
		return err
	}
	set := "SET #st = :st, updated_at = :u, row_version = :next"
	values := map[string]types.AttributeValue{
		":st": str(rec.Status), ":u": str(FormatTime(rec.UpdatedAt)), ":next": num(expected + 1), ":v": num(expected),
	}
	if rec.Keycloak != nil {
		set += ", keycloak_url = :url, keycloak_realm = :realm, client_id = :cid, client_secret = :cs, on_delete = :od"
		values[":url"], values[":realm"], values[":cid"] = str(k.URL), str(k.Realm), str(k.ClientID)
		values[":cs"], values[":od"] = str(k.ClientSecret), str(k.OnDelete)
	}
	update := types.Update{
		TableName:                 aws.String(s.names.Config()),
		Key:                       map[string]types.AttributeValue{"system_id": str(rec.System), "tenant_id": str(rec.ID)},
		UpdateExpression:          aws.String(set),
		ConditionExpression:       aws.String("row_version = :v"),
		ExpressionAttributeNames:  map[string]string{"#st": "status"},
		ExpressionAttributeValues: values,
	}
	if rec.Status != commands.TenantActive {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: update.TableName, Key: update.Key, UpdateExpression: update.UpdateExpression,
			ConditionExpression: update.ConditionExpression, ExpressionAttributeNames: update.ExpressionAttributeNames,
			ExpressionAttributeValues: update.ExpressionAttributeValues,
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return commands.ErrVersionConflict
		}
		if err != nil {
			return fmt.Errorf("update tenant %s/%s: %w", rec.System, rec.ID, translate(err))
		}
		return nil
	}
	// An active tenant is one the stream consumers follow: the marker moves with it, in
	// the same transaction, so they never miss it.
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &update}, {Update: s.tenants.markerUpdate()},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		return commands.ErrVersionConflict
	}
	if err != nil {
		return fmt.Errorf("update tenant %s/%s: %w", rec.System, rec.ID, translate(err))
	}
	return nil
}

func (s *TenantStore) tableSpecs(system, tenant string) []TableSpec {
	return []TableSpec{
		CommandsTable(s.names.Commands(system, tenant)).With(s.settings, system, tenant),
		UsersTable(s.names.Users(system, tenant, 0)).With(s.settings, system, tenant),
		ActivitiesTable(s.names.Activities(system, tenant, 0)).With(s.settings, system, tenant),
	}
}

// CreateTables asks for the tenant's write table and first-generation read tables without
// waiting for them; apperr table_quota_exceeded when the account's table quota is reached.
func (s *TenantStore) CreateTables(ctx context.Context, system, tenant string) error {
	if err := s.checkTableQuota(ctx, system, tenant); err != nil {
		return err
	}
	for _, spec := range s.tableSpecs(system, tenant) {
		if err := CreateTable(ctx, s.db, spec); err != nil {
			return err
		}
	}
	return nil
}

// EnsureTables creates the tenant's write table and its first-generation read tables,
// waits until they are ready, and notes the write table's stream in the tenant row.
func (s *TenantStore) EnsureTables(ctx context.Context, system, tenant string) error {
	for _, spec := range s.tableSpecs(system, tenant) {
		if err := EnsureTable(ctx, s.db, spec); err != nil {
			return err
		}
	}
	if err := markMemberIndex(ctx, s.db, s.names.Commands(system, tenant)); err != nil {
		return err
	}
	if err := s.noteStream(ctx, system, tenant); err != nil {
		return err
	}
	if err := s.markAsOfCoverage(ctx, system, tenant); err != nil {
		return err
	}
	return s.ensureMappings(ctx, system, tenant)
}

// DropTenant undoes a provisioning that cannot finish: the incarnation of the tenant
// created at createdAt (a tenant dropped and provisioned again is another one, never
// touched). It first moves the row from provisioning to dropping, conditionally, so that no
// process finishes the tenant any more (a finish writes on the row version this moves on);
// then it deletes the tenant's tables (waiting out any still being created, and turning
// their deletion protection off on purpose), checking before each that the row is still
// this incarnation dropping, and then the row. A tenant that became active first, or was
// provisioned again, is left alone (ErrVersionConflict); one already dropping is dropped
// again (a drop interrupted by a stopped process is completed by the next).
func (s *TenantStore) DropTenant(ctx context.Context, system, tenant string, createdAt time.Time) error {
	key := map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)}
	created := str(FormatTime(createdAt))
	marked, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.names.Config()),
		Key:                       key,
		UpdateExpression:          aws.String("SET #st = :d, updated_at = :u, row_version = row_version + :one"),
		ConditionExpression:       aws.String("#st IN (:p, :d) AND created_at = :c"),
		ExpressionAttributeNames:  map[string]string{"#st": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(TenantProvisioning), ":d": str(TenantDropping), ":u": str(FormatTime(time.Now())), ":one": num(1), ":c": created},
		// The stream this incarnation noted, read in the same step that claims the row: a
		// drop that resumes late must not take the mappings of a newer incarnation.
		ReturnValues: types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if _, gerr := s.tenants.Get(ctx, system, tenant); apperr.KindOf(gerr) == apperr.KindNotFound {
			return nil // no row: nothing to drop
		}
		return commands.ErrVersionConflict
	}
	if err != nil {
		return fmt.Errorf("mark tenant %s/%s dropping: %w", system, tenant, translate(err))
	}
	// The incarnation's mappings go first: a mapping whose stream is gone would only fail
	// on AWS's side.
	if err := s.removeMappings(ctx, getS(marked.Attributes, "commands_stream_arn")); err != nil {
		return err
	}
	for _, spec := range s.tableSpecs(system, tenant) {
		// DeleteTable has no condition: make sure, right before it, that the tables are
		// still this incarnation's (another process may have finished the drop and the
		// tenant been provisioned again meanwhile).
		row, err := s.tenants.Get(ctx, system, tenant)
		if apperr.KindOf(err) == apperr.KindNotFound {
			return nil
		}
		if err != nil {
			return err
		}
		if row.Status != TenantDropping || row.CreatedAt != FormatTime(createdAt) {
			return nil
		}
		if err := DeleteTableSettled(ctx, s.db, aws.ToString(spec.Input.TableName)); err != nil {
			return err
		}
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.names.Config()),
		Key:                       key,
		ConditionExpression:       aws.String("#st = :d AND created_at = :c"),
		ExpressionAttributeNames:  map[string]string{"#st": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": str(TenantDropping), ":c": created},
	})
	if errors.As(err, &ccf) {
		return nil // dropped by another process meanwhile
	}
	if err != nil {
		return fmt.Errorf("delete tenant %s/%s: %w", system, tenant, translate(err))
	}
	return nil
}

// ProvisioningTenants lists the tenants whose provisioning, or its undoing, has not
// finished (for the command API to resume what a stopped process left): one Scan of
// `{p}_Config`, filtered.
func (s *TenantStore) ProvisioningTenants(ctx context.Context) ([]commands.TenantRecord, error) {
	rows, err := s.tenants.listWhere(ctx, "#st IN (:p, :d)", map[string]string{"#st": "status"},
		map[string]types.AttributeValue{":p": str(TenantProvisioning), ":d": str(TenantDropping)})
	if err != nil {
		return nil, err
	}
	out := make([]commands.TenantRecord, 0, len(rows))
	for _, r := range rows {
		out = append(out, toRecord(r))
	}
	return out, nil
}

// noteStream writes the write table's stream ARN into the tenant row. It leaves the row
// version alone: it is a fact about the table, not a change of the tenant, and the
// provisioning that follows writes on the version it read.
func (s *TenantStore) noteStream(ctx context.Context, system, tenant string) error {
	table := s.names.Commands(system, tenant)
	out, err := s.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe table %s: %w", table, translate(err))
	}
	arn := aws.ToString(out.Table.LatestStreamArn)
	if arn == "" {
		return fmt.Errorf("table %s has no stream", table)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.names.Config()),
		Key:                       map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)},
		UpdateExpression:          aws.String("SET commands_stream_arn = :a"),
		ConditionExpression:       aws.String("attribute_exists(system_id)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": str(arn)},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		// No tenant row to note it in (tables made without provisioning, as tests do):
		// the consumers find such a table by its name.
		return nil
	}
	if err != nil {
		return fmt.Errorf("note stream of %s/%s: %w", system, tenant, translate(err))
	}
	return nil
}

// markAsOfCoverage notes that the tenant's index of memberships at an instant
// (internal/asof, docs/history.md) is complete from the tenant's creation on: so it is
// while the tenant is still provisioning, since no command is accepted before it is
// active. A tenant made before the index existed never passes here again; a replay marks
// its rebuilt tables.
func (s *TenantStore) markAsOfCoverage(ctx context.Context, system, tenant string) error {
	rec, err := s.GetTenant(ctx, system, tenant)
	if err != nil || rec.Status != commands.TenantProvisioning {
		return nil // finished (or gone) meanwhile: its tables were marked when it was provisioning
	}
	return asof.MarkCoverage(ctx, s.db, s.names.Users(system, tenant, 0), asof.Millis(rec.CreatedAt))
}
