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

// MemberStates reads the membership items of username in the groups, strongly
// consistently.
func (s *CommandStore) MemberStates(ctx context.Context, t commands.Tenant, username string, groupKeys []string) (map[string]commands.MemberState, error) {
	out := map[string]commands.MemberState{}
	if len(groupKeys) == 0 {
		return out, nil
	}
	keys := make([]map[string]types.AttributeValue, len(groupKeys))
	for i, g := range groupKeys {
		keys[i] = map[string]types.AttributeValue{"id": str(GroupID(g)), "sk": str(MemberSK(username))}
	}
	items, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return nil, fmt.Errorf("get memberships of a user: %w", err)
	}
	for _, it := range items {
		st, err := DecodeStateItem(it)
		if err != nil {
			return nil, fmt.Errorf("decode membership %s: %w", getS(it, "id"), err)
		}
		added, _ := ParseTime(st.AddedAt)
		out[getS(it, "id")[len("group#"):]] = commands.MemberState{
			UserID: st.UserID, GroupVersion: st.GroupVersion, MembershipRev: st.MembershipRev, AddedAt: added,
			ExpiresAt: st.Expiry(),
		}
	}
	return out, nil
}

// AppendRename writes a user rename in one TransactWriteItems (docs/storage.md,
// "Renames"): the person's config under the new name (conditioned on that name's
// version), marked with the rename as pending when memberships move, and its history
// record there, which lists them; the old name's tombstone (conditioned on the old
// version and on the renamer's mark, which every command naming the old name has waited
// for since the rename read the memberships), marked with the new name while they move;
// its membership revision taken as a delete takes it, and the count of user deletes
// raised (a members change that added the old name meanwhile must look again); the new
// name's membership revision taken; the email guard handed to the new name; the lookups
// pointed at it. The memberships move after it (MoveUserMemberships), a few in each
// transaction, so that a person in any number of groups can be renamed.
func (s *CommandStore) AppendRename(ctx context.Context, t commands.Tenant, r commands.UserRename) error {
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
	if c.ExpectedVersion == 0 {
		put.ConditionExpression = aws.String("attribute_not_exists(id)")
	} else {
		put.ConditionExpression = aws.String("version = :v AND deleted = :t")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(c.ExpectedVersion), ":t": boolean(true)}
	}
	add(roleVersion, types.TransactWriteItem{Put: put})

	var ttl int64
	if s.historyRetention > 0 {
		ttl = c.Event.OccurredAt.Add(s.historyRetention).Unix()
	}
	record, err := EncodeRecord(c.Event, now, ttl)
	if err != nil {
		return err
	}
	add(roleVersion, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table), Item: record, ConditionExpression: aws.String("attribute_not_exists(sk)"),
	}})

	tomb, err := UserConfigItem(r.Tombstone, "", false)
	if err != nil {
		return err
	}
	to := c.Event.Key
	if len(r.Memberships) > 0 {
		tomb["moved_to"], tomb["moved_version"] = str(to), num(c.Event.Version)
	}
	add(roleVersion, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table), Item: tomb,
		ConditionExpression: aws.String("version = :v AND deleted = :f AND renaming_owner = :o"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":v": num(r.FromVersion), ":f": boolean(false), ":o": str(r.Mark),
		},
	}})
	add(roleNone, types.TransactWriteItem{Update: countUserDelete(table, r.From)})

	for _, rv := range []struct {
		username string
		rev      int64
	}{{r.From, r.FromMembershipRev}, {to, r.ToMembershipRev}} {
		revPut := &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"id": str(UserID(rv.username)), "sk": str(SKMemberships), "rev": num(rv.rev + 1),
		}}
		revCondition(&revPut.ConditionExpression, &revPut.ExpressionAttributeValues, rv.rev)
		add(roleMembership, types.TransactWriteItem{Put: revPut})
	}
	if r.Email != "" {
		add(roleVersion, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(table), Item: EmailGuardItem(r.Email, to),
			ConditionExpression:       aws.String("username = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(r.From)},
		}})
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
		return fmt.Errorf("rename to v%d has %d items, more than a transaction holds", c.Event.Version, len(items))
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return fmt.Errorf("append rename v%d: %w", c.Event.Version, notFoundTenant(err))
	}
	err = s.explain(ctx, c, tce, roles)
	if errors.Is(err, commands.ErrMembershipConflict) {
		// A membership revision moved: a join or a delete came in between; decide again.
		return commands.ErrVersionConflict
	}
	return err
}
