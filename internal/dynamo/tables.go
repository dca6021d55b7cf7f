package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/streams"
)

// Index names (docs/storage.md).
const (
	IndexUserEmail     = "UserEmailGSI"
	IndexUserGroup     = "UserGroupGSI"
	IndexUserUpdatedAt = "UserUpdatedAtGSI"
	IndexUserLastName  = "UserLastNameGSI"
	IndexUserFirstName = "UserFirstNameGSI"
	IndexGroupName     = "GroupNameGSI"
	IndexGroupMember   = "GroupMemberGSI"
	IndexActor         = "ActorGSI"
	IndexDay           = "DayGSI"
)

// Names gives the table names under one prefix.
type Names struct{ Prefix string }

func (n Names) Config() string      { return n.Prefix + "_Config" }
func (n Names) Idempotency() string { return n.Prefix + "_idempotency" }

// ScimTokens is the table of the tenants' SCIM tokens (their HMACs).
func (n Names) ScimTokens() string { return n.Prefix + "_scim_tokens" }

// StreamLeases is the table of shard leases and checkpoints, shared by every stream consumer.
func (n Names) StreamLeases() string { return n.Prefix + "_stream_leases" }

// DeadLetters is the table of records a stream consumer could not apply.
func (n Names) DeadLetters() string { return n.Prefix + "_dead_letters" }

// Commands is a tenant's write table.
func (n Names) Commands(system, tenant string) string {
	return fmt.Sprintf("%s_%s_%s_user_commands", n.Prefix, system, tenant)
}

// Users is a tenant's read table, generation gen (0 is the first; replays make new ones).
func (n Names) Users(system, tenant string, gen int) string {
	return withGeneration(fmt.Sprintf("%s_%s_%s_users", n.Prefix, system, tenant), gen)
}

// Activities is a tenant's activity table, generation gen.
func (n Names) Activities(system, tenant string, gen int) string {
	return withGeneration(fmt.Sprintf("%s_%s_%s_activities", n.Prefix, system, tenant), gen)
}

func withGeneration(name string, gen int) string {
	if gen == 0 {
		return name
	}
	return fmt.Sprintf("%s_r%d", name, gen)
}

// TableSpec is a table to create, with its TTL attribute if any.
type TableSpec struct {
	Input   *dynamodb.CreateTableInput
	TTLAttr string
	// PointInTimeRecovery is turned on once the table is active: CreateTable cannot.
	PointInTimeRecovery bool
}

// TableSettings are what every table ssodir creates gets besides its keys (docs/aws.md):
// point-in-time recovery, protection against deletion, encryption with the stage's key, and
// tags for cost allocation. The zero value asks for none of them (tests' own tables).
type TableSettings struct {
	// Stage is the value of the ssodir:stage tag; "" tags nothing (not even the tenant).
	Stage               string
	PointInTimeRecovery bool
	DeletionProtection  bool
	// KMSKey is the customer-managed KMS key (id, ARN or alias ARN) the table is encrypted
	// with; "" keeps DynamoDB's default (an AWS owned key).
	KMSKey string
	// SystemTablesExist says that the tables every tenant shares are made by the stage's
	// stack (deploy/), with these settings: a process checks that they are there and
	// creates none.
	SystemTablesExist bool
}

// Tag keys of ssodir's tables.
const (
	TagStage  = "ssodir:stage"
	TagSystem = "ssodir:system"
	TagTenant = "ssodir:tenant"
)

// With is the spec with the settings applied, for a table of the given tenant ("" and ""
// for the tables every tenant shares, which carry no system or tenant tag).
func (spec TableSpec) With(set TableSettings, system, tenant string) TableSpec {
	in := *spec.Input
	if set.DeletionProtection {
		in.DeletionProtectionEnabled = aws.Bool(true)
	}
	if set.KMSKey != "" {
		in.SSESpecification = &types.SSESpecification{Enabled: aws.Bool(true), SSEType: types.SSETypeKms, KMSMasterKeyId: aws.String(set.KMSKey)}
	}
	in.Tags = nil
	for _, t := range [][2]string{{TagStage, set.Stage}, {TagSystem, system}, {TagTenant, tenant}} {
		if t[1] != "" && set.Stage != "" {
			in.Tags = append(in.Tags, types.Tag{Key: aws.String(t[0]), Value: aws.String(t[1])})
		}
	}
	spec.Input = &in
	spec.PointInTimeRecovery = set.PointInTimeRecovery
	return spec
}

func s(name string) types.AttributeDefinition {
	return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
}

func key(hash, rng string) []types.KeySchemaElement {
	k := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
	if rng != "" {
		k = append(k, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
	}
	return k
}

func gsi(name, hash, rng string) types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName:  aws.String(name),
		KeySchema:  key(hash, rng),
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
	}
}

func table(name string, attrs []string, hash, rng string, gsis ...types.GlobalSecondaryIndex) *dynamodb.CreateTableInput {
	defs := make([]types.AttributeDefinition, 0, len(attrs))
	for _, a := range attrs {
		defs = append(defs, s(a))
	}
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		AttributeDefinitions: defs,
		KeySchema:            key(hash, rng),
		BillingMode:          types.BillingModePayPerRequest,
	}
	if len(gsis) > 0 {
		in.GlobalSecondaryIndexes = gsis
	}
	return in
}

// ConfigTable is `{p}_Config`.
func ConfigTable(name string) TableSpec {
	return TableSpec{Input: table(name, []string{"system_id", "tenant_id"}, "system_id", "tenant_id")}
}

// IdempotencyTable is `{p}_idempotency`.
func IdempotencyTable(name string) TableSpec {
	return TableSpec{Input: table(name, []string{"key"}, "key", ""), TTLAttr: "expires_at"}
}

// ScimTokensTable is `{p}_scim_tokens`.
func ScimTokensTable(name string) TableSpec {
	return TableSpec{Input: table(name, []string{"tenant", "token_id"}, "tenant", "token_id"), TTLAttr: "purge_at"}
}

// CommandsTable is a tenant's write table, with its stream.
func CommandsTable(name string) TableSpec {
	in := table(name, []string{"id", "sk", "email", "member_id"}, "id", "sk",
		gsi(IndexUserEmail, "email", "sk"),
		gsi(IndexUserGroup, "member_id", "id"))
	in.StreamSpecification = &types.StreamSpecification{
		StreamEnabled:  aws.Bool(true),
		StreamViewType: types.StreamViewTypeNewAndOldImages,
	}
	return TableSpec{Input: in, TTLAttr: "ttl"}
}

// UsersTable is a tenant's read table.
func UsersTable(name string) TableSpec {
	return TableSpec{Input: table(name,
		[]string{"id", "sk", "email", "member_id", "kind", "updated_sort", "last_name_sort", "first_name_sort", "name_sort", "member_of"},
		"id", "sk",
		gsi(IndexUserEmail, "email", "sk"),
		gsi(IndexUserGroup, "member_id", "id"),
		gsi(IndexUserUpdatedAt, "kind", "updated_sort"),
		gsi(IndexUserLastName, "kind", "last_name_sort"),
		gsi(IndexUserFirstName, "kind", "first_name_sort"),
		gsi(IndexGroupName, "kind", "name_sort"),
		gsi(IndexGroupMember, "member_of", "member_id"),
	)}
}

// ActivitiesTable is a tenant's activity feed.
func ActivitiesTable(name string) TableSpec {
	return TableSpec{Input: table(name, []string{"pk", "sk", "actor_pk", "day_pk"}, "pk", "sk",
		gsi(IndexActor, "actor_pk", "sk"),
		gsi(IndexDay, "day_pk", "sk"),
	), TTLAttr: "expires_at"}
}

// tableQuotaRetryAfter is what a client refused by the table quota is told to wait: the
// quota does not free itself, but a replay's grace period or an operator may free tables.
const tableQuotaRetryAfter = time.Minute

// tablesLaterRetryAfter is what a caller refused for now (ErrTablesLater) is told to wait.
const tablesLaterRetryAfter = 5 * time.Second

// CreateTable asks for the table unless it exists, without waiting for it to be ready.
// DynamoDB answers LimitExceededException both beyond the account's table quota and
// beyond its limit on concurrent table operations (250 creations of tables with secondary
// indexes at a time); they are told apart by the message (IsTableCountLimit): the first is
// apperr table_quota_exceeded, the second an apperr unavailable wrapping
// commands.ErrTablesLater, which the caller asks again for later. Neither is retried here
// (the SDK would count it as throttling); a transient fault (a connection reset, a 500) is,
// by the client's retryer, and a retry of a creation that did go through answers
// ResourceInUseException, which is success.
func CreateTable(ctx context.Context, db *dynamodb.Client, spec TableSpec) error {
	name := aws.ToString(spec.Input.TableName)
	_, err := db.CreateTable(ctx, spec.Input, withoutLimitRetries)
	var inUse *types.ResourceInUseException
	var limit *types.LimitExceededException
	switch {
	case err == nil || errors.As(err, &inUse):
		return nil
	case errors.As(err, &limit) && IsTableCountLimit(limit.ErrorMessage()):
		return fmt.Errorf("create table %s: %w", name, apperr.TableQuotaExceeded(err, tableQuotaRetryAfter))
	case errors.As(err, &limit):
		return fmt.Errorf("create table %s: %w", name, apperr.Unavailable(fmt.Errorf("%w: %w", commands.ErrTablesLater, err), tablesLaterRetryAfter))
	}
	return fmt.Errorf("create table %s: %w", name, translate(err))
}

// withoutLimitRetries keeps the client's retries for one call, except of a
// LimitExceededException: the SDK counts that as throttling and would retry it, while
// CreateTable tells the quota from "later" and its callers pace their own asks. A retryer
// that is not an aws.RetryerV2 (every retryer of the SDK is one) falls back to a single
// attempt.
func withoutLimitRetries(o *dynamodb.Options) {
	if r, ok := o.Retryer.(aws.RetryerV2); ok {
		o.Retryer = limitNotRetried{r}
		return
	}
	o.RetryMaxAttempts = 1
}

type limitNotRetried struct{ aws.RetryerV2 }

func (r limitNotRetried) IsErrorRetryable(err error) bool {
	var limit *types.LimitExceededException
	return !errors.As(err, &limit) && r.RetryerV2.IsErrorRetryable(err)
}

// IsTableCountLimit says whether a LimitExceededException's message is the account's
// table quota (a count of tables: "There is a limit of 256 tables per subscriber", "Only
// 2500 tables can be created in this region for this account") rather than its limit on
// concurrent operations ("Only 10 tables can be created, updated, or deleted
// simultaneously", "the maximum number of indexed tables that can be created
// simultaneously"). Only a message that names the count is the quota: anything else is
// taken as "later", since a burst wrongly undone loses a tenant, while a quota wrongly
// retried only stays provisioning (and the stage's table count, logged as "stage tables",
// warns before it).
func IsTableCountLimit(message string) bool {
	m := strings.ToLower(message)
	if strings.Contains(m, "simultaneous") || strings.Contains(m, "concurrent") || strings.Contains(m, "at a time") {
		return false
	}
	return strings.Contains(m, "tables per") || strings.Contains(m, "in this region") || strings.Contains(m, "for this account") ||
		(strings.Contains(m, "limit of") && strings.Contains(m, "tables"))
}

// tablesLaterPause is the mean pause before asking again for a table DynamoDB refused for
// now; each pause is drawn between half and one and a half of it, so that a burst of
// provisionings spreads out instead of asking again all at once.
var tablesLaterPause = 2 * time.Second

// createTablePaced is CreateTable, asked again after a jittered pause while DynamoDB
// refuses for now (commands.ErrTablesLater), until ctx ends.
func createTablePaced(ctx context.Context, db *dynamodb.Client, spec TableSpec) error {
	for {
		err := CreateTable(ctx, db, spec)
		if !errors.Is(err, commands.ErrTablesLater) {
			return err
		}
		pause := tablesLaterPause/2 + time.Duration(rand.Int64N(int64(tablesLaterPause)+1))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
	}
}

// EnsureSystemTables prepares tables every tenant shares: EnsureTable for each spec with
// the settings applied or, when the stage's stack made them (SystemTablesExist), a check
// that each is there.
func EnsureSystemTables(ctx context.Context, db *dynamodb.Client, set TableSettings, specs ...TableSpec) error {
	for _, spec := range specs {
		if !set.SystemTablesExist {
			if err := EnsureTable(ctx, db, spec.With(set, "", "")); err != nil {
				return err
			}
			continue
		}
		name := aws.ToString(spec.Input.TableName)
		if _, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err != nil {
			return fmt.Errorf("table %s, which the stage's stack makes: %w", name, translate(err))
		}
	}
	return nil
}

// StreamTables are the stream consumers' lease and dead-letter tables.
func StreamTables(leases, deadLetters string) []TableSpec {
	// Attempt counts in the dead-letter table expire (internal/deadletters, "expires_at").
	return []TableSpec{{Input: streams.LeaseTableInput(leases)}, {Input: streams.DeadLetterTableInput(deadLetters), TTLAttr: "expires_at"}}
}

// EnsureTable creates the table unless it exists, waits until it is active and enables its
// TTL and, when the spec asks for it, point-in-time recovery. It is idempotent, so an
// interrupted provisioning can simply run again. A creation DynamoDB refuses for now (its
// limit on concurrent table operations) is asked for again, paced, until ctx ends.
func EnsureTable(ctx context.Context, db *dynamodb.Client, spec TableSpec) error {
	if err := createTablePaced(ctx, db, spec); err != nil {
		return err
	}
	name := aws.ToString(spec.Input.TableName)
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 200 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 5*time.Minute); err != nil {
		return fmt.Errorf("wait for table %s: %w", name, translate(err))
	}
	if spec.PointInTimeRecovery {
		if err := ensureBackups(ctx, db, name); err != nil {
			return err
		}
	}
	if spec.TTLAttr == "" {
		return nil
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("describe ttl of %s: %w", name, translate(err))
	}
	if d := ttl.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(spec.TTLAttr), Enabled: aws.Bool(true)},
	})
	if err != nil {
		// Another process ensuring the same table (two command APIs finishing one
		// provisioning) may have enabled it in between: DynamoDB then refuses ours.
		if again, derr := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)}); derr == nil {
			if d := again.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
				return nil
			}
		}
		return fmt.Errorf("enable ttl on %s: %w", name, translate(err))
	}
	return nil
}

// backupsRetry is the pause before asking again for point-in-time recovery on a table
// whose backups are not available yet (a table just created).
const backupsRetry = 2 * time.Second

// ensureBackups turns point-in-time recovery on unless it is on. It is checked on every
// EnsureTable, so a process stopped between creating a table and this call leaves no table
// without it once the provisioning is finished.
func ensureBackups(ctx context.Context, db *dynamodb.Client, name string) error {
	d, err := db.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("describe backups of %s: %w", name, translate(err))
	}
	if pitr := d.ContinuousBackupsDescription.PointInTimeRecoveryDescription; pitr != nil && pitr.PointInTimeRecoveryStatus == types.PointInTimeRecoveryStatusEnabled {
		return nil
	}
	for {
		_, err := db.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{
			TableName:                        aws.String(name),
			PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)},
		})
		var unavailable *types.ContinuousBackupsUnavailableException
		if !errors.As(err, &unavailable) {
			if err != nil {
				return fmt.Errorf("turn on point-in-time recovery of %s: %w", name, translate(err))
			}
			return nil
		}
		// A table just created: its backups are being set up. AWS asks to try again later.
		select {
		case <-ctx.Done():
			return fmt.Errorf("turn on point-in-time recovery of %s: %w", name, translate(ctx.Err()))
		case <-time.After(backupsRetry):
		}
	}
}

// DeleteTableSettled deletes a table, first waiting for it to be ready when it is still
// being created (DynamoDB refuses to delete a CREATING table with ResourceInUseException).
// A missing table is not an error.
func DeleteTableSettled(ctx context.Context, db *dynamodb.Client, name string) error {
	for {
		err := DeleteTable(ctx, db, name)
		var inUse *types.ResourceInUseException
		if !errors.As(err, &inUse) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete table %s: %w", name, translate(ctx.Err()))
		case <-time.After(time.Second):
		}
	}
}

// DeleteTable deletes a table on purpose (a tenant dropped, a replay's old generation):
// it turns the table's deletion protection off first, which guards it against everything
// but this call. A missing table is not an error.
func DeleteTable(ctx context.Context, db *dynamodb.Client, name string) error {
	var nf *types.ResourceNotFoundException
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("describe table %s: %w", name, translate(err))
	}
	if aws.ToBool(d.Table.DeletionProtectionEnabled) {
		_, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(name), DeletionProtectionEnabled: aws.Bool(false)})
		if errors.As(err, &nf) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("turn off deletion protection of %s: %w", name, translate(err))
		}
	}
	_, err = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("delete table %s: %w", name, translate(err))
	}
	return nil
}
