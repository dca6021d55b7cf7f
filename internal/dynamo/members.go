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

// What a members change (commands.ChangeMembersHandler) reads and writes besides its
// transaction.

// maxBatchGet is DynamoDB's limit of keys in one BatchGetItem.
const maxBatchGet = 100

// batchGet reads keys of table strongly consistently, in requests of 100 run side by side,
// retrying what DynamoDB leaves unprocessed; absent items are not returned.
func (s *CommandStore) batchGet(ctx context.Context, table string, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	chunks := slices.Collect(slices.Chunk(keys, maxBatchGet))
	pages := make([][]map[string]types.AttributeValue, len(chunks))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cleanupConcurrency)
	for i, chunk := range chunks {
		g.Go(func() error {
			req := map[string]types.KeysAndAttributes{table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
			for attempt := 0; len(req) > 0; attempt++ {
				out, err := s.db.BatchGetItem(gctx, &dynamodb.BatchGetItemInput{RequestItems: req})
				if err != nil {
					return fmt.Errorf("batch get %s: %w", table, notFoundTenant(err))
				}
				pages[i] = append(pages[i], out.Responses[table]...)
				req = out.UnprocessedKeys
				if len(req) > 0 {
					if attempt > 10 {
						return apperr.Unavailable(fmt.Errorf("batch get %s: keys left unprocessed", table), retryAfter)
					}
					select {
					case <-gctx.Done():
						return gctx.Err()
					case <-time.After(time.Duration(10<<min(attempt, 6)) * time.Millisecond):
					}
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.Concat(pages...), nil
}

// LoadUsers reads the config items of the usernames.
func (s *CommandStore) LoadUsers(ctx context.Context, t commands.Tenant, usernames []string) (map[string]commands.UserAggregate, error) {
	// BatchGetItem refuses a request that names a key twice.
	keys := make([]map[string]types.AttributeValue, 0, len(usernames))
	seen := make(map[string]bool, len(usernames))
	for _, u := range usernames {
		if !seen[u] {
			seen[u] = true
			keys = append(keys, map[string]types.AttributeValue{"id": str(UserID(u)), "sk": str(SKConfig)})
		}
	}
	items, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]commands.UserAggregate, len(items))
	for _, it := range items {
		agg, err := userAggregate(it)
		if err != nil {
			return nil, err
		}
		out[agg.State.Username] = agg
	}
	return out, nil
}

// Memberships are the user ids of the membership items in the group of the usernames that
// have one.
func (s *CommandStore) Memberships(ctx context.Context, t commands.Tenant, groupKey string, usernames []string) (map[string]string, error) {
	if len(usernames) == 1 {
		// A single member command's read, as cheap as it was before batches.
		item, err := s.get(ctx, s.table(t), GroupID(groupKey), MemberSK(usernames[0]))
		if err != nil || item == nil {
			return map[string]string{}, err
		}
		return map[string]string{usernames[0]: getS(item, "user_id")}, nil
	}
	keys := make([]map[string]types.AttributeValue, len(usernames))
	for i, u := range usernames {
		keys[i] = map[string]types.AttributeValue{"id": str(GroupID(groupKey)), "sk": str(MemberSK(u))}
	}
	items, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		out[getS(it, "sk")[len(skMember):]] = getS(it, "user_id")
	}
	return out, nil
}

// membersWriteConcurrency bounds the BatchWriteItem requests of one members change in
// flight. A change's items are written while other commands run (an import creates users
// beside its members changes), and more requests at once take more of the table from them
// than they give the change. 1,500 creates at concurrency 8 beside members changes of 150
// users each, against the same creates alone, in alternating rounds (throwaway tests on
// DynamoDB Local, 2026-11-26): with 8 requests at a time a median of 0.81 (10 rounds; 2 at
// a time 0.87 in the same test); with 4, 0.91 and 0.90 (two tests of 8 rounds; 2 at a
// time 0.86, 1 at a time 0.83 and 0.84, the change's own writes then lagging behind).
const membersWriteConcurrency = 4

// WriteMembers writes a members change's items with BatchWriteItem, 25 a request, up to
// membersWriteConcurrency requests at a time: the added users' group pointers, then their
// memberships, then the removed memberships with their pointers. Each phase ends before
// the next starts, so that a membership is never there without its pointer. before is
// called before every request, each retry included (the lease guard of a members change:
// a retry must not go out after the lease could have run out).
func (s *CommandStore) WriteMembers(ctx context.Context, t commands.Tenant, w commands.MembersWrite, before func(context.Context) error) error {
	at := str(FormatTime(w.At))
	var pointers, members, removals, due []types.WriteRequest
	for _, m := range w.Added {
		if m.ExpiresAt != nil {
			// The due index's entry first: a membership never expires unseen.
			due = append(due, types.WriteRequest{PutRequest: &types.PutRequest{
				Item: ExpiryDueItem(t, commands.ExpiryDue{GroupID: w.GroupID, UserID: m.UserID, At: *m.ExpiresAt}),
			}})
		}
		pointers = append(pointers, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"id": str(UserID(m.Username)), "sk": str(GroupPointerSK(w.GroupKey)), "group_key": str(w.GroupKey), "added_at": at,
		}}})
		members = append(members, types.WriteRequest{PutRequest: &types.PutRequest{
			Item: withExpiry(MemberItem(w.GroupKey, m.Username, m.UserID, m.MembershipRev, w.Version, FormatTime(w.At)), m.ExpiresAt),
		}})
	}
	for _, m := range w.Removed {
		removals = append(removals, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
			Key: map[string]types.AttributeValue{"id": str(GroupID(w.GroupKey)), "sk": str(MemberSK(m.Username))},
		}})
	}
	var unpointed []types.WriteRequest
	for _, m := range w.Removed {
		unpointed = append(unpointed, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
			Key: map[string]types.AttributeValue{"id": str(UserID(m.Username)), "sk": str(GroupPointerSK(w.GroupKey))},
		}})
	}
	table := s.table(t)
	for i, phase := range [][]types.WriteRequest{due, pointers, members, removals, unpointed} {
		into := table
		if i == 0 {
			into = s.names.StreamLeases()
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(membersWriteConcurrency)
		for batch := range slices.Chunk(phase, 25) {
			g.Go(func() error { return batchWriteGuarded(gctx, s.db, into, batch, before) })
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("write members of %s v%d: %w", w.GroupKey, w.Version, err)
		}
	}
	return nil
}

// UndoMembers removes each membership (with its pointer) only if it is still the one the
// change at version wrote for that user.
func (s *CommandStore) UndoMembers(ctx context.Context, t commands.Tenant, groupKey string, version int64, members []events.Member) error {
	table := s.table(t)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cleanupConcurrency)
	for _, m := range members {
		g.Go(func() error {
			_, err := s.db.TransactWriteItems(gctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Delete: &types.Delete{TableName: aws.String(table),
					Key:                       map[string]types.AttributeValue{"id": str(GroupID(groupKey)), "sk": str(MemberSK(m.Username))},
					ConditionExpression:       aws.String("user_id = :u AND group_version = :v"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(m.UserID), ":v": num(version)}}},
				{Delete: &types.Delete{TableName: aws.String(table),
					Key: map[string]types.AttributeValue{"id": str(UserID(m.Username)), "sk": str(GroupPointerSK(groupKey))}}},
			}})
			var tce *types.TransactionCanceledException
			if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
				return nil // gone already, or another incarnation's now
			}
			if err != nil {
				return fmt.Errorf("undo membership of %s in %s: %w", logUser(m.Username), groupKey, translate(err))
			}
			return nil
		})
	}
	return g.Wait()
}

// LeaseMembers gives the lease of a group's pending members change to l.Owner.
func (s *CommandStore) LeaseMembers(ctx context.Context, t commands.Tenant, groupKey string, l commands.MembersLease, now time.Time) (bool, error) {
	ok, err := s.leasePending(ctx, t, GroupID(groupKey), l, now)
	if err != nil {
		return false, fmt.Errorf("lease members change of %s v%d: %w", groupKey, l.Version, err)
	}
	return ok, nil
}

// FinishMembers clears the pending mark of l's members change while l.Owner holds it.
func (s *CommandStore) FinishMembers(ctx context.Context, t commands.Tenant, groupKey string, l commands.MembersLease) error {
	if err := s.finishPending(ctx, t, GroupID(groupKey), l); err != nil {
		return fmt.Errorf("finish members change of %s v%d: %w", groupKey, l.Version, err)
	}
	return nil
}

// leasePending gives the lease of the pending change at l.Version on aggregate id's config
// (a group's members change, a user's rename move) to l.Owner, if the lease is l.Owner's
// or ran out before now; false when another holds it or the change is no longer pending.
func (s *CommandStore) leasePending(ctx context.Context, t commands.Tenant, id string, l commands.MembersLease, now time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table(t)),
		Key:                 map[string]types.AttributeValue{"id": str(id), "sk": str(SKConfig)},
		UpdateExpression:    aws.String("SET members_owner = :o, members_lease_until = :u"),
		ConditionExpression: aws.String("members_pending = :v AND (members_owner = :o OR members_lease_until < :now)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": str(l.Owner), ":u": num(l.Until.UnixMilli()), ":v": num(l.Version), ":now": num(now.UnixMilli()),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, notFoundTenant(err)
	}
	return true, nil
}

// finishPending clears the pending mark of l's change on aggregate id's config while
// l.Owner holds it; a mark already cleared or taken over is left as it is.
func (s *CommandStore) finishPending(ctx context.Context, t commands.Tenant, id string, l commands.MembersLease) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table(t)),
		Key:                       map[string]types.AttributeValue{"id": str(id), "sk": str(SKConfig)},
		UpdateExpression:          aws.String("REMOVE members_pending, members_owner, members_lease_until"),
		ConditionExpression:       aws.String("members_pending = :v AND members_owner = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": str(l.Owner), ":v": num(l.Version)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return notFoundTenant(err)
	}
	return nil
}

// guardedRetries bounds the tries of one guarded request (throttled, unavailable or with
// items left unprocessed).
const guardedRetries = 10

// batchWriteGuarded writes up to 25 requests like BatchWrite, calling guard before every
// request: the SDK's own retries are off for it (each would be a request the guard did not
// see), and throttling, unavailability and unprocessed items are retried here instead.
func batchWriteGuarded(ctx context.Context, db *dynamodb.Client, table string, batch []types.WriteRequest, guard func(context.Context) error) error {
	for attempt := 0; len(batch) > 0; attempt++ {
		if err := guard(ctx); err != nil {
			return err
		}
		out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: batch}},
			func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 })
		switch {
		case err != nil && (!isUnavailable(err) || attempt >= guardedRetries || ctx.Err() != nil):
			return fmt.Errorf("batch write %s: %w", table, translate(err))
		case err == nil:
			batch = out.UnprocessedItems[table]
			if len(batch) > 0 && attempt >= guardedRetries {
				return apperr.Unavailable(fmt.Errorf("batch write %s: %d items unprocessed", table, len(batch)), retryAfter)
			}
		}
		if len(batch) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(10<<min(attempt, 6)) * time.Millisecond):
		}
	}
	return nil
}
