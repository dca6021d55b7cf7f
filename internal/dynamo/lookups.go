package dynamo

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// The lookup pointers of the command table (docs/storage.md), written and removed in the
// transaction of the command that changes what they point to, so that they are as
// consistent as the state itself:
//
//   - `ids#<kind>` / `<id>`: every live user (or group) by its immutable id, in one
//     partition, so that one Query lists them all in a stable order;
//   - `externalid#<kind>#<external id>` / `<id>`: the users (or groups) a provisioning
//     client gave that external id.
//
// Both carry `key`: the username or group key of the aggregate they point to.
const (
	idsPrefix        = "ids#"
	externalIDPrefix = "externalid#"
)

func lookupKey(kind events.AggregateKind, by commands.LookupBy, value, id string) map[string]types.AttributeValue {
	pk := idsPrefix + string(kind)
	if by == commands.LookupByExternalID {
		pk = externalIDPrefix + string(kind) + "#" + value
	}
	return map[string]types.AttributeValue{"id": str(pk), "sk": str(id)}
}

// LookupItem is the item of a lookup pointer, as the command that makes it writes it (the
// benchmark's raw baseline writes the same).
func LookupItem(l commands.Lookup) map[string]types.AttributeValue { return lookupItem(l) }

func lookupItem(l commands.Lookup) map[string]types.AttributeValue {
	it := lookupKey(l.Kind, l.By, l.Value, l.ID)
	it["key"] = str(l.Key)
	return it
}

// FindByID is the key of the live user or group with immutable id id; ok is false when
// there is none.
func (s *CommandStore) FindByID(ctx context.Context, t commands.Tenant, kind events.AggregateKind, id string) (key string, ok bool, err error) {
	item, err := s.get(ctx, s.table(t), idsPrefix+string(kind), id)
	if err != nil || item == nil {
		return "", false, err
	}
	return getS(item, "key"), true, nil
}

// FindByIDs are the keys of the live users or groups with these immutable ids, by id; an id
// of none is absent from the map. The pointers are read strongly consistently, in batches.
func (s *CommandStore) FindByIDs(ctx context.Context, t commands.Tenant, kind events.AggregateKind, ids []string) (map[string]string, error) {
	keys := make([]map[string]types.AttributeValue, 0, len(ids))
	for _, id := range slices.Compact(slices.Sorted(slices.Values(ids))) {
		if id != "" {
			keys = append(keys, map[string]types.AttributeValue{"id": str(idsPrefix + string(kind)), "sk": str(id)})
		}
	}
	items, err := s.batchGet(ctx, s.table(t), keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(items))
	for _, it := range items {
		out[getS(it, "sk")] = getS(it, "key")
	}
	return out, nil
}

// FindByExternalID are the live users or groups with external id ext, by id.
func (s *CommandStore) FindByExternalID(ctx context.Context, t commands.Tenant, kind events.AggregateKind, ext string) ([]commands.Lookup, error) {
	if ext == "" || len(ext) > identity.MaxExternalID {
		return nil, nil
	}
	var out []commands.Lookup
	err := s.queryKeys(ctx, s.table(t), externalIDPrefix+string(kind)+"#"+ext, "", func(it map[string]types.AttributeValue) {
		out = append(out, commands.Lookup{Kind: kind, By: commands.LookupByExternalID, Value: ext, ID: getS(it, "sk"), Key: getS(it, "key")})
	})
	return out, err
}

// ListIDs calls fn with the live users (or groups) in the order of their ids, from the
// first id after `after` ("" for the start), until fn returns false. The pointers are read
// strongly consistently, a page of up to 1 MB at a time.
func (s *CommandStore) ListIDs(ctx context.Context, t commands.Tenant, kind events.AggregateKind, after string, fn func(commands.Lookup) bool) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table(t)),
		KeyConditionExpression:    aws.String("id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(idsPrefix + string(kind))},
		ExpressionAttributeNames:  map[string]string{"#k": "key"},
		ProjectionExpression:      aws.String("sk, #k"),
		ConsistentRead:            aws.Bool(true),
	}
	if after != "" {
		in.KeyConditionExpression = aws.String("id = :id AND sk > :after")
		in.ExpressionAttributeValues[":after"] = str(after)
	}
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list %s ids: %w", kind, notFoundTenant(err))
		}
		for _, it := range page.Items {
			id := getS(it, "sk")
			if !fn(commands.Lookup{Kind: kind, By: commands.LookupByID, Value: id, ID: id, Key: getS(it, "key")}) {
				return nil
			}
		}
	}
	return nil
}

// UserByEmail is the username that holds email (lower-cased), read from the email's
// uniqueness guard; ok is false when no user does.
func (s *CommandStore) UserByEmail(ctx context.Context, t commands.Tenant, email string) (username string, ok bool, err error) {
	item, err := s.get(ctx, s.table(t), "email#"+email, "guard")
	if err != nil || item == nil {
		return "", false, err
	}
	return getS(item, "username"), true, nil
}

// LoadGroups reads the config items of groups strongly consistently, by key; groups
// without one are absent from the map.
func (s *CommandStore) LoadGroups(ctx context.Context, t commands.Tenant, keys []string) (map[string]commands.GroupAggregate, error) {
	req := make([]map[string]types.AttributeValue, 0, len(keys))
	for _, k := range slices.Compact(slices.Sorted(slices.Values(keys))) {
		req = append(req, map[string]types.AttributeValue{"id": str(GroupID(k)), "sk": str(SKConfig)})
	}
	items, err := s.batchGet(ctx, s.table(t), req)
	if err != nil {
		return nil, err
	}
	out := make(map[string]commands.GroupAggregate, len(items))
	for _, it := range items {
		g, err := decodeGroup(it)
		if err != nil {
			return nil, err
		}
		out[g.State.Key] = g
	}
	return out, nil
}

// LookupKey is the key of a lookup item (an erasure removes those of every incarnation).
func LookupKey(kind events.AggregateKind, by commands.LookupBy, value, id string) map[string]types.AttributeValue {
	return lookupKey(kind, by, value, id)
}

// PageIDs is one page of the live users (or groups) in the order of their ids: at most n
// of them after `after` ("" for the start), read strongly consistently with Queries of at
// most n items in all, continued from `after` as the ExclusiveStartKey; more reports that
// the page ended on its limit, so that another may follow (it may be empty). The order is
// the ids', which never change; a user created meanwhile falls into its place and shifts
// nothing.
func (s *CommandStore) PageIDs(ctx context.Context, t commands.Tenant, kind events.AggregateKind, after string, n int) (page []commands.Lookup, more bool, err error) {
	return s.pageIDs(ctx, t, kind, after, "", n)
}

// pageIDs is PageIDs from the first id after `after`, or, with from, from the first id
// at or after from.
func (s *CommandStore) pageIDs(ctx context.Context, t commands.Tenant, kind events.AggregateKind, after, from string, n int) (page []commands.Lookup, more bool, err error) {
	if n <= 0 {
		return nil, false, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table(t)),
		KeyConditionExpression:    aws.String("id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(idsPrefix + string(kind))},
		ExpressionAttributeNames:  map[string]string{"#k": "key"},
		ProjectionExpression:      aws.String("sk, #k"),
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(n)),
	}
	if after != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{"id": str(idsPrefix + string(kind)), "sk": str(after)}
	} else if from != "" {
		in.KeyConditionExpression = aws.String("id = :id AND sk >= :from")
		in.ExpressionAttributeValues[":from"] = str(from)
	}
	out := make([]commands.Lookup, 0, n)
	// A Query ends at its limit or at 1 MB; one that ends short of n is continued.
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("page %s ids: %w", kind, notFoundTenant(err))
		}
		for _, it := range res.Items {
			id := getS(it, "sk")
			out = append(out, commands.Lookup{Kind: kind, By: commands.LookupByID, Value: id, ID: id, Key: getS(it, "key")})
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, false, nil
		}
		if len(out) >= n {
			return out, true, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
		in.Limit = aws.Int32(int32(n - len(out)))
	}
}

// CountIDs counts the live users (or groups): a COUNT Query over their id lookups, strongly
// consistent, which returns no items but consumes the capacity of reading them (about 60
// bytes each: some 150 read units for 10,000 users). The SCIM port counts once per index
// walk, not per page.
func (s *CommandStore) CountIDs(ctx context.Context, t commands.Tenant, kind events.AggregateKind) (int, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table(t)),
		KeyConditionExpression:    aws.String("id = :id"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(idsPrefix + string(kind))},
		Select:                    types.SelectCount,
		ConsistentRead:            aws.Bool(true),
	}
	n := 0
	for {
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("count %s ids: %w", kind, notFoundTenant(err))
		}
		n += int(res.Count)
		if len(res.LastEvaluatedKey) == 0 {
			return n, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}
