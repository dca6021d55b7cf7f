// Package erasure erases a person from everything ssodir keeps (API.md "Erasure",
// docs/erasure.md): the ledger of erasures, the work that removes and rewrites the items
// naming the person, the filter that keeps records of an erased user read after the
// erasure from writing anything, and the re-application of the ledger to restored tables.
//
// The command that starts an erasure is commands.EraseUser (the write side's one
// implementation of a user's delete); the projector carries the erasure out when it reads
// the user.erased record, and the Keycloak sync deletes the Keycloak user.
package erasure

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// DB is the part of the DynamoDB client the erasure uses.
type DB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

// Entry is one erasure as the ledger keeps it and GET /erasures/{id} shows it: PII-free.
type Entry struct {
	ErasureID   string            `json:"erasure_id"`
	Status      string            `json:"status"`
	RequestedAt string            `json:"requested_at"`
	CompletedAt *string           `json:"completed_at"`
	Places      map[string]string `json:"places"`
	// RequestedBy and Reason are kept (who erased, and why) but not shown by the API.
	RequestedBy string `json:"-"`
	Reason      string `json:"-"`
	// IDHashes are the erased incarnations' ids, hashed (identity.ErasedIDHash).
	IDHashes []string `json:"-"`
	// SweptAt is when the projector's first pass ended; PendingGroups are the groups it
	// found the person in, kept until the erasure is done for its second pass.
	SweptAt       string   `json:"-"`
	PendingGroups []string `json:"-"`
	// AllIncarnations: the earlier incarnations under the name were erased too.
	AllIncarnations bool `json:"-"`
	// Progress is where the first pass stopped (progress.go).
	Progress Progress `json:"-"`
}

// Ledger reads and writes `{p}_erasures`.
type Ledger struct {
	db    DB
	table string
	now   func() time.Time
}

// NewLedger is the ledger in names.Erasures().
func NewLedger(db DB, names dynamo.Names) *Ledger {
	return &Ledger{db: db, table: names.Erasures(), now: time.Now}
}

// Table is the ledger's table name.
func (l *Ledger) Table() string { return l.table }

func tenantKey(system, tenant string) string { return system + "/" + tenant }

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func key(system, tenant, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"tenant": s(tenantKey(system, tenant)), "erasure_id": s(id)}
}

// Get reads one erasure; apperr not found when there is none.
func (l *Ledger) Get(ctx context.Context, system, tenant, id string) (Entry, error) {
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.table), Key: key(system, tenant, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Entry{}, fmt.Errorf("read erasure %s: %w", id, dynamo.Translate(err))
	}
	if out.Item == nil {
		return Entry{}, apperr.NotFound("erasure")
	}
	return decodeEntry(out.Item), nil
}

// ItemGetter is the one call ReadEntry needs (the query API's narrow client has it).
type ItemGetter interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// ReadEntry reads one erasure from the ledger table; apperr not found when there is none.
func ReadEntry(ctx context.Context, db ItemGetter, table, system, tenant, id string) (Entry, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(system, tenant, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Entry{}, fmt.Errorf("read erasure %s: %w", id, err)
	}
	if out.Item == nil {
		return Entry{}, apperr.NotFound("erasure")
	}
	return decodeEntry(out.Item), nil
}

// List reads every erasure of a tenant.
func (l *Ledger) List(ctx context.Context, system, tenant string) ([]Entry, error) {
	var out []Entry
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(l.table),
		KeyConditionExpression:    aws.String("tenant = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": s(tenantKey(system, tenant))},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		page, err := l.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list erasures of %s: %w", tenantKey(system, tenant), dynamo.Translate(err))
		}
		for _, it := range page.Items {
			out = append(out, decodeEntry(it))
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

func decodeEntry(it map[string]types.AttributeValue) Entry {
	e := Entry{
		ErasureID: attrS(it, "erasure_id"), Status: attrS(it, "status"), RequestedAt: attrS(it, "requested_at"),
		RequestedBy: attrS(it, "requested_by"), Reason: attrS(it, "reason"), SweptAt: attrS(it, "swept_at"),
		Places: map[string]string{}, Progress: decodeProgress(it),
	}
	if b, ok := it["all_incarnations"].(*types.AttributeValueMemberBOOL); ok {
		e.AllIncarnations = b.Value
	}
	if c := attrS(it, "completed_at"); c != "" {
		e.CompletedAt = &c
	}
	if m, ok := it["places"].(*types.AttributeValueMemberM); ok {
		for k, v := range m.Value {
			if sv, ok := v.(*types.AttributeValueMemberS); ok {
				e.Places[k] = sv.Value
			}
		}
	}
	if ss, ok := it["user_id_hashes"].(*types.AttributeValueMemberSS); ok {
		e.IDHashes = append([]string(nil), ss.Value...)
	}
	if ss, ok := it["pending_groups"].(*types.AttributeValueMemberSS); ok {
		e.PendingGroups = append([]string(nil), ss.Value...)
	}
	return e
}

// AddIDHashes records more erased ids (those the erasure found in the history).
func (l *Ledger) AddIDHashes(ctx context.Context, system, tenant, id string, hashes []string) error {
	if len(hashes) == 0 {
		return nil
	}
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.table), Key: key(system, tenant, id),
		UpdateExpression:          aws.String("ADD user_id_hashes :h"),
		ConditionExpression:       aws.String("attribute_exists(erasure_id)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": &types.AttributeValueMemberSS{Value: hashes}},
	})
	if err != nil {
		return fmt.Errorf("record ids of erasure %s: %w", id, dynamo.Translate(err))
	}
	return nil
}

// Swept records the end of the first pass, with the groups the second pass visits again.
func (l *Ledger) Swept(ctx context.Context, system, tenant, id string, at time.Time, groups []string) error {
	expr := "SET swept_at = :at"
	vals := map[string]types.AttributeValue{":at": s(dynamo.FormatTime(at))}
	if len(groups) > 0 {
		expr += " ADD pending_groups :g"
		vals[":g"] = &types.AttributeValueMemberSS{Value: groups}
	}
	_, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.table), Key: key(system, tenant, id),
		UpdateExpression: aws.String(expr), ExpressionAttributeValues: vals,
		ConditionExpression: aws.String("attribute_exists(erasure_id)"),
	})
	if err != nil {
		return fmt.Errorf("record first pass of erasure %s: %w", id, dynamo.Translate(err))
	}
	return nil
}

// MarkDone marks places done; when every place is, the erasure is done: completed_at is
// set and what the second pass needed (the groups) is removed.
func (l *Ledger) MarkDone(ctx context.Context, system, tenant, id string, places ...string) error {
	if len(places) == 0 {
		return nil
	}
	names := map[string]string{}
	vals := map[string]types.AttributeValue{":d": s(dynamo.ErasureStatusDone)}
	expr := "SET "
	for i, p := range places {
		n := fmt.Sprintf("#p%d", i)
		names[n] = p
		if i > 0 {
			expr += ", "
		}
		expr += "places." + n + " = :d"
	}
	out, err := l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.table), Key: key(system, tenant, id),
		UpdateExpression: aws.String(expr), ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
		ConditionExpression: aws.String("attribute_exists(erasure_id)"),
		ReturnValues:        types.ReturnValueAllNew,
	})
	if err != nil {
		return fmt.Errorf("mark places of erasure %s done: %w", id, dynamo.Translate(err))
	}
	e := decodeEntry(out.Attributes)
	for _, st := range e.Places {
		if st != dynamo.ErasureStatusDone {
			return nil
		}
	}
	if e.Status == dynamo.ErasureStatusDone {
		return nil
	}
	_, err = l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.table), Key: key(system, tenant, id),
		UpdateExpression:          aws.String("SET #s = :d, completed_at = :at REMOVE pending_groups"),
		ConditionExpression:       aws.String("#s = :p"),
		ExpressionAttributeNames:  map[string]string{"#s": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": s(dynamo.ErasureStatusDone), ":p": s(dynamo.ErasureStatusPending), ":at": s(dynamo.FormatTime(l.now()))},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("complete erasure %s: %w", id, dynamo.Translate(err))
	}
	return nil
}

// ErasedIDHashes are the hashed ids of every user erased in the tenant.
func (l *Ledger) ErasedIDHashes(ctx context.Context, system, tenant string) (map[string]bool, error) {
	entries, err := l.List(ctx, system, tenant)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, e := range entries {
		for _, h := range e.IDHashes {
			out[h] = true
		}
	}
	return out, nil
}

// sortedKeys is the set's members in order.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var _ = commands.PlaceKeycloak
