package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
)

// GroupMemberStates reads the membership items of a group, strongly consistently, in
// username order: at most limit of them.
func (s *CommandStore) GroupMemberStates(ctx context.Context, t commands.Tenant, key string, limit int) ([]commands.GroupMember, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table(t)),
		KeyConditionExpression:    aws.String("id = :id AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(GroupID(key)), ":p": str(skMember)},
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(min(limit, 1000))),
	}
	var out []commands.GroupMember
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() && len(out) < limit {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query members of a group: %w", notFoundTenant(err))
		}
		for _, it := range page.Items {
			st, err := DecodeStateItem(it)
			if err != nil {
				return nil, fmt.Errorf("decode membership %s: %w", getS(it, "id"), err)
			}
			added, _ := ParseTime(st.AddedAt)
			out = append(out, commands.GroupMember{Username: getS(it, "sk")[len(skMember):], MemberState: commands.MemberState{
				UserID: st.UserID, GroupVersion: st.GroupVersion, MembershipRev: st.MembershipRev, AddedAt: added,
				ExpiresAt: st.Expiry(),
			}})
		}
	}
	return out[:min(len(out), limit)], nil
}

// AppendGroupRename writes a group rename in one TransactWriteItems (docs/storage.md,
// "Group renames"): the group's config under the new key (conditioned on that key's
// version), marked with the rename as a pending change when it has memberships to move,
// and its history record there, which lists them; when the key changes, the old key's
// tombstone, conditioned on the old version, on no members change pending and on no
// member renamed since the rename read the group (so a join, a leave, any group command
// or a member's rename in between makes the rename decide again), and marked with where
// its memberships are moving; the counts of user deletes read before the members' users
// (a member deleted or erased in between makes it decide again); the lookups pointed at
// the new key. The memberships move
// after it (commands.RenameGroupHandler, MoveMembers), in as many requests as they need.
func (s *CommandStore) AppendGroupRename(ctx context.Context, t commands.Tenant, r commands.GroupRename) error {
	table := s.table(t)
	c := r.Change
	now := s.now()
	var (
		items []types.TransactWriteItem
		roles []role
	)
	add := func(ro role, it types.TransactWriteItem) { items = append(items, it); roles = append(roles, ro) }

	config, err := s.configItem(c)
	if err != nil {
		return err
	}
	put := &types.Put{TableName: aws.String(table), Item: config}
	switch {
	case !r.Moves():
		put.ConditionExpression = aws.String("version = :v AND deleted = :f AND attribute_not_exists(members_pending)")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(c.ExpectedVersion), ":f": boolean(false)}
	case c.ExpectedVersion == 0:
		put.ConditionExpression = aws.String("attribute_not_exists(id)")
	default:
		put.ConditionExpression = aws.String("version = :v AND deleted = :t")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(c.ExpectedVersion), ":t": boolean(true)}
	}
	add(roleVersion, types.TransactWriteItem{Put: put})

	var ttl int64
	if s.historyRetention > 0 {
		ttl = c.Event.OccurredAt.Add(s.historyRetention).Unix()
	}
	record, parts, err := EncodeRecordParts(c.Event, now, ttl)
	if err != nil {
		return err
	}
	add(roleVersion, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table), Item: record, ConditionExpression: aws.String("attribute_not_exists(sk)"),
	}})
	for _, part := range parts {
		add(roleNone, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: part}})
	}

	indexWrites, indexPending := memberIndexWrites(table, c.Event)
	for _, w := range indexWrites {
		add(roleNone, w)
	}

	to := c.Event.Key
	if r.Moves() {
		tomb, err := GroupConfigItem(r.Tombstone, false, nil)
		if err != nil {
			return err
		}
		if len(r.Members) > 0 {
			tomb["moved_to"], tomb["moved_version"] = str(to), num(c.Event.Version)
		}
		cond := "version = :v AND deleted = :f AND attribute_not_exists(members_pending) AND "
		values := map[string]types.AttributeValue{":v": num(r.FromVersion), ":f": boolean(false)}
		if r.FromMemberMoves == 0 {
			cond += "attribute_not_exists(member_moves)"
		} else {
			cond += "member_moves = :m"
			values[":m"] = num(r.FromMemberMoves)
		}
		add(roleVersion, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(table), Item: tomb, ConditionExpression: aws.String(cond), ExpressionAttributeValues: values,
		}})
	}
	for _, check := range deleteCountChecks(table, c.DeleteCounts) {
		// A count moved: a member the rename lists may be gone; it decides again.
		add(roleVersion, check)
	}
	for _, l := range c.PutLookups {
		add(roleNone, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: lookupItem(l)}})
	}
	if c.Idempotency != nil {
		put, err := s.idempotencyWrite(c, now)
		if err != nil {
			return err
		}
		add(roleIdempotency, types.TransactWriteItem{Put: put})
	}
	if len(items) > maxTransactItems {
		return fmt.Errorf("group rename to v%d has %d items, more than a transaction holds", c.Event.Version, len(items))
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		if indexPending {
			s.indexPending(ctx, table, c.Event)
		}
		return nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return fmt.Errorf("append group rename v%d: %w", c.Event.Version, notFoundTenant(err))
	}
	return s.explain(ctx, c, tce, roles)
}
