package erasure

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
)

// The lease (docs/erasure.md, "The bound"): a stream delivery of user.erased, the resume
// task and `ssodirctl erasures resume` all run Step, and two of them may come at once for
// one erasure (a parked record redelivered while the resume task takes the erasure up).
// Each call of Step first takes the erasure's lease, `lease_owner` and `lease_until` on its
// ledger entry, conditionally: only when no lease is held or the one held ran out. A call
// that does not get it does nothing and answers again = when the lease runs out. The
// holder works until its soft deadline and gives the lease back; its requests run under a
// context that ends when the lease does, so that it never works past its lease, even when
// it overruns its soft deadline.

// leaseSlack is how long a lease outlasts its call's soft deadline: the request under way
// then, and the position's save.
const leaseSlack = 15 * time.Second

// takeLease gives the erasure's lease to owner until until, if no other owner holds one
// that runs past now; held is false otherwise, with when the holder's runs out.
func (l *Ledger) takeLease(ctx context.Context, system, tenant, id, owner string, now, until time.Time) (held bool, holderUntil time.Time, err error) {
	_, err = l.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(l.table), Key: key(system, tenant, id),
		UpdateExpression: aws.String("SET lease_owner = :o, lease_until = :u"),
		ConditionExpression: aws.String("attribute_exists(erasure_id) AND " +
			"(attribute_not_exists(lease_until) OR lease_until < :now OR lease_owner = :o)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": s(owner), ":u": millis(until), ":now": millis(now),
		},
	})
	if err == nil {
		return true, time.Time{}, nil
	}
	if !sdkerr.ConditionFailed(err) {
		return false, time.Time{}, fmt.Errorf("take the lease of erasure %s: %w", id, dynamo.Translate(err))
	}
	out, err := l.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(l.table), Key: key(system, tenant, id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("read the lease of erasure %s: %w", id, dynamo.Translate(err))
	}
	if out.Item == nil {
		return false, time.Time{}, apperr.NotFound("erasure")
	}
	n, _ := out.Item["lease_until"].(*types.AttributeValueMemberN)
	if n == nil {
		return false, now, nil // given back in between: the next call takes it
	}
	ms, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("erasure %s: lease_until: %w", id, err)
	}
	return false, time.UnixMilli(ms), nil
}

// giveBackLease ends owner's lease, if it still holds it.
func (l *Ledger) giveBackLease(ctx context.Context, system, tenant, id, owner string) error {
	if err := dynamo.GiveBackLease(ctx, l.db, l.table, key(system, tenant, id), owner); err != nil {
		return fmt.Errorf("give back the lease of erasure %s: %w", id, err)
	}
	return nil
}

func millis(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}

// leaseOwner is a fresh owner name for one call.
func leaseOwner() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
