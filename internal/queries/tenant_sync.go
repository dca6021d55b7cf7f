package queries

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// usernameChangesUnknown is keycloak.UsernameChangesUnknown: no reconcile has read the
// realm's settings yet, or it could not.
const usernameChangesUnknown = "unknown"

// usernameChanges is whether the tenant's realm lets usernames change (allowed, refused
// or unknown), as keycloak-sync's last reconcile recorded it in the tenant's row of
// `{p}_keycloak_sync_status` (docs/keycloak-sync.md): unknown while there is no such row
// or table (no keycloak-sync has run) or the row does not say.
func (s *Service) usernameChanges(ctx context.Context, system, tenant string) (string, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.syncStatus),
		Key: map[string]types.AttributeValue{
			"system_id": &types.AttributeValueMemberS{Value: system},
			"tenant_id": &types.AttributeValueMemberS{Value: tenant},
		},
		ProjectionExpression:     aws.String("#uc"),
		ExpressionAttributeNames: map[string]string{"#uc": "username_changes"},
	})
	if sdkerr.ResourceNotFound(err) {
		return usernameChangesUnknown, nil
	}
	if err != nil {
		return "", fmt.Errorf("read the sync status of %s/%s in %s: %w", system, tenant, s.syncStatus, err)
	}
	switch v := dynamo.StringAttr(out.Item, "username_changes"); v {
	case "allowed", "refused":
		return v, nil
	}
	return usernameChangesUnknown, nil
}
