package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// ItemUpdater is the part of DynamoDB that updates one item.
type ItemUpdater interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// GiveBackLease ends owner's lease (`lease_owner`, `lease_until`) on the item at key, if it
// still holds it: a lease another took meanwhile is left as it is. The error is
// translated (Translate).
func GiveBackLease(ctx context.Context, db ItemUpdater, table string, key map[string]types.AttributeValue, owner string) error {
	_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key,
		UpdateExpression:          aws.String("REMOVE lease_owner, lease_until"),
		ConditionExpression:       aws.String("lease_owner = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: owner}},
	})
	if err != nil && !sdkerr.ConditionFailed(err) {
		return Translate(err)
	}
	return nil
}
