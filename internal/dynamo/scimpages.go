package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// The SCIM port's page marks (internal/scim/listindex.go): where an index walk's next page
// (startIndex) starts, so that a process that did not serve the walk's previous page (another
// Lambda instance) continues it at the cost of its page. They live in the idempotency table,
// which every process reaches and which expires its items (`expires_at`, TTL), under
// `scim-page#<system>/<tenant>#<kind>#<startIndex>`; they hold an id (never a name) and a
// count. A process writes one per page it serves, and reads one only when its memory lacks
// it.
const scimPagePrefix = "scim-page#"

func scimPageKey(t commands.Tenant, kind events.AggregateKind, index int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"key": str(scimPagePrefix + t.System + "/" + t.ID + "#" + string(kind) + "#" + strconv.Itoa(index))}
}

// PutPageMark records that the index walk's page at startIndex index starts after the id
// after, in a list of total, until until.
func (s *CommandStore) PutPageMark(ctx context.Context, t commands.Tenant, kind events.AggregateKind, index int, after string, total int, until time.Time) error {
	item := scimPageKey(t, kind, index)
	item["after"], item["total"], item["expires_at"] = str(after), num(int64(total)), num(until.Unix())
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.names.Idempotency()), Item: item}); err != nil {
		return fmt.Errorf("put a SCIM page mark: %w", translate(err))
	}
	return nil
}

// PageMark is the mark PutPageMark left for the page at index, if it has not expired.
func (s *CommandStore) PageMark(ctx context.Context, t commands.Tenant, kind events.AggregateKind, index int) (after string, total int, ok bool, err error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.names.Idempotency()), Key: scimPageKey(t, kind, index)})
	if err != nil {
		return "", 0, false, fmt.Errorf("get a SCIM page mark: %w", translate(err))
	}
	if out.Item == nil {
		return "", 0, false, nil
	}
	exp, _ := getN(out.Item, "expires_at")
	n, _ := getN(out.Item, "total")
	after = getS(out.Item, "after")
	if after == "" || s.now().Unix() >= exp {
		return "", 0, false, nil
	}
	return after, int(n), true, nil
}
