package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ClearReplayNeeded removes a tenant's replay_needed mark once a replay has switched its
// readers to usersTable, but only the mark with this reason, the one the replay was
// started for: a mark recorded since carries another reason and stays. It reports
// whether the mark was removed.
func ClearReplayNeeded(ctx context.Context, db *dynamodb.Client, names Names, system, tenant, usersTable, reason string) (bool, error) {
	_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(names.Config()),
		Key:                 map[string]types.AttributeValue{"system_id": str(system), "tenant_id": str(tenant)},
		UpdateExpression:    aws.String("REMOVE replay_needed, replay_reason ADD row_version :one"),
		ConditionExpression: aws.String("users_table = :u AND replay_reason = :r"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":u": str(usersTable), ":r": str(reason), ":one": num(1),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("clear the replay mark of %s/%s: %w", system, tenant, translate(err))
	}
	return true, nil
}
