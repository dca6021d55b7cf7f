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

// roundSystem and roundRow key the row of `{p}_keycloak_sync_status` that holds Lambda
// mode's reconcile round: where it stopped, and which invocation works on it. The system
// id cannot be a tenant's ('#' is not allowed in one).
const (
	roundSystem = "#reconcile"
	roundRow    = "round"
)

// ReconcileRound is the state of the scheduled reconcile round (Lambda mode): a pass over
// every tenant in key order, which one invocation after another continues from Cursor.
type ReconcileRound struct {
	// Cursor is the key (system/tenant) of the last tenant the pass reached; empty
	// between passes.
	Cursor string `dynamodbav:"round_cursor,omitempty"`
	// Retry are the keys of tenants whose reconcile the last invocation's deadline cut:
	// the next invocation does them first (once).
	Retry []string `dynamodbav:"round_retry,omitempty"`
	// PassStartedAt is when the current (or last) pass started, PassEndedAt when the last
	// one reached its end; Passes counts the passes ended.
	PassStartedAt string `dynamodbav:"pass_started_at,omitempty"`
	PassEndedAt   string `dynamodbav:"pass_ended_at,omitempty"`
	Passes        int64  `dynamodbav:"passes"`
	// Owner holds the round until LeaseUntil: no other invocation works on it meanwhile.
	Owner      string `dynamodbav:"round_owner,omitempty"`
	LeaseUntil string `dynamodbav:"round_lease_until,omitempty"`
}

func roundKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"system_id": str(roundSystem), "tenant_id": str(roundRow)}
}

// ClaimRound takes the round for owner until `until`, unless another owner holds an
// unexpired lease on it; ok is false then. It returns the round's state.
func (s *SyncStatuses) ClaimRound(ctx context.Context, owner string, now, until time.Time) (ReconcileRound, bool, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       roundKey(),
		UpdateExpression:          aws.String("SET round_owner = :o, round_lease_until = :u"),
		ConditionExpression:       aws.String("attribute_not_exists(round_lease_until) OR round_lease_until < :now OR round_owner = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": str(owner), ":u": str(FormatTime(until)), ":now": str(FormatTime(now))},
		ReturnValues:              types.ReturnValueAllNew,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return ReconcileRound{}, false, nil
	case err != nil:
		return ReconcileRound{}, false, fmt.Errorf("claim the reconcile round: %w", translate(err))
	}
	var r ReconcileRound
	if err := attributevalue.UnmarshalMap(out.Attributes, &r); err != nil {
		return ReconcileRound{}, false, fmt.Errorf("decode the reconcile round: %w", err)
	}
	return r, true, nil
}

// SaveRound stores the round's progress while owner still holds it, and ends the lease
// when release is set.
func (s *SyncStatuses) SaveRound(ctx context.Context, owner string, r ReconcileRound, release bool) error {
	expr := "SET passes = :p"
	values := map[string]types.AttributeValue{":o": str(owner), ":p": num(r.Passes)}
	var remove []string
	for _, f := range []struct{ name, value string }{{"round_cursor", r.Cursor}, {"pass_started_at", r.PassStartedAt}, {"pass_ended_at", r.PassEndedAt}} {
		if f.value == "" {
			remove = append(remove, f.name)
			continue
		}
		expr += fmt.Sprintf(", %s = :%s", f.name, f.name)
		values[":"+f.name] = str(f.value)
	}
	if len(r.Retry) == 0 {
		remove = append(remove, "round_retry")
	} else {
		retry, err := attributevalue.Marshal(r.Retry)
		if err != nil {
			return fmt.Errorf("encode the reconcile round: %w", err)
		}
		expr += ", round_retry = :retry"
		values[":retry"] = retry
	}
	if release {
		remove = append(remove, "round_owner", "round_lease_until")
	}
	for i, name := range remove {
		if i == 0 {
			expr += " REMOVE " + name
		} else {
			expr += ", " + name
		}
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: roundKey(), UpdateExpression: aws.String(expr),
		ConditionExpression: aws.String("round_owner = :o"), ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return errors.New("save the reconcile round: the lease was lost to another invocation")
	}
	if err != nil {
		return fmt.Errorf("save the reconcile round: %w", translate(err))
	}
	return nil
}
