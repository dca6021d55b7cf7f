package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// BackfillReport is what BackfillLookups did.
type BackfillReport struct {
	Users, Groups int // live ones seen
	Written       int // lookup items written
}

// backfillAttempts bounds how often one aggregate's lookups are tried again when a command
// changed it between the read and the write.
const backfillAttempts = 5

// BackfillLookups writes the lookup items (see lookups.go) of the live users and groups
// that lack them: those created before the lookups existed. It reads the tenant's command
// table with a Scan (a one-off maintenance pass, like a replay) and writes each aggregate's
// items in a transaction conditioned on the state they were derived from, so a command
// that changes or deletes the aggregate meanwhile cannot leave a stale pointer behind (the
// aggregate is read again and retried). Aggregates that have their id lookup are left as
// they are. It can run while the services run, and again.
func (s *CommandStore) BackfillLookups(ctx context.Context, t commands.Tenant) (BackfillReport, error) {
	var rep BackfillReport
	p := dynamodb.NewScanPaginator(s.db, &dynamodb.ScanInput{
		TableName:                 aws.String(s.table(t)),
		FilterExpression:          aws.String("sk = :config AND deleted = :f"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":config": str(SKConfig), ":f": boolean(false)},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return rep, fmt.Errorf("scan %s: %w", s.table(t), notFoundTenant(err))
		}
		for _, it := range page.Items {
			kind := events.AggregateKind(getS(it, "type"))
			switch kind {
			case events.KindUser:
				rep.Users++
			case events.KindGroup:
				rep.Groups++
			default:
				continue
			}
			n, err := s.backfillOne(ctx, t, kind, it)
			if err != nil {
				return rep, err
			}
			rep.Written += n
		}
	}
	return rep, nil
}

func (s *CommandStore) backfillOne(ctx context.Context, t commands.Tenant, kind events.AggregateKind, item map[string]types.AttributeValue) (int, error) {
	table := s.table(t)
	for range backfillAttempts {
		var (
			ls      []commands.Lookup
			version int64
		)
		switch kind {
		case events.KindUser:
			u, err := userAggregate(item)
			if err != nil {
				return 0, err
			}
			ls, version = commands.UserLookups(u.State), u.State.Version
		default:
			g, err := decodeGroup(item)
			if err != nil {
				return 0, err
			}
			ls, version = commands.GroupLookups(g.State), g.State.Version
		}
		if len(ls) == 0 {
			return 0, nil
		}
		if _, ok, err := s.FindByID(ctx, t, kind, ls[0].ID); err != nil || ok {
			return 0, err
		}
		items := []types.TransactWriteItem{{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(table), Key: map[string]types.AttributeValue{"id": item["id"], "sk": str(SKConfig)},
			ConditionExpression:       aws.String("version = :v AND deleted = :f"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(version), ":f": boolean(false)},
		}}}
		for _, l := range ls {
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: lookupItem(l)}})
		}
		// The lookups are counted as a create's are.
		items = append(items, liveCountItems(table, ls, nil)...)
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		var tce *types.TransactionCanceledException
		if err == nil {
			return len(ls), nil
		}
		if !errors.As(err, &tce) {
			return 0, fmt.Errorf("backfill lookups of %s: %w", logID(getS(item, "id")), translate(err))
		}
		// The aggregate changed (or a transaction conflicted): read it again.
		if item, err = s.get(ctx, table, getS(item, "id"), SKConfig); err != nil {
			return 0, err
		}
		if item == nil || getBool(item, "deleted") {
			return 0, nil
		}
	}
	return 0, fmt.Errorf("backfill lookups: the aggregate kept changing; run the backfill again")
}
