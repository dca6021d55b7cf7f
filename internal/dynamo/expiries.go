package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
)

// The expiry due index (docs/expiry.md): one item per expiring membership, in the
// stage's shared `{p}_stream_leases` table under a partition of its own per UTC hour
// (`consumer` = "expiry#<YYYY-MM-DDTHH>"), sorted by the instant (`lease_key` =
// "<unix ms, 13 digits>#<system>#<tenant>#<group id>#<user id>"). It names ids only:
// nothing in it is an identifier an erasure must find. The scheduler (internal/expiry)
// reads the hours up to now, a Query each, whatever the number of tenants.
const (
	expiryPartitionPrefix = "expiry#"
	expiryHourFormat      = "2006-01-02T15"
)

// ExpiryHour is the due-index partition of the instants of t's UTC hour.
func ExpiryHour(t time.Time) string { return expiryPartitionPrefix + t.UTC().Format(expiryHourFormat) }

// ExpirySortKey is the due-index sort key of an expiry at t: every entry due at or before
// t sorts below ExpirySortKey(t.Add(time.Millisecond)).
func ExpirySortKey(t time.Time) string { return fmt.Sprintf("%013d", t.UnixMilli()) }

// ExpiryDueItem is the due-index item of d in tenant t.
func ExpiryDueItem(t commands.Tenant, d commands.ExpiryDue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"consumer":   str(ExpiryHour(d.At)),
		"lease_key":  str(ExpirySortKey(d.At) + "#" + t.System + "#" + t.ID + "#" + d.GroupID + "#" + d.UserID),
		"system_id":  str(t.System),
		"tenant_id":  str(t.ID),
		"group_id":   str(d.GroupID),
		"user_id":    str(d.UserID),
		"expires_at": num(d.At.UnixMilli()),
	}
}

// DueExpiry is one entry of the due index.
type DueExpiry struct {
	Tenant commands.Tenant
	commands.ExpiryDue
	// Hour and SortKey are the entry's key.
	Hour, SortKey string
}

// Expiries reads and writes the due index.
type Expiries struct {
	db    *dynamodb.Client
	table string
}

// NewExpiries is the due index of the stage named by names.
func NewExpiries(db *dynamodb.Client, names Names) *Expiries {
	return &Expiries{db: db, table: names.StreamLeases()}
}

// Table is the table the index lives in.
func (x *Expiries) Table() string { return x.table }

// Due lists, strongly consistently, the entries of hour (an ExpiryHour) due at or before
// now, oldest first.
func (x *Expiries) Due(ctx context.Context, hour string, now time.Time) ([]DueExpiry, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(x.table),
		KeyConditionExpression:   aws.String("#c = :c AND lease_key < :k"),
		ExpressionAttributeNames: map[string]string{"#c": "consumer"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": str(hour), ":k": str(ExpirySortKey(now.Add(time.Millisecond))),
		},
		ConsistentRead: aws.Bool(true),
	}
	var out []DueExpiry
	p := dynamodb.NewQueryPaginator(x.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query expiries of %s: %w", hour, TranslateRead(err))
		}
		for _, it := range page.Items {
			ms, err := strconv.ParseInt(getNString(it, "expires_at"), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("expiry entry %s: bad expires_at", getS(it, "lease_key"))
			}
			out = append(out, DueExpiry{
				Tenant:    commands.Tenant{System: getS(it, "system_id"), ID: getS(it, "tenant_id")},
				ExpiryDue: commands.ExpiryDue{GroupID: getS(it, "group_id"), UserID: getS(it, "user_id"), At: time.UnixMilli(ms).UTC()},
				Hour:      hour,
				SortKey:   getS(it, "lease_key"),
			})
		}
	}
	return out, nil
}

// Done deletes an entry: its membership was removed, or no longer expires then.
func (x *Expiries) Done(ctx context.Context, d DueExpiry) error {
	_, err := x.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(x.table),
		Key:       map[string]types.AttributeValue{"consumer": str(d.Hour), "lease_key": str(d.SortKey)},
	})
	if err != nil {
		return fmt.Errorf("delete expiry entry: %w", translate(err))
	}
	return nil
}

// Put writes entries outside any transaction (a members change's items, written after
// its record: commands.ChangeMembersHandler).
func (x *Expiries) Put(ctx context.Context, t commands.Tenant, ds []commands.ExpiryDue) error {
	reqs := make([]types.WriteRequest, 0, len(ds))
	for _, d := range ds {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: ExpiryDueItem(t, d)}})
	}
	return BatchWrite(ctx, x.db, x.table, reqs)
}

// The scheduler's own rows in the same table (`consumer` = "expiry"): its lease and the
// first hour not yet swept empty.
const (
	expiryConsumer = "expiry"
	expiryLeaseKey = "lease"
	expiryMarkKey  = "mark"
)

// Lease takes or keeps the scheduler's lease for owner until until; ok is false while
// another owner's lease runs.
func (x *Expiries) Lease(ctx context.Context, owner string, now, until time.Time) (ok bool, err error) {
	_, err = x.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(x.table),
		Item: map[string]types.AttributeValue{
			"consumer": str(expiryConsumer), "lease_key": str(expiryLeaseKey),
			"owner": str(owner), "until": num(until.UnixMilli()),
		},
		ConditionExpression:       aws.String("attribute_not_exists(consumer) OR #o = :o OR #u < :now"),
		ExpressionAttributeNames:  map[string]string{"#o": "owner", "#u": "until"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": str(owner), ":now": num(now.UnixMilli())},
	})
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take the expiry lease: %w", translate(err))
	}
	return true, nil
}

// Mark is the first hour not yet swept empty (the zero time: none noted yet).
func (x *Expiries) Mark(ctx context.Context) (time.Time, error) {
	out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(x.table),
		Key:            map[string]types.AttributeValue{"consumer": str(expiryConsumer), "lease_key": str(expiryMarkKey)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("read the expiry mark: %w", TranslateRead(err))
	}
	if out.Item == nil {
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(getNString(out.Item, "hour"), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("expiry mark: bad hour")
	}
	return time.UnixMilli(ms).UTC(), nil
}

// SetMark notes hour as the first hour not yet swept empty; it never moves back.
func (x *Expiries) SetMark(ctx context.Context, hour time.Time) error {
	_, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(x.table),
		Key:                       map[string]types.AttributeValue{"consumer": str(expiryConsumer), "lease_key": str(expiryMarkKey)},
		UpdateExpression:          aws.String("SET #h = :h"),
		ConditionExpression:       aws.String("attribute_not_exists(#h) OR #h < :h"),
		ExpressionAttributeNames:  map[string]string{"#h": "hour"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": num(hour.UnixMilli())},
	})
	if isConditionFailed(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("note the expiry mark: %w", translate(err))
	}
	return nil
}

func getNString(it map[string]types.AttributeValue, k string) string {
	if n, ok := it[k].(*types.AttributeValueMemberN); ok {
		return n.Value
	}
	return ""
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return err != nil && errors.As(err, &ccf)
}

// withExpiry sets a membership item's expires_at (nil: the item has none).
func withExpiry(item map[string]types.AttributeValue, at *time.Time) map[string]types.AttributeValue {
	if at != nil {
		item["expires_at"] = str(FormatTime(*at))
	}
	return item
}

// setExpiryUpdate sets or clears an existing membership's expiry, while the item is
// still the user's.
func setExpiryUpdate(table string, e commands.MemberExpiry) *types.Update {
	u := &types.Update{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"id": str(GroupID(e.GroupKey)), "sk": str(MemberSK(e.Username))},
		UpdateExpression:          aws.String("REMOVE expires_at"),
		ConditionExpression:       aws.String("user_id = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(e.UserID)},
	}
	if e.ExpiresAt != nil {
		u.UpdateExpression = aws.String("SET expires_at = :e")
		u.ExpressionAttributeValues[":e"] = str(FormatTime(*e.ExpiresAt))
	}
	return u
}
