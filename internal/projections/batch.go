package projections

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// applyBatch applies es; with unconditional, the aggregates' own items are batch-written
// and returned as Rebuild describes. viewed, if not nil, hears of every conditional view
// item as soon as its transaction is done: after the memberships, before the cascade and
// activity writes that follow; it may be called from several goroutines at once.
func (p *Projector) applyBatch(ctx context.Context, t Tables, es []events.Envelope, reducers map[events.Type]Reducer, unconditional bool, viewed viewedFunc) (map[string]int64, error) {
	if err := t.validate(); err != nil {
		return nil, err
	}
	var (
		activities = map[string]Item{}
		upserts    = map[string]Upsert{}
		adds       = map[string]MemberAdd{}
		users      = map[string]UserCascade{}
		groups     = map[string]GroupCascade{}
	)
	for _, e := range es {
		fx, err := reduce(reducers, e)
		if err != nil {
			return nil, fmt.Errorf("project %s %s v%d: %w", e.Type, identity.LogKey(e.Entity()), e.Version, err)
		}
		for _, a := range fx.Activities {
			activities[itemKey(a, "pk")] = a
		}
		for _, u := range fx.Upserts {
			k := itemKey(u.Item, "id")
			if cur, ok := upserts[k]; !ok || u.Version > cur.Version {
				upserts[k] = u
			}
		}
		for _, m := range fx.MemberAdds {
			k := m.GroupKey + "\x00" + m.Username
			if cur, ok := adds[k]; !ok || m.Version > cur.Version {
				adds[k] = m
			}
		}
		// Duplicates of a delete need one cascade; cascades of different deletes are kept
		// apart, since each covers what its own delete removed.
		if c := fx.UserCascade; c != nil {
			users[fmt.Sprint(c.Username, "\x00", c.DeletedRev)] = *c
		}
		if c := fx.GroupCascade; c != nil {
			groups[fmt.Sprint(c.GroupKey, "\x00", c.Version)] = *c
		}
	}
	w := p.writer(t)
	n := p.concurrency
	var written map[string]int64
	if unconditional {
		written = map[string]int64{}
		var configs []Item
		for k, u := range upserts {
			if dynamo.StringAttr(u.Item, "sk") == dynamo.SKConfig {
				configs = append(configs, w.stamped(u.Item))
				written[dynamo.StringAttr(u.Item, "id")] = u.Version
				delete(upserts, k)
			}
		}
		if err := each(ctx, n, slices.Collect(slices.Chunk(configs, maxBatchItems)), w.batchPut(t.Users)); err != nil {
			return nil, err
		}
	}
	upsertMany := w.upsertMany
	if viewed != nil {
		upsertMany = func(ctx context.Context, us []Upsert) error {
			if err := w.upsertMany(ctx, us); err != nil {
				return err
			}
			for _, u := range us {
				viewed(itemKey(u.Item, "id"), u.Version)
			}
			return nil
		}
	}
	// Memberships before the views, as in apply.
	memberships, views := splitMemberships(sorted(upserts))
	if err := each(ctx, n, sorted(adds), w.addMember); err != nil {
		return nil, err
	}
	if err := each(ctx, n, slices.Collect(slices.Chunk(memberships, maxUpsertsPerTransaction)), w.upsertMany); err != nil {
		return nil, err
	}
	if err := each(ctx, n, slices.Collect(slices.Chunk(views, maxUpsertsPerTransaction)), upsertMany); err != nil {
		return nil, err
	}
	if err := each(ctx, n, sorted(users), w.cascadeUser); err != nil {
		return nil, err
	}
	if err := each(ctx, n, sorted(groups), w.cascadeGroup); err != nil {
		return nil, err
	}
	return written, each(ctx, n, slices.Collect(slices.Chunk(sorted(activities), maxBatchItems)), w.batchPut(t.Activities))
}

func (p *Projector) writer(t Tables) writer {
	return writer{db: p.db, tables: t, now: dynamo.FormatTime(p.now()), singlePuts: p.singlePuts}
}

// writer executes Effects against one pair of tables; now is the projection time stamped
// into every read item it writes.
type writer struct {
	db     DB
	tables Tables
	now    string
	// singlePuts: upsertMany sends a conditional PutItem per item (Options.SinglePuts).
	singlePuts bool
}

// Condition of every versioned write: "only if newer".
const ifNewer = "attribute_not_exists(#v) OR #v < :v"

func (w writer) upsert(ctx context.Context, u Upsert) error {
	put := w.conditionalPut(u)
	_, err := w.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
		ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
	})
	if _, ok := conditionFailed(err); ok {
		return nil // the stored item is already this version or newer
	}
	if err != nil {
		return fmt.Errorf("upsert %s in %s: %w", logItemKey(u.Item, "id"), w.tables.Users, err)
	}
	return nil
}

func (w writer) conditionalPut(u Upsert) *types.Put {
	return &types.Put{
		TableName:                 aws.String(w.tables.Users),
		Item:                      w.stamped(u.Item),
		ConditionExpression:       aws.String(ifNewer),
		ExpressionAttributeNames:  map[string]string{"#v": "version"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(u.Version)},
	}
}

// maxUpsertsPerTransaction is how many conditional upserts go out in one
// TransactWriteItems (DynamoDB allows 100 actions and 4 MB).
const maxUpsertsPerTransaction = 25

// upsertMany writes distinct items, each "only if newer", in one TransactWriteItems: one
// request instead of one PutItem each, which is what a batch of records costs DynamoDB
// (and DynamoDB Local: 1.5 times the items per second, measured) and the projector (one
// signed request). The transaction carries no condition between the items; it is only a
// way to send them together. An item whose condition fails is already this version or
// newer: it is dropped and the rest sent again. Any other failure (a conflict with
// another writer of one of the items, throttling, a request over 4 MB) sends each item
// on its own, so that no item holds the others back. On AWS a transactional write costs
// two write units per item, where a PutItem costs one (the index writes cost the same):
// with singlePuts each item goes out as its own conditional PutItem, all at once.
func (w writer) upsertMany(ctx context.Context, us []Upsert) error {
	if w.singlePuts {
		return each(ctx, len(us), us, w.upsert)
	}
	for len(us) > 1 {
		items := make([]types.TransactWriteItem, len(us))
		for i, u := range us {
			items[i] = types.TransactWriteItem{Put: w.conditionalPut(u)}
		}
		_, err := w.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return nil
		}
		failed, ok := conditionFailed(err)
		if !ok || len(failed) == 0 {
			return each(ctx, len(us), us, w.upsert)
		}
		rest := make([]Upsert, 0, len(us)-len(failed))
		for i, u := range us {
			if !slices.Contains(failed, i) {
				rest = append(rest, u)
			}
		}
		us = rest
	}
	if len(us) == 1 {
		return w.upsert(ctx, us[0])
	}
	return nil
}

// addMember writes the user's pointer to the group, then the live membership in one
// transaction with the guards on the group and user configs, so a delete projected
// concurrently is either seen by the guard or sees the membership in its cascade (which
// reads the pointers after writing the user's tombstone).
func (w writer) addMember(ctx context.Context, m MemberAdd) error {
	if _, err := w.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(w.tables.Users), Item: GroupPointer(m.Username, m.GroupKey)}); err != nil {
		return fmt.Errorf("put group pointer of %s to %s in %s: %w", logUser(m.Username), m.GroupKey, w.tables.Users, err)
	}
	put := &types.Put{
		TableName:                 aws.String(w.tables.Users),
		Item:                      w.stamped(m.Live),
		ConditionExpression:       aws.String(ifNewer),
		ExpressionAttributeNames:  map[string]string{"#v": "version"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(m.Version)},
	}
	if m.Moved {
		put.ConditionExpression = aws.String(ifNewerOrMoved)
		put.ExpressionAttributeNames["#mid"], put.ExpressionAttributeNames["#r"] = "member_id", "membership_rev"
		put.ExpressionAttributeValues[":r"] = num(m.MembershipRev)
	}
	_, err := w.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: put},
		// An absent config passes: its delete, if any, has not been projected, and its
		// cascade will reach this membership.
		{ConditionCheck: &types.ConditionCheck{
			TableName:                 aws.String(w.tables.Users),
			Key:                       configKey(dynamo.GroupID(m.GroupKey)),
			ConditionExpression:       aws.String("attribute_not_exists(#d) OR #d < :v"),
			ExpressionAttributeNames:  map[string]string{"#d": "last_deleted_version"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(m.Version)},
		}},
		{ConditionCheck: &types.ConditionCheck{
			TableName:                 aws.String(w.tables.Users),
			Key:                       configKey(dynamo.UserID(m.Username)),
			ConditionExpression:       aws.String("attribute_not_exists(#d) OR #d < :r"),
			ExpressionAttributeNames:  map[string]string{"#d": "deleted_membership_rev"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": num(m.MembershipRev)},
		}},
	}})
	if err == nil {
		return nil
	}
	failed, ok := conditionFailed(err)
	if !ok {
		return fmt.Errorf("add member %s to %s in %s: %w", logUser(m.Username), m.GroupKey, w.tables.Users, err)
	}
	if slices.Contains(failed, 0) {
		return nil // the membership is already this version or newer
	}
	// A guard failed: a delete has overtaken this add. Write what that delete's cascade
	// would have left of the live item, so the result does not depend on the order.
	return w.upsert(ctx, Upsert{Item: m.Obsolete, Version: m.Version})
}

// ifNewerOrMoved is ifNewer for a membership a rename moved (MemberAdd.Moved).
const ifNewerOrMoved = ifNewer + " OR (#v = :v AND attribute_not_exists(#mid) AND (attribute_not_exists(#r) OR #r < :r))"

// flipToTombstone turns a live membership into its tombstone. The version stays, so that
// a later membership event of the group still orders against it, and so that the result
// equals MemberAdd.Obsolete.
const flipToTombstone = "SET #del = :t, #upd = :now REMOVE #mid, #mof"

// tombstoneMembership flips the membership id/sk if it is live and its attribute guard
// compares to limit with op ("<" or "<="): only what the delete covers.
func (w writer) tombstoneMembership(ctx context.Context, id, sk, guard, op string, limit int64) error {
	_, err := w.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(w.tables.Users),
		Key:              map[string]types.AttributeValue{"id": str(id), "sk": str(sk)},
		UpdateExpression: aws.String(flipToTombstone),
		// attribute_exists(member_id) also keeps UpdateItem from creating an item.
		ConditionExpression: aws.String("attribute_exists(#mid) AND #g " + op + " :g"),
		ExpressionAttributeNames: map[string]string{
			"#del": "is_deleted", "#upd": "updated_at", "#mid": "member_id", "#mof": "member_of", "#g": guard,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": &types.AttributeValueMemberBOOL{Value: true}, ":now": str(w.now), ":g": num(limit),
		},
	})
	if _, ok := conditionFailed(err); ok {
		return nil // not live, or newer than the delete
	}
	if err != nil {
		return fmt.Errorf("tombstone membership %s in %s: %w", dynamo.LogItemKey(id, sk), w.tables.Users, err)
	}
	return nil
}

// cascadeUser tombstones the user's live memberships from before the delete. Those in
// c.Groups and those the user's group pointers name (read strongly consistently: a
// members change may have added the user without the delete knowing) are addressed
// directly; UserGroupGSI finds the rest (memberships the write side had already removed,
// whose member_removed is still to come, and those projected before pointers were kept).
func (w writer) cascadeUser(ctx context.Context, c UserCascade) error {
	ids := map[string]bool{}
	for _, g := range c.Groups {
		ids[dynamo.GroupID(g)] = true
	}
	pointers := dynamodb.NewQueryPaginator(w.db, &dynamodb.QueryInput{
		TableName:                 aws.String(w.tables.Users),
		ConsistentRead:            aws.Bool(true),
		KeyConditionExpression:    aws.String("#id = :id AND begins_with(#sk, :g)"),
		ExpressionAttributeNames:  map[string]string{"#id": "id", "#sk": "sk"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(dynamo.UserID(c.Username)), ":g": str(dynamo.GroupPointerSK(""))},
	})
	for pointers.HasMorePages() {
		page, err := pointers.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list group pointers of %s in %s: %w", logUser(c.Username), w.tables.Users, err)
		}
		for _, it := range page.Items {
			ids[dynamo.GroupID(dynamo.StringAttr(it, "group_key"))] = true
		}
	}
	pages := dynamodb.NewQueryPaginator(w.db, &dynamodb.QueryInput{
		TableName:                 aws.String(w.tables.Users),
		IndexName:                 aws.String(dynamo.IndexUserGroup),
		KeyConditionExpression:    aws.String("#m = :u"),
		ProjectionExpression:      aws.String("#id"),
		ExpressionAttributeNames:  map[string]string{"#m": "member_id", "#id": "id"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": str(c.Username)},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list groups of %s in %s: %w", logUser(c.Username), w.tables.Users, err)
		}
		for _, it := range page.Items {
			ids[dynamo.StringAttr(it, "id")] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if err := w.tombstoneMembership(ctx, id, dynamo.MemberSK(c.Username), "membership_rev", "<=", c.DeletedRev); err != nil {
			return err
		}
	}
	return nil
}

// cascadeGroup tombstones the group's live memberships older than the delete. The base
// table partition is read strongly consistently, so it cannot miss a membership.
func (w writer) cascadeGroup(ctx context.Context, c GroupCascade) error {
	id := dynamo.GroupID(c.GroupKey)
	pages := dynamodb.NewQueryPaginator(w.db, &dynamodb.QueryInput{
		TableName:              aws.String(w.tables.Users),
		ConsistentRead:         aws.Bool(true),
		KeyConditionExpression: aws.String("#id = :id AND begins_with(#sk, :m)"),
		FilterExpression:       aws.String("attribute_exists(#mid) AND #v < :v"),
		ProjectionExpression:   aws.String("#sk"),
		ExpressionAttributeNames: map[string]string{
			"#id": "id", "#sk": "sk", "#mid": "member_id", "#v": "version",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":id": str(id), ":m": str(dynamo.MemberSK("")), ":v": num(c.Version),
		},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list members of %s in %s: %w", c.GroupKey, w.tables.Users, err)
		}
		for _, it := range page.Items {
			if err := w.tombstoneMembership(ctx, id, dynamo.StringAttr(it, "sk"), "version", "<", c.Version); err != nil {
				return err
			}
		}
	}
	return nil
}

// BatchWriteItem takes at most 25 requests, and none two for one key (ApplyBatch dedups).
const (
	maxBatchItems    = 25
	maxBatchAttempts = 8
)

// batchPut is a writer of up to 25 items into table, retrying what DynamoDB leaves
// unprocessed (under throttling) with exponential backoff.
func (w writer) batchPut(table string) func(ctx context.Context, items []Item) error {
	return func(ctx context.Context, items []Item) error {
		return w.batchPutItems(ctx, table, items)
	}
}

func (w writer) batchPutItems(ctx context.Context, table string, items []Item) error {
	reqs := make([]types.WriteRequest, 0, len(items))
	for _, it := range items {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
	}
	pending := map[string][]types.WriteRequest{table: reqs}
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out, err := w.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
		if err != nil {
			return fmt.Errorf("batch put into %s: %w", table, err)
		}
		if len(out.UnprocessedItems) == 0 {
			return nil
		}
		pending = out.UnprocessedItems
		if attempt == maxBatchAttempts {
			return fmt.Errorf("batch put into %s: %d items unprocessed after %d attempts", table, len(pending[table]), attempt)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// stamped is item with the projection time; the reducer's item stays untouched.
func (w writer) stamped(item Item) Item {
	out := maps.Clone(item)
	out["updated_at"] = str(w.now)
	return out
}

// conditionFailed reports whether err is a failed condition of the projector's own
// conditional writes — an expected outcome, not a fault — and for a cancelled transaction
// which of its items failed; the SDK's error types are read in internal/dynamo/sdkerr.
var conditionFailed = sdkerr.ConditionFailures

// each runs f over items with at most n at a time, stopping at the first error.
func each[T any](ctx context.Context, n int, items []T, f func(context.Context, T) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, it := range items {
		g.Go(func() error { return f(ctx, it) })
	}
	return g.Wait()
}

// splitMemberships parts upserts into membership items and the rest (the views).
func splitMemberships(us []Upsert) (memberships, views []Upsert) {
	for _, u := range us {
		if dynamo.IsMemberSK(dynamo.StringAttr(u.Item, "sk")) {
			memberships = append(memberships, u)
		} else {
			views = append(views, u)
		}
	}
	return memberships, views
}

// sorted lists m's values by key, so a batch always runs in the same order.
func sorted[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

func configKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str(id), "sk": str(dynamo.SKConfig)}
}

// itemKey is "<pk>/<sk>" of an item whose partition key is named pk: what tells items
// apart (batches, queues, the committer's notices). Never for an error text: logItemKey.
func itemKey(item Item, pk string) string {
	return dynamo.StringAttr(item, pk) + "/" + dynamo.StringAttr(item, "sk")
}

// logItemKey is an item's key for an error text (names hashed: dynamo.LogItemKey).
func logItemKey(item Item, pk string) string {
	return dynamo.LogItemKey(dynamo.StringAttr(item, pk), dynamo.StringAttr(item, "sk"))
}

// logUser is a user, by username, for an error text: the projector's errors reach its
// logs and its dead letters' reasons, which name users by id only (STYLE.md).
func logUser(username string) string { return identity.LogKey(dynamo.UserID(username)) }

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: fmt.Sprint(v)}
}
