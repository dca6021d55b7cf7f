package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// renameMovesPerTransaction is how many memberships one transaction of a user rename's
// move holds: five items each (docs/storage.md, "Renames").
const renameMovesPerTransaction = maxTransactItems / 5

// MarkRename marks the live user at version as being renamed by l.Owner until l.Until
// (when no other renamer's mark runs after now) and raises the count of user deletes
// that covers the name, in one transaction: a command naming the user that read the
// count before decides again, and one that reads it after reads the mark.
func (s *CommandStore) MarkRename(ctx context.Context, t commands.Tenant, username string, version int64, l commands.MembersLease, now time.Time) (bool, error) {
	table := s.table(t)
	_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName:        aws.String(table),
			Key:              map[string]types.AttributeValue{"id": str(UserID(username)), "sk": str(SKConfig)},
			UpdateExpression: aws.String("SET renaming_owner = :o, renaming_until = :u"),
			ConditionExpression: aws.String("version = :v AND deleted = :f AND " +
				"(attribute_not_exists(renaming_owner) OR renaming_owner = :o OR renaming_until < :now)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":o": str(l.Owner), ":u": num(l.Until.UnixMilli()), ":v": num(version), ":f": boolean(false), ":now": num(now.UnixMilli()),
			},
		}},
		{Update: countUserDelete(table, username)},
	}})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				return false, fmt.Errorf("mark rename of %s: %w", logUser(username), translate(err))
			}
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mark rename of %s: %w", logUser(username), translate(notFoundTenant(err)))
	}
	return true, nil
}

// ClearRenameMark removes owner's rename mark from username's config, if it is there.
func (s *CommandStore) ClearRenameMark(ctx context.Context, t commands.Tenant, username, owner string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table(t)),
		Key:                       map[string]types.AttributeValue{"id": str(UserID(username)), "sk": str(SKConfig)},
		UpdateExpression:          aws.String("REMOVE renaming_owner, renaming_until"),
		ConditionExpression:       aws.String("renaming_owner = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": str(owner)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("clear rename mark of %s: %w", logUser(username), notFoundTenant(err))
	}
	return nil
}

// LeaseUserMove gives l to l.Owner if username's rename is still pending at l.Version and
// its lease is l.Owner's or ran out before now.
func (s *CommandStore) LeaseUserMove(ctx context.Context, t commands.Tenant, username string, l commands.MembersLease, now time.Time) (bool, error) {
	ok, err := s.leasePending(ctx, t, UserID(username), l, now)
	if err != nil {
		return false, fmt.Errorf("lease rename of %s v%d: %w", logUser(username), l.Version, err)
	}
	return ok, nil
}

// FinishUserMove clears the pending mark of l's rename while l.Owner holds it.
func (s *CommandStore) FinishUserMove(ctx context.Context, t commands.Tenant, username string, l commands.MembersLease) error {
	if err := s.finishPending(ctx, t, UserID(username), l); err != nil {
		return fmt.Errorf("finish rename of %s v%d: %w", logUser(username), l.Version, err)
	}
	return nil
}

// MoveUserMemberships moves a recorded user rename's memberships (docs/storage.md,
// "Renames"), renameMovesPerTransaction in each TransactWriteItems, up to
// membersWriteConcurrency at a time. Each membership moves whole: its group's config has
// its count of member moves raised (conditioned on the group being live and of the
// incarnation the membership was added to), `member#<old>` is deleted (conditioned on
// being the person's), `member#<new>` put (same group version, added_at and expiry, the
// rename's membership revision), and the group pointer moved. A membership whose
// condition fails was moved before (a mover that died, or one racing this one) or is
// gone with its group's delete: it is left, and the others move. before is called before
// every request.
func (s *CommandStore) MoveUserMemberships(ctx context.Context, t commands.Tenant, m commands.UserMove, before func(context.Context) error) error {
	table := s.table(t)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(membersWriteConcurrency)
	for batch := range slices.Chunk(m.Memberships, renameMovesPerTransaction) {
		g.Go(func() error { return s.moveUserBatch(gctx, table, m, batch, before) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("move memberships of user %s: %w", m.UserID, err)
	}
	return nil
}

func (s *CommandStore) moveUserBatch(ctx context.Context, table string, m commands.UserMove, batch []events.RenamedMembership, before func(context.Context) error) error {
	for attempt := 0; len(batch) > 0; attempt++ {
		if err := before(ctx); err != nil {
			return err
		}
		items := make([]types.TransactWriteItem, 0, 5*len(batch))
		for _, rm := range batch {
			items = append(items, moveUserItems(table, m, rm)...)
		}
		_, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items},
			func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		if err == nil {
			return nil
		}
		var tce *types.TransactionCanceledException
		switch {
		case errors.As(err, &tce):
			var left []events.RenamedMembership
			for i, rm := range batch {
				failed := false
				for j := 5 * i; j < 5*i+5 && j < len(tce.CancellationReasons); j++ {
					failed = failed || aws.ToString(tce.CancellationReasons[j].Code) == "ConditionalCheckFailed"
				}
				if !failed {
					left = append(left, rm)
				}
			}
			if len(left) < len(batch) {
				// Moved already, or gone with its group: the rest moves without it.
				batch, attempt = left, 0
				continue
			}
		case !isUnavailable(err):
			return fmt.Errorf("move user memberships: %w", translate(notFoundTenant(err)))
		}
		if attempt >= guardedRetries || ctx.Err() != nil {
			return apperr.Unavailable(fmt.Errorf("move user memberships: %w", err), retryAfter)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(10<<min(attempt, 6)) * time.Millisecond):
		}
	}
	return nil
}

// moveUserItems are the five writes that move one membership (MoveUserMemberships).
func moveUserItems(table string, m commands.UserMove, rm events.RenamedMembership) []types.TransactWriteItem {
	group := str(GroupID(rm.GroupKey))
	return []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(table), Key: map[string]types.AttributeValue{"id": group, "sk": str(SKConfig)},
			UpdateExpression:    aws.String("SET member_moves = if_not_exists(member_moves, :z) + :one"),
			ConditionExpression: aws.String("deleted = :f AND last_deleted_version < :added"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":z": num(0), ":one": num(1), ":f": boolean(false), ":added": num(rm.AddedVersion),
			},
		}},
		{Delete: &types.Delete{
			TableName: aws.String(table), Key: map[string]types.AttributeValue{"id": group, "sk": str(MemberSK(m.From))},
			ConditionExpression:       aws.String("user_id = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(m.UserID)},
		}},
		{Put: &types.Put{TableName: aws.String(table),
			Item: withExpiry(MemberItem(rm.GroupKey, m.To, m.UserID, rm.MembershipRev, rm.AddedVersion, FormatTime(rm.AddedAt)), rm.ExpiresAt)}},
		{Delete: &types.Delete{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"id": str(UserID(m.From)), "sk": str(GroupPointerSK(rm.GroupKey))}}},
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"id": str(UserID(m.To)), "sk": str(GroupPointerSK(rm.GroupKey)), "group_key": str(rm.GroupKey),
			"added_at": str(FormatTime(rm.AddedAt)),
		}}},
	}
}
