package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
)

// Membership is a membership as the write model holds it now.
type Membership struct {
	// GroupID and UserID are the directory ids of the incarnations of group and user the
	// membership joins.
	GroupID, UserID string
}

// CurrentMembership reads, strongly consistently and in one request, the group's config
// item and the user's membership item in it. ok is false when the group is gone or the
// user is not a member of its current incarnation (a membership item left behind by a
// delete whose clean-up has not finished yet is not one).
func (s *CommandStore) CurrentMembership(ctx context.Context, t commands.Tenant, groupKey, username string) (Membership, bool, error) {
	table := s.table(t)
	out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
		table: {
			ConsistentRead: aws.Bool(true),
			Keys: []map[string]types.AttributeValue{
				{"id": str(GroupID(groupKey)), "sk": str(SKConfig)},
				{"id": str(GroupID(groupKey)), "sk": str(MemberSK(username))},
			},
		},
	}})
	if err != nil {
		return Membership{}, false, fmt.Errorf("get membership %s/%s: %w", groupKey, username, notFoundTenant(err))
	}
	if len(out.UnprocessedKeys) > 0 {
		// Throttled: the caller retries the whole check later.
		return Membership{}, false, apperr.Unavailable(fmt.Errorf("get membership %s/%s: keys left unprocessed", groupKey, username), retryAfter)
	}
	var group, member map[string]types.AttributeValue
	for _, it := range out.Responses[table] {
		if getS(it, "sk") == SKConfig {
			group = it
		} else {
			member = it
		}
	}
	if group == nil || member == nil {
		return Membership{}, false, nil
	}
	if getBool(group, "deleted") {
		return Membership{}, false, nil
	}
	lastDeleted, err := getN(group, "last_deleted_version")
	if err != nil {
		return Membership{}, false, err
	}
	added, err := getN(member, "group_version")
	if err != nil {
		return Membership{}, false, err
	}
	if added <= lastDeleted {
		return Membership{}, false, nil
	}
	return Membership{GroupID: getS(group, "group_id"), UserID: getS(member, "user_id")}, true, nil
}
