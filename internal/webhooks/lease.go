package webhooks

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/changefeed"
)

// A deliverer holds an endpoint by a lease on its item: owner and expiry, taken with a
// conditional write, renewed by every write that moves the endpoint's position, and given
// back when it stops. Every write of a holder is conditioned on holding the lease and on
// the endpoint's gen (a replay moves it), so two deliverers never deliver for one endpoint
// at once and a replayed endpoint's old holder stops.

// acquire takes the lease on an endpoint that is active and due; ok false when another
// holds it, it is not due, disabled or gone. It answers the endpoint as it stands.
func (s *Store) acquire(ctx context.Context, e Endpoint, owner string, lease time.Duration) (Endpoint, bool, error) {
	now := s.now()
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(e.System, e.Tenant, e.ID),
		UpdateExpression: aws.String("SET lease_owner = :me, lease_until_ms = :until"),
		ConditionExpression: aws.String("attribute_exists(pk) AND #state = :active" +
			" AND (attribute_not_exists(lease_until_ms) OR lease_until_ms < :now OR lease_owner = :me)" +
			" AND (attribute_not_exists(next_attempt_ms) OR next_attempt_ms <= :now)"),
		ExpressionAttributeNames: map[string]string{"#state": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(owner), ":until": ms(now.Add(lease)),
			":now": ms(now), ":active": str(StateActive)},
		ReturnValues: types.ReturnValueAllNew})
	if conditionFailed(err) {
		return Endpoint{}, false, nil
	}
	if err != nil {
		return Endpoint{}, false, fmt.Errorf("lease the webhook: %w", err)
	}
	return fromItem(out.Attributes), true, nil
}

// held is the condition of a holder's writes.
const held = "lease_owner = :me AND gen = :gen"

func heldValues(e Endpoint, owner string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{":me": str(owner), ":gen": num(e.Gen)}
}

// advance moves the endpoint's position after a delivery (or past changes not of its
// types), with the positions after it already delivered (ahead, nil: none), clears its
// failures and renews the lease. errLost: the lease or the gen moved.
func (s *Store) advance(ctx context.Context, e Endpoint, owner string, to changefeed.Position, ahead []int64, delivered bool, lease time.Duration) (Endpoint, error) {
	now := s.now()
	vals := heldValues(e, owner)
	vals[":after"], vals[":seen"], vals[":until"], vals[":zero"] = num(to.After), ms(to.Seen), ms(now.Add(lease)), num(0)
	set := "SET #after = :after, seen_ms = :seen, lease_until_ms = :until, attempt = :zero"
	remove := " REMOVE failing_since_ms, next_attempt_ms, last_error, last_status"
	if len(ahead) > 0 {
		ns := make([]string, len(ahead))
		for i, p := range ahead {
			ns[i] = strconv.FormatInt(p, 10)
		}
		set += ", ahead = :ahead"
		vals[":ahead"] = &types.AttributeValueMemberNS{Value: ns}
	} else {
		remove += ", ahead"
	}
	if delivered {
		set += ", delivered_at_ms = :now"
		vals[":now"] = ms(now)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(e.System, e.Tenant, e.ID),
		UpdateExpression:         aws.String(set + remove),
		ConditionExpression:      aws.String(held),
		ExpressionAttributeNames: map[string]string{"#after": "after"}, ExpressionAttributeValues: vals})
	if conditionFailed(err) {
		return e, errLost
	}
	if err != nil {
		return e, fmt.Errorf("move the webhook's position: %w", err)
	}
	e.Position, e.Attempt, e.FailingSince, e.NextAttempt, e.LastError, e.LastStatus = to, 0, time.Time{}, time.Time{}, "", 0
	e.ahead = ahead
	return e, nil
}

// renew extends the lease of a holder whose page of deliveries is still under way.
func (s *Store) renew(ctx context.Context, e Endpoint, owner string, lease time.Duration) error {
	vals := heldValues(e, owner)
	vals[":until"] = ms(s.now().Add(lease))
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(e.System, e.Tenant, e.ID),
		UpdateExpression: aws.String("SET lease_until_ms = :until"), ConditionExpression: aws.String(held),
		ExpressionAttributeValues: vals})
	if conditionFailed(err) {
		return errLost
	}
	if err != nil {
		return fmt.Errorf("renew the webhook's lease: %w", err)
	}
	return nil
}

// fail records a failed attempt at the change after the position, when the next is due,
// and gives the lease back; disable turns the endpoint off.
func (s *Store) fail(ctx context.Context, e Endpoint, owner string, disable bool) error {
	vals := heldValues(e, owner)
	vals[":attempt"], vals[":since"], vals[":next"], vals[":err"], vals[":zero"] =
		num(int64(e.Attempt)), ms(e.FailingSince), ms(e.NextAttempt), str(e.LastError), num(0)
	set := "SET attempt = :attempt, failing_since_ms = :since, next_attempt_ms = :next, last_error = :err, lease_until_ms = :zero"
	if e.LastStatus != 0 {
		set += ", last_status = :status"
		vals[":status"] = num(int64(e.LastStatus))
	}
	names := map[string]string(nil)
	if disable {
		set += ", #state = :disabled, disabled_at_ms = :at"
		vals[":disabled"], vals[":at"] = str(StateDisabled), ms(s.now())
		names = map[string]string{"#state": "state"}
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(e.System, e.Tenant, e.ID),
		UpdateExpression: aws.String(set), ConditionExpression: aws.String(held),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals})
	if conditionFailed(err) {
		return errLost
	}
	if err != nil {
		return fmt.Errorf("record the webhook's failure: %w", err)
	}
	return nil
}

// release gives the lease back, so that the endpoint's next round need not wait for it.
func (s *Store) release(ctx context.Context, e Endpoint, owner string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(e.System, e.Tenant, e.ID),
		UpdateExpression: aws.String("SET lease_until_ms = :zero"), ConditionExpression: aws.String("lease_owner = :me"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(owner), ":zero": num(0)}})
	if err != nil && !conditionFailed(err) {
		return fmt.Errorf("release the webhook: %w", err)
	}
	return nil
}
