package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// KeycloakSyncStatus is `{p}_keycloak_sync_status`: one row per tenant with what
// keycloak-sync last did for it, shared by every keycloak-sync process and read by
// `keycloak-sync status`.
func (n Names) KeycloakSyncStatus() string { return n.Prefix + "_keycloak_sync_status" }

// KeycloakSyncStatusTable is the spec of that table (pk system_id, sk tenant_id).
func KeycloakSyncStatusTable(name string) TableSpec {
	return TableSpec{Input: table(name, []string{"system_id", "tenant_id"}, "system_id", "tenant_id")}
}

// SyncStatus is a tenant's row in `{p}_keycloak_sync_status`. Each writer sets only its
// own fields (reconcile results, or parking), so processes never overwrite each other's.
type SyncStatus struct {
	SystemID string `dynamodbav:"system_id"`
	TenantID string `dynamodbav:"tenant_id"`

	// LastReconcileAt is when the last reconcile ended, LastSuccessAt when one last
	// succeeded; LastError is the last one's error, empty after a success.
	LastReconcileAt string `dynamodbav:"last_reconcile_at,omitempty"`
	LastSuccessAt   string `dynamodbav:"last_success_at,omitempty"`
	LastError       string `dynamodbav:"last_error,omitempty"`
	// DriftFound is the number of differences the last reconcile planned, DriftRepaired
	// those it applied, Stale those dropped because the directory had moved on, and
	// Conflicts those it cannot fix on its own.
	DriftFound    int `dynamodbav:"drift_found"`
	DriftRepaired int `dynamodbav:"drift_repaired"`
	Stale         int `dynamodbav:"stale"`
	Conflicts     int `dynamodbav:"conflicts"`

	// Parked is set while the tenant's realm is failing and its records wait; ParkedSince
	// and ParkedReason say since when and why, ParkedBy which process saw it.
	Parked       bool   `dynamodbav:"parked"`
	ParkedSince  string `dynamodbav:"parked_since,omitempty"`
	ParkedReason string `dynamodbav:"parked_reason,omitempty"`
	ParkedBy     string `dynamodbav:"parked_by,omitempty"`
	// ParkedUntil is when the park lapses unless the process that parked renews it (each
	// failed probe does): a park whose process died stops counting then.
	ParkedUntil string `dynamodbav:"parked_until,omitempty"`

	// UsernameChanges is whether the realm lets usernames change (keycloak.UsernameChanges:
	// allowed, refused or unknown), as the last reconcile read it from the realm's settings.
	UsernameChanges string `dynamodbav:"username_changes,omitempty"`
}

// ReconcileOutcome is what one reconcile of a tenant found and did.
type ReconcileOutcome struct {
	At                                          time.Time
	Err                                         error
	DriftFound, DriftRepaired, Stale, Conflicts int
	// UsernameChanges is what the realm's settings say of renames ("" when not read).
	UsernameChanges string
}

// SyncStatuses reads and writes `{p}_keycloak_sync_status`.
type SyncStatuses struct {
	db    *dynamodb.Client
	table string
}

// NewSyncStatuses is the store over names.KeycloakSyncStatus().
func NewSyncStatuses(db *dynamodb.Client, names Names) *SyncStatuses {
	return &SyncStatuses{db: db, table: names.KeycloakSyncStatus()}
}

// Table is the store's table name.
func (s *SyncStatuses) Table() string { return s.table }

func (s *SyncStatuses) update(ctx context.Context, system, tenant, expr string, names map[string]string, values map[string]types.AttributeValue) error {
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)},
		UpdateExpression:          aws.String(expr),
		ExpressionAttributeValues: values,
	}
	if len(names) > 0 {
		in.ExpressionAttributeNames = names
	}
	if _, err := s.db.UpdateItem(ctx, in); err != nil {
		return fmt.Errorf("record keycloak sync status of %s/%s: %w", system, tenant, translate(err))
	}
	return nil
}

// RecordReconcile stores the outcome of a reconcile.
func (s *SyncStatuses) RecordReconcile(ctx context.Context, system, tenant string, o ReconcileOutcome) error {
	at := str(FormatTime(o.At))
	values := map[string]types.AttributeValue{
		":at": at, ":found": num(int64(o.DriftFound)), ":repaired": num(int64(o.DriftRepaired)),
		":stale": num(int64(o.Stale)), ":conflicts": num(int64(o.Conflicts)),
	}
	expr := "SET last_reconcile_at = :at, drift_found = :found, drift_repaired = :repaired, stale = :stale, conflicts = :conflicts"
	if o.UsernameChanges != "" {
		values[":uc"] = str(o.UsernameChanges)
		expr += ", username_changes = :uc"
	}
	if o.Err != nil {
		values[":err"] = str(truncateText(o.Err.Error(), 1000))
		expr += ", last_error = :err"
	} else {
		expr += ", last_success_at = :at REMOVE last_error"
	}
	return s.update(ctx, system, tenant, expr, nil, values)
}

// RecordParked stores that the tenant was parked (until `until` unless renewed) or resumed.
// A resume clears only a park of the same process.
func (s *SyncStatuses) RecordParked(ctx context.Context, system, tenant string, parked bool, since, until time.Time, reason, by string) error {
	if !parked {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.table),
			Key:                       map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)},
			UpdateExpression:          aws.String("SET parked = :f REMOVE parked_since, parked_reason, parked_by, parked_until"),
			ConditionExpression:       aws.String("attribute_not_exists(parked_by) OR parked_by = :by"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":f": boolean(false), ":by": str(by)},
		})
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) {
			return fmt.Errorf("record keycloak sync status of %s/%s: %w", system, tenant, translate(err))
		}
		return nil
	}
	return s.update(ctx, system, tenant, "SET parked = :t, parked_since = :since, parked_reason = :reason, parked_by = :by, parked_until = :until", nil,
		map[string]types.AttributeValue{":t": boolean(true), ":since": str(FormatTime(since)),
			":reason": str(truncateText(reason, 1000)), ":by": str(by), ":until": str(FormatTime(until))})
}

// ParkedNow reports whether the row says the tenant is parked now (by a process whose
// park has not lapsed).
func (r SyncStatus) ParkedNow(now time.Time) bool {
	if !r.Parked {
		return false
	}
	until, err := ParseTime(r.ParkedUntil)
	return err == nil && now.Before(until)
}

// List is every tenant's status row.
func (s *SyncStatuses) List(ctx context.Context) ([]SyncStatus, error) {
	var out []SyncStatus
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{TableName: aws.String(s.table)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list keycloak sync status: %w", translate(err))
		}
		var rows []SyncStatus
		if err := attributevalue.UnmarshalListOfMaps(page.Items, &rows); err != nil {
			return nil, fmt.Errorf("decode keycloak sync status: %w", err)
		}
		for _, r := range rows {
			if r.SystemID != roundSystem {
				out = append(out, r)
			}
		}
	}
	return out, nil
}

func truncateText(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// ClaimReconcile lets one keycloak-sync process of many reconcile a tenant in a round: it
// records owner as the tenant's reconciler until `until`, unless another process holds an
// unexpired claim, and reports whether the claim is ours.
func (s *SyncStatuses) ClaimReconcile(ctx context.Context, system, tenant, owner string, now, until time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)},
		UpdateExpression: aws.String("SET reconcile_owner = :o, reconcile_claimed_until = :u"),
		// A tenant parked by any process (and not lapsed) is never claimed: its realm fails.
		ConditionExpression: aws.String("(attribute_not_exists(reconcile_claimed_until) OR reconcile_claimed_until < :now OR reconcile_owner = :o) AND " +
			"(attribute_not_exists(parked) OR parked = :f OR attribute_not_exists(parked_until) OR parked_until < :now)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": str(owner), ":u": str(FormatTime(until)), ":now": str(FormatTime(now)), ":f": boolean(false)},
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("claim the reconcile of %s/%s: %w", system, tenant, translate(err))
	}
	return true, nil
}
