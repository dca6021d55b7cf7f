package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// UserHistory reads every history record of a user's partition, oldest first (a Query of
// the partition's `config#` records, consistent).
func (s *CommandStore) UserHistory(ctx context.Context, t commands.Tenant, username string) ([]events.Envelope, error) {
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.table(t)),
		KeyConditionExpression: aws.String("id = :id AND begins_with(sk, :h)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id": str(UserID(username)), ":h": str(skHistory),
		},
		ConsistentRead: aws.Bool(true),
	}
	var out []events.Envelope
	for {
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("read the history of a user: %w", notFoundTenant(err))
		}
		for _, it := range page.Items {
			if !IsHistorySK(getS(it, "sk")) {
				continue
			}
			env, err := DecodeRecord(s.registry, it)
			if err != nil {
				return nil, err
			}
			out = append(out, env)
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}
