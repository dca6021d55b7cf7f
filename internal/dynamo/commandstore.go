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
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

var _ commands.Store = (*CommandStore)(nil)

// maxTransactItems is DynamoDB's limit of items in one TransactWriteItems.
const maxTransactItems = 100

// fixedItems is the most items a change writes besides its membership removals: config,
// history, email guard claimed and released, membership revision check, idempotency
// record, two lookup pointers (an update replaces the external id's: one written, one
// removed; a delete removes the id's and the external id's), a delete's count of user
// deletes, the count of live users or groups (livecount.go) and an erasure's ledger entry.
const fixedItems = 10

// idempotencyWindow is how long an Idempotency-Key is remembered (API.md: 24 h).
const idempotencyWindow = 24 * time.Hour

// CommandStore is the write model of every tenant (docs/storage.md).
type CommandStore struct {
	db               *dynamodb.Client
	names            Names
	registry         *events.Registry
	historyRetention time.Duration
	now              func() time.Time
}

// NewCommandStore is the write model; historyRetention > 0 sets `ttl` on history records.
func NewCommandStore(db *dynamodb.Client, names Names, reg *events.Registry, historyRetention time.Duration) *CommandStore {
	return &CommandStore{db: db, names: names, registry: reg, historyRetention: historyRetention, now: time.Now}
}

func (s *CommandStore) table(t commands.Tenant) string { return s.names.Commands(t.System, t.ID) }

// notFoundTenant maps a missing table to an unknown tenant.
func notFoundTenant(err error) error {
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &rnf) {
		return apperr.NotFound("tenant")
	}
	return translate(err)
}

func (s *CommandStore) get(ctx context.Context, table, id, sk string) (map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(table),
		Key:            map[string]types.AttributeValue{"id": str(id), "sk": str(sk)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", logID(id), logSK(sk), notFoundTenant(err))
	}
	return out.Item, nil
}

// LoadUser reads a user's config item.
func (s *CommandStore) LoadUser(ctx context.Context, t commands.Tenant, username string) (commands.UserAggregate, error) {
	item, err := s.get(ctx, s.table(t), UserID(username), SKConfig)
	if err != nil || item == nil {
		return commands.UserAggregate{}, err
	}
	return userAggregate(item)
}

func userAggregate(item map[string]types.AttributeValue) (commands.UserAggregate, error) {
	var it userItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return commands.UserAggregate{}, fmt.Errorf("decode user %s: %w", logID(getS(item, "id")), err)
	}
	created, _ := ParseTime(it.CreatedAt)
	updated, _ := ParseTime(it.UpdatedAt)
	var named time.Time
	if it.NamedAt != "" {
		named, _ = ParseTime(it.NamedAt)
	}
	return commands.UserAggregate{
		Exists: true,
		State: events.User{
			ID: it.UserID, Username: it.Username, Email: it.Email, FirstName: it.FirstName, LastName: it.LastName,
			IsActive: it.IsActive, Attributes: it.Attributes, Version: it.Version, CreatedAt: created, UpdatedAt: updated,
			Deleted: it.Deleted, DeletedMembershipRev: it.DeletedMembershipRev,
			NamedAt: named, FormerNames: DecodeFormerNames(it.FormerNames),
		},
		PasswordCiphertext: it.Password,
		CleanupPending:     it.CleanupPending,
		ErasureID:          it.ErasureID,
		Renaming:           lease(it.Version, it.RenamingOwner, it.RenamingUntil),
		Pending:            lease(it.MembersPending, it.MembersOwner, it.MembersLeaseUntil),
		MovedTo:            it.MovedTo,
		MovedVersion:       it.MovedVersion,
	}, nil
}

// lease is the stored lease of owner until (epoch ms) at version; nil when there is none.
func lease(version int64, owner string, until int64) *commands.MembersLease {
	if owner == "" {
		return nil
	}
	return &commands.MembersLease{Version: version, Owner: owner, Until: time.UnixMilli(until)}
}

// LoadGroup reads a group's config item.
func (s *CommandStore) LoadGroup(ctx context.Context, t commands.Tenant, key string) (commands.GroupAggregate, error) {
	item, err := s.get(ctx, s.table(t), GroupID(key), SKConfig)
	if err != nil || item == nil {
		return commands.GroupAggregate{}, err
	}
	return decodeGroup(item)
}

func decodeGroup(item map[string]types.AttributeValue) (commands.GroupAggregate, error) {
	var it groupItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return commands.GroupAggregate{}, fmt.Errorf("decode group %s: %w", getS(item, "id"), err)
	}
	return groupAggregate(it), nil
}

func groupAggregate(it groupItem) commands.GroupAggregate {
	created, _ := ParseTime(it.CreatedAt)
	updated, _ := ParseTime(it.UpdatedAt)
	agg := commands.GroupAggregate{
		Exists: true,
		State: events.Group{
			ID: it.GroupID, Key: it.Key, Name: it.Name, Description: it.Description, Attributes: it.Attributes,
			Version: it.Version, CreatedAt: created, UpdatedAt: updated, Deleted: it.Deleted,
			LastDeletedVersion: it.LastDeletedVersion, FormerNames: DecodeFormerGroupNames(it.FormerNames),
		},
		CleanupPending: it.CleanupPending,
		MemberMoves:    it.MemberMoves,
		MovedTo:        it.MovedTo,
		MovedVersion:   it.MovedVersion,
	}
	if it.NamedAt != "" {
		agg.State.NamedAt, _ = ParseTime(it.NamedAt)
	}
	if it.MembersPending > 0 {
		agg.Pending = &commands.MembersLease{Version: it.MembersPending, Owner: it.MembersOwner, Until: time.UnixMilli(it.MembersLeaseUntil)}
	}
	return agg
}

// queryKeys pages through a partition's sort keys that begin with prefix ("": all of
// them), consistently.
func (s *CommandStore) queryKeys(ctx context.Context, table, id, prefix string, fn func(map[string]types.AttributeValue)) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("id = :id AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(id), ":p": str(prefix)},
		ConsistentRead:            aws.Bool(true),
	}
	if prefix == "" {
		in.KeyConditionExpression = aws.String("id = :id")
		delete(in.ExpressionAttributeValues, ":p")
	}
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("query %s %s*: %w", logID(id), logSK(prefix), notFoundTenant(err))
		}
		for _, it := range page.Items {
			fn(it)
		}
	}
	return nil
}

// UserMemberships is the user's membership revision and the keys of its groups.
func (s *CommandStore) UserMemberships(ctx context.Context, t commands.Tenant, username string) (int64, []string, error) {
	item, err := s.get(ctx, s.table(t), UserID(username), SKMemberships)
	if err != nil {
		return 0, nil, err
	}
	var rev int64
	if item != nil {
		if rev, err = getN(item, "rev"); err != nil {
			return 0, nil, err
		}
	}
	var groups []string
	err = s.queryKeys(ctx, s.table(t), UserID(username), skGroupPtr, func(it map[string]types.AttributeValue) {
		groups = append(groups, getS(it, "sk")[len(skGroupPtr):])
	})
	return rev, groups, err
}

// GroupMembers are the memberships of a group.
func (s *CommandStore) GroupMembers(ctx context.Context, t commands.Tenant, key string) ([]commands.Membership, error) {
	var ms []commands.Membership
	err := s.queryKeys(ctx, s.table(t), GroupID(key), skMember, func(it map[string]types.AttributeValue) {
		ms = append(ms, commands.Membership{GroupKey: key, Username: getS(it, "sk")[len(skMember):], UserID: getS(it, "user_id")})
	})
	return ms, err
}

// IsMember reports whether the user is in the group.
func (s *CommandStore) IsMember(ctx context.Context, t commands.Tenant, groupKey, username string) (bool, error) {
	item, err := s.get(ctx, s.table(t), GroupID(groupKey), MemberSK(username))
	return item != nil, err
}

// MaxMembersPerChange is how many memberships (two items each) fit beside the fixed items.
func (s *CommandStore) MaxMembersPerChange() int { return (maxTransactItems - fixedItems) / 2 }

// role is what a transaction item guards, to explain a cancellation.
type role int

const (
	roleNone role = iota
	roleVersion
	roleEmail
	roleUserLive
	roleMembership
	roleIdempotency
)

// Append writes a change in one TransactWriteItems.
func (s *CommandStore) Append(ctx context.Context, t commands.Tenant, c commands.Change) error {
	table := s.table(t)
	now := s.now()
	var (
		items []types.TransactWriteItem
		roles []role
	)
	add := func(r role, it types.TransactWriteItem) { items = append(items, it); roles = append(roles, r) }

	config, err := s.configItem(c)
	if err != nil {
		return err
	}
	put := &types.Put{TableName: aws.String(table), Item: config}
	if c.ExpectedVersion == 0 {
		put.ConditionExpression = aws.String("attribute_not_exists(id)")
	} else {
		put.ConditionExpression = aws.String("version = :v")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(c.ExpectedVersion)}
		if mm := c.ExpectedMemberMoves; mm != nil && *mm == 0 {
			put.ConditionExpression = aws.String("version = :v AND attribute_not_exists(member_moves)")
		} else if mm != nil {
			put.ConditionExpression = aws.String("version = :v AND member_moves = :mm")
			put.ExpressionAttributeValues[":mm"] = num(*mm)
		}
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

	username := c.Event.Key
	if c.ClaimEmail != "" {
		add(roleEmail, types.TransactWriteItem{Put: &types.Put{
			TableName:                 aws.String(table),
			Item:                      EmailGuardItem(c.ClaimEmail, username),
			ConditionExpression:       aws.String("attribute_not_exists(id) OR username = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(username)},
		}})
	}
	if c.ReleaseEmail != "" {
		add(roleVersion, types.TransactWriteItem{Delete: &types.Delete{
			TableName:                 aws.String(table),
			Key:                       EmailGuardKey(c.ReleaseEmail),
			ConditionExpression:       aws.String("attribute_not_exists(id) OR username = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(username)},
		}})
	}
	if m := c.AddMember; m != nil {
		rev := *c.ExpectedMembershipRev
		at := str(FormatTime(c.Event.OccurredAt))
		add(roleNone, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table),
			Item: withExpiry(MemberItem(m.GroupKey, m.Username, m.UserID, rev+1, c.Event.Version, FormatTime(c.Event.OccurredAt)), m.ExpiresAt)}})
		add(roleNone, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"id": str(UserID(m.Username)), "sk": str(GroupPointerSK(m.GroupKey)), "group_key": str(m.GroupKey), "added_at": at,
		}}})
		add(roleUserLive, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName:                 aws.String(table),
			Key:                       map[string]types.AttributeValue{"id": str(UserID(m.Username)), "sk": str(SKConfig)},
			ConditionExpression:       aws.String("attribute_exists(id) AND deleted = :f"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":f": boolean(false)},
		}})
		revPut := &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"id": str(UserID(m.Username)), "sk": str(SKMemberships), "rev": num(rev + 1),
		}}
		revCondition(&revPut.ConditionExpression, &revPut.ExpressionAttributeValues, rev)
		add(roleMembership, types.TransactWriteItem{Put: revPut})
	} else if c.ExpectedMembershipRev != nil {
		// A user delete takes the next revision (commands.DeleteUserHandler).
		rev := *c.ExpectedMembershipRev
		revPut := &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"id": str(UserID(username)), "sk": str(SKMemberships), "rev": num(rev + 1),
		}}
		revCondition(&revPut.ConditionExpression, &revPut.ExpressionAttributeValues, rev)
		add(roleMembership, types.TransactWriteItem{Put: revPut})
	}
	for _, m := range c.RemoveMembers {
		del := &types.Delete{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"id": str(GroupID(m.GroupKey)), "sk": str(MemberSK(m.Username))}}
		if c.RequireMembers {
			del.ConditionExpression = aws.String("attribute_exists(id)")
			if c.RequireExpiresAt != nil {
				del.ConditionExpression = aws.String("attribute_exists(id) AND expires_at = :e")
				del.ExpressionAttributeValues = map[string]types.AttributeValue{":e": str(FormatTime(*c.RequireExpiresAt))}
			}
		}
		add(roleVersion, types.TransactWriteItem{Delete: del})
		add(roleNone, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"id": str(UserID(m.Username)), "sk": str(GroupPointerSK(m.GroupKey))}}})
	}
	if e := c.SetExpiry; e != nil {
		add(roleVersion, types.TransactWriteItem{Update: setExpiryUpdate(table, *e)})
	}
	if c.Due != nil {
		add(roleNone, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.names.StreamLeases()), Item: ExpiryDueItem(t, *c.Due)}})
	}
	if c.User != nil && c.User.State.Deleted {
		add(roleNone, types.TransactWriteItem{Update: countUserDelete(table, username)})
	}
	for _, check := range deleteCountChecks(table, c.DeleteCounts) {
		// A count moved: a user the change names may be gone; it decides again.
		add(roleVersion, check)
	}
	for _, l := range c.PutLookups {
		add(roleNone, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: lookupItem(l)}})
	}
	for _, l := range c.DeleteLookups {
		add(roleNone, types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String(table), Key: lookupKey(l.Kind, l.By, l.Value, l.ID)}})
	}
	for _, u := range liveCountItems(table, c.PutLookups, c.DeleteLookups) {
		add(roleNone, u)
	}
	if c.Idempotency != nil {
		put, err := s.idempotencyWrite(c, now)
		if err != nil {
			return err
		}
		add(roleIdempotency, types.TransactWriteItem{Put: put})
	}
	if c.Erasure != nil {
		put, err := ErasureLedgerPut(s.names.Erasures(), t.System, t.ID, *c.Erasure)
		if err != nil {
			return err
		}
		add(roleNone, types.TransactWriteItem{Put: put})
	}
	if len(items) > maxTransactItems {
		return fmt.Errorf("change of %s v%d has %d items, more than a transaction holds", logAgg(c.Event.Kind, c.Event.Key), c.Event.Version, len(items))
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
		return fmt.Errorf("append %s v%d: %w", logAgg(c.Event.Kind, c.Event.Key), c.Event.Version, notFoundTenant(err))
	}
	return s.explain(ctx, c, tce, roles)
}

func revCondition(expr **string, values *map[string]types.AttributeValue, rev int64) {
	if rev == 0 {
		*expr = aws.String("attribute_not_exists(id)")
		return
	}
	*expr = aws.String("rev = :r")
	*values = map[string]types.AttributeValue{":r": num(rev)}
}

// explain turns a cancelled transaction into the conflict that caused it.
func (s *CommandStore) explain(ctx context.Context, c commands.Change, tce *types.TransactionCanceledException, roles []role) error {
	failed := map[role]bool{}
	for i, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "ConditionalCheckFailed":
			if i < len(roles) {
				failed[roles[i]] = true
			}
		case "TransactionConflict":
			return commands.ErrVersionConflict
		case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			return apperr.Unavailable(tce, retryAfter)
		}
	}
	switch {
	case failed[roleIdempotency]:
		return s.replayOrReused(ctx, *c.Idempotency)
	case failed[roleVersion]:
		return commands.ErrVersionConflict
	case failed[roleUserLive]:
		return commands.ErrUserGone
	case failed[roleMembership]:
		return commands.ErrMembershipConflict
	case failed[roleEmail]:
		return commands.ErrEmailTaken
	}
	return fmt.Errorf("append %s v%d: %w", logAgg(c.Event.Kind, c.Event.Key), c.Event.Version, tce)
}

func (s *CommandStore) configItem(c commands.Change) (map[string]types.AttributeValue, error) {
	switch {
	case c.User != nil:
		item, err := UserConfigItem(c.User.State, c.User.PasswordCiphertext, c.User.CleanupPending)
		if err == nil && c.User.ErasureID != "" {
			item["erasure_id"] = str(c.User.ErasureID)
		}
		if p := c.User.Pending; err == nil && p != nil {
			item["members_pending"], item["members_owner"], item["members_lease_until"] = num(p.Version), str(p.Owner), num(p.Until.UnixMilli())
		}
		return item, err
	case c.Group != nil:
		return GroupConfigItem(c.Group.State, c.Group.CleanupPending, c.Group.Pending)
	}
	return nil, errors.New("change has neither user nor group state")
}

// RemoveMembersAfter deletes memberships left over by a delete, then clears the cleanup
// mark. Each membership goes in its own transaction with its group pointer, conditioned
// as commands.Cleanup says, so that a clean-up running late never removes a membership
// made after the delete; an absent membership passes, so an interrupted run can simply
// run again.
func (s *CommandStore) RemoveMembersAfter(ctx context.Context, t commands.Tenant, c commands.Cleanup) error {
	table := s.table(t)
	cond := aws.String("attribute_not_exists(id) OR group_version < :v")
	values := map[string]types.AttributeValue{":v": num(c.Version)}
	if c.Kind == events.KindUser {
		cond = aws.String("attribute_not_exists(id) OR membership_rev <= :r")
		values = map[string]types.AttributeValue{":r": num(c.MembershipRev)}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cleanupConcurrency)
	for _, m := range c.Members {
		g.Go(func() error {
			_, err := s.db.TransactWriteItems(gctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Delete: &types.Delete{TableName: aws.String(table), ConditionExpression: cond, ExpressionAttributeValues: values,
					Key: map[string]types.AttributeValue{"id": str(GroupID(m.GroupKey)), "sk": str(MemberSK(m.Username))}}},
				{Delete: &types.Delete{TableName: aws.String(table),
					Key: map[string]types.AttributeValue{"id": str(UserID(m.Username)), "sk": str(GroupPointerSK(m.GroupKey))}}},
			}})
			var tce *types.TransactionCanceledException
			if errors.As(err, &tce) && len(tce.CancellationReasons) > 0 && aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
				return nil // a membership made after the delete
			}
			if err != nil {
				return fmt.Errorf("remove membership of %s in %s: %w", logUser(m.Username), m.GroupKey, translate(err))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"id": str(AggregateID(c.Kind, c.Key)), "sk": str(SKConfig)},
		UpdateExpression:          aws.String("REMOVE cleanup_pending"),
		ConditionExpression:       aws.String("version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(c.Version)},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("clear cleanup mark of %s: %w", logAgg(c.Kind, c.Key), translate(err))
	}
	return nil
}

// cleanupConcurrency bounds the transactions of one clean-up in flight.
const cleanupConcurrency = 8

// BatchWrite writes requests in batches of 25, retrying unprocessed items with backoff.
func BatchWrite(ctx context.Context, db *dynamodb.Client, table string, reqs []types.WriteRequest) error {
	for start := 0; start < len(reqs); start += 25 {
		batch := reqs[start:min(start+25, len(reqs))]
		for attempt := 0; len(batch) > 0; attempt++ {
			out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: batch}})
			if err != nil {
				return fmt.Errorf("batch write %s: %w", table, translate(err))
			}
			batch = out.UnprocessedItems[table]
			if len(batch) > 0 {
				if attempt > 10 {
					return apperr.Unavailable(fmt.Errorf("batch write %s: %d items unprocessed", table, len(batch)), retryAfter)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(10<<min(attempt, 6)) * time.Millisecond):
				}
			}
		}
	}
	return nil
}

// LoadRecord reads the immutable record of one version of an aggregate.
func (s *CommandStore) LoadRecord(ctx context.Context, t commands.Tenant, kind events.AggregateKind, key string, version int64) (events.Envelope, error) {
	item, err := s.get(ctx, s.table(t), AggregateID(kind, key), HistorySK(version))
	if err != nil {
		return events.Envelope{}, err
	}
	if item == nil {
		return events.Envelope{}, fmt.Errorf("record %s v%d: %w", logAgg(kind, key), version, commands.ErrRecordGone)
	}
	env, err := DecodeRecord(s.registry, item)
	if err != nil {
		return env, err
	}
	return env, s.JoinRecordParts(ctx, t, item, &env)
}

// JoinRecordParts joins into env, decoded from a record item of the tenant's write table
// (or a stream image of one), the members its parts list (none when it has no parts).
func (s *CommandStore) JoinRecordParts(ctx context.Context, t commands.Tenant, item map[string]types.AttributeValue, env *events.Envelope) error {
	if RecordParts(item) == 0 {
		return nil
	}
	return JoinParts(ctx, s.db, s.registry, s.table(t), item, env)
}

// GroupMembersUpTo are at most n of a group's memberships (in the order of their
// usernames), read with Queries of at most n+1 items in all; more reports that the group
// has more than n, so that a caller that would drop a list too long reads no more of it.
func (s *CommandStore) GroupMembersUpTo(ctx context.Context, t commands.Tenant, key string, n int) (ms []commands.Membership, more bool, err error) {
	if n < 0 {
		n = 0
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table(t)),
		KeyConditionExpression:    aws.String("id = :id AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(GroupID(key)), ":p": str(skMember)},
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(n + 1)),
	}
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("query %s members: %w", GroupID(key), notFoundTenant(err))
		}
		for _, it := range res.Items {
			if len(ms) == n {
				return ms, true, nil
			}
			ms = append(ms, commands.Membership{GroupKey: key, Username: getS(it, "sk")[len(skMember):], UserID: getS(it, "user_id")})
		}
		if len(res.LastEvaluatedKey) == 0 {
			return ms, false, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
		in.Limit = aws.Int32(int32(n + 1 - len(ms)))
	}
}

// idempotencyWrite is the Put of the Idempotency-Key record a change (c.Idempotency set)
// writes in its transaction: the aggregate and version it made, and its answer when kept.
func (s *CommandStore) idempotencyWrite(c commands.Change, now time.Time) (*types.Put, error) {
	rec := commands.IdempotencyRecord{
		RequestHash: c.Idempotency.Request.Stored, Status: c.Idempotency.Status, Location: c.Idempotency.Location,
		Kind: c.Event.Kind, Key: c.Event.Key, Version: c.Event.Version, CommandID: c.Event.CommandID, CreatedAt: now,
	}
	if c.Erasure != nil {
		// The record of an erase request names the erasure, never the person.
		rec.Kind, rec.Key = events.KindErasure, c.Erasure.ID
	} else if s.keepsAnswers(*c.Idempotency) {
		body, err := answerBody(c.Event.Payload)
		if err != nil {
			return nil, err
		}
		rec.Body = body
	}
	return s.idempotencyPut(c.Idempotency.Key, rec), nil
}
