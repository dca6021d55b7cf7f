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

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/scimtoken"
)

// It is also auth.ScimTokenLookup (GetScimToken); dynamo does not import auth, whose OIDC
// dependencies the deploy module does not carry.
var _ commands.ScimTokenStore = (*ScimTokenStore)(nil)

// scimTokenPurgeAfter is how long an expired token's row stays (listed as expired) before
// DynamoDB's TTL removes it.
const scimTokenPurgeAfter = 30 * 24 * time.Hour

// ScimTokenStore keeps the tenants' SCIM tokens in `{p}_scim_tokens` (docs/storage.md):
// pk `tenant` (`<system>/<tenant>`), sk `token_id`; only the HMAC of a token is stored.
type ScimTokenStore struct {
	db    *dynamodb.Client
	table string
}

// NewScimTokenStore is the SCIM token store under names.
func NewScimTokenStore(db *dynamodb.Client, names Names) *ScimTokenStore {
	return &ScimTokenStore{db: db, table: names.ScimTokens()}
}

type scimTokenItem struct {
	Tenant    string `dynamodbav:"tenant"`
	TokenID   string `dynamodbav:"token_id"`
	Name      string `dynamodbav:"name"`
	Hash      string `dynamodbav:"hash"`
	CreatedBy string `dynamodbav:"created_by"`
	CreatedAt string `dynamodbav:"created_at"`
	ExpiresAt string `dynamodbav:"expires_at,omitempty"`
	PurgeAt   int64  `dynamodbav:"purge_at,omitempty"`
}

func scimTokenTenant(system, tenant string) string { return system + "/" + tenant }

// PutScimToken stores a new token; its id is new, so an existing one is never overwritten.
func (s *ScimTokenStore) PutScimToken(ctx context.Context, rec scimtoken.Record) error {
	it := scimTokenItem{Tenant: scimTokenTenant(rec.System, rec.Tenant), TokenID: rec.ID, Name: rec.Name, Hash: rec.Hash,
		CreatedBy: rec.CreatedBy, CreatedAt: FormatTime(rec.CreatedAt)}
	if !rec.ExpiresAt.IsZero() {
		it.ExpiresAt = FormatTime(rec.ExpiresAt)
		it.PurgeAt = rec.ExpiresAt.Add(scimTokenPurgeAfter).Unix()
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("encode SCIM token: %w", err)
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(token_id)")})
	if err != nil {
		return fmt.Errorf("put SCIM token: %w", translate(err))
	}
	return nil
}

// GetScimToken reads a token strongly consistently, so a revoked one fails at once.
func (s *ScimTokenStore) GetScimToken(ctx context.Context, system, tenant, id string) (scimtoken.Record, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"tenant": str(scimTokenTenant(system, tenant)), "token_id": str(id)}})
	if err != nil {
		return scimtoken.Record{}, false, fmt.Errorf("get SCIM token: %w", translate(err))
	}
	if out.Item == nil {
		return scimtoken.Record{}, false, nil
	}
	rec, err := decodeScimToken(system, tenant, out.Item)
	return rec, err == nil, err
}

// ListScimTokens lists a tenant's tokens by id.
func (s *ScimTokenStore) ListScimTokens(ctx context.Context, system, tenant string) ([]scimtoken.Record, error) {
	p := dynamodb.NewQueryPaginator(s.db, &dynamodb.QueryInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("tenant = :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": str(scimTokenTenant(system, tenant))}})
	var out []scimtoken.Record
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list SCIM tokens: %w", translate(err))
		}
		for _, it := range page.Items {
			rec, err := decodeScimToken(system, tenant, it)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

// DeleteScimToken removes a token; found is false when there was none.
func (s *ScimTokenStore) DeleteScimToken(ctx context.Context, system, tenant, id string) (bool, error) {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table),
		Key:                 map[string]types.AttributeValue{"tenant": str(scimTokenTenant(system, tenant)), "token_id": str(id)},
		ConditionExpression: aws.String("attribute_exists(token_id)")})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete SCIM token: %w", translate(err))
	}
	return true, nil
}

func decodeScimToken(system, tenant string, item map[string]types.AttributeValue) (scimtoken.Record, error) {
	var it scimTokenItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return scimtoken.Record{}, fmt.Errorf("decode SCIM token: %w", err)
	}
	rec := scimtoken.Record{System: system, Tenant: tenant, ID: it.TokenID, Name: it.Name, Hash: it.Hash, CreatedBy: it.CreatedBy}
	rec.CreatedAt, _ = ParseTime(it.CreatedAt)
	if it.ExpiresAt != "" {
		rec.ExpiresAt, _ = ParseTime(it.ExpiresAt)
	}
	return rec, nil
}
