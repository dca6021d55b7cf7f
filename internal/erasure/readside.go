package erasure

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/projections"
)

// readTables are the tenant's read and activity tables of every generation that may
// still exist: the current one, the one a replay builds, and older ones a replay kept.
func readTables(row dynamo.Tenant, names dynamo.Names) (users, activities []string) {
	// A negative generation: only the tables the row names (restored tables).
	for gen := 0; gen <= row.Generation; gen++ {
		users = append(users, names.Users(row.SystemID, row.TenantID, gen))
		activities = append(activities, names.Activities(row.SystemID, row.TenantID, gen))
	}
	for _, t := range []string{row.UsersTable, row.NextUsersTable} {
		if t != "" && !slices.Contains(users, t) {
			users = append(users, t)
		}
	}
	for _, t := range []string{row.ActivitiesTable, row.NextActivitiesTable} {
		if t != "" && !slices.Contains(activities, t) {
			activities = append(activities, t)
		}
	}
	return users, activities
}

// sweepReadSide deletes the person's items from every read and activity table: the
// user's partitions (view, group pointers, own feed), the memberships in the groups, and
// rewrites the group feeds' items that name them.
func (x *Eraser) sweepReadSide(ctx context.Context, row dynamo.Tenant, subj *Subject, groups map[string]bool) error {
	users, activities := readTables(row, x.names)
	for _, t := range users {
		// The user's partition (view, group pointers), read once by its keys: every item
		// of it goes, and its pointers name the groups whose memberships go too.
		var keys []map[string]types.AttributeValue
		err := x.queryKeys(ctx, t, "id", dynamo.UserID(subj.Username), func(it map[string]types.AttributeValue) error {
			if sk := attrS(it, "sk"); strings.HasPrefix(sk, "group#") {
				groups[strings.TrimPrefix(sk, "group#")] = true
			}
			keys = append(keys, map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]})
			return nil
		})
		if missing(err) {
			continue
		}
		if err != nil {
			return err
		}
		for g := range groups {
			keys = append(keys, map[string]types.AttributeValue{"id": s(dynamo.GroupID(g)), "sk": s(dynamo.MemberSK(subj.Username))})
		}
		if err := x.batchDelete(ctx, t, keys); err != nil {
			return err
		}
		// The as-of index keeps the person's intervals under the hash of their id only;
		// what names them (names held, the id) goes, and they read as an erased member.
		if err := asof.Erase(ctx, x.db, t, subj.idHashList()); err != nil {
			return err
		}
	}
	// Without AllIncarnations, a group's feed item is rewritten only if it is of a record
	// the write model's rewrite erased (its event id): an item naming an earlier
	// incarnation (maybe someone else) under the same name stays. Items are matched by
	// the group's version (a members change makes one item per member, all of its
	// version; within them the name decides).
	var rewritten map[string]map[int64]bool
	if subj.IDOnly {
		rewritten = map[string]map[int64]bool{}
		for g := range groups {
			ids, err := x.erasedVersions(ctx, row.CommandsTable, g)
			if err != nil {
				return err
			}
			rewritten[g] = ids
		}
	}
	for _, t := range activities {
		err := x.deleteFeed(ctx, t, projections.EntityPK("user:"+subj.Username), subj)
		if missing(err) {
			continue
		}
		if err != nil {
			return err
		}
		// The groups' feeds are apart from each other: a few at once.
		gs, gctx := errgroup.WithContext(ctx)
		gs.SetLimit(rewriteWorkers)
		for g := range groups {
			var only map[int64]bool
			if rewritten != nil {
				only = rewritten[g]
				if len(only) == 0 {
					continue
				}
			}
			gs.Go(func() error { return x.rewriteFeed(gctx, t, projections.EntityPK("group:"+g), subj, only) })
		}
		if err := gs.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// deleteFeed deletes the erased incarnations' items of the user's feed: its own events of
// version subj.From on (all of them for 0), and the copies of the group membership
// changes that concern them (projections' member feed items, entity `group:<key>`, whose
// version is the group's), matched by the member's id they carry when an earlier
// incarnation's are kept.
func (x *Eraser) deleteFeed(ctx context.Context, table, pk string, subj *Subject) error {
	var keys []map[string]types.AttributeValue
	// Only what tells an item's incarnation is read, not its change set.
	err := x.queryAttrs(ctx, table, "pk", pk, []string{"sk", "entity", "version", "user_id"}, func(it map[string]types.AttributeValue) error {
		erased := subj.From <= 0
		switch {
		case erased:
		case strings.HasPrefix(attrS(it, "entity"), "user:"):
			erased = historyVersion(it) >= subj.From
		default:
			erased = subj.isMember("", attrS(it, "user_id"))
		}
		if erased {
			keys = append(keys, map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]})
		}
		return nil
	})
	if err != nil {
		return err
	}
	return x.batchDelete(ctx, table, keys)
}

// erasedVersions are the versions of a group's history records that name an erased
// member (the write model's rewrite marked them).
func (x *Eraser) erasedVersions(ctx context.Context, table, group string) (map[int64]bool, error) {
	out := map[int64]bool{}
	err := x.query(ctx, table, "id", dynamo.GroupID(group), func(it map[string]types.AttributeValue) error {
		if b, ok := it["erased_members"].(*types.AttributeValueMemberBOOL); ok && b.Value && (dynamo.IsHistorySK(attrS(it, "sk")) || dynamo.IsPartSK(attrS(it, "sk"))) {
			out[historyVersion(it)] = true
		}
		return nil
	})
	return out, err
}

// rewriteFeed rewrites the items of one group's feed whose change set names the person
// (only those of the versions given, when only is not nil).
func (x *Eraser) rewriteFeed(ctx context.Context, table, pk string, subj *Subject, only map[int64]bool) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		FilterExpression:          aws.String("contains(changes, :q)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk), ":q": s(`"` + subj.Username + `"`)},
	}
	for {
		page, err := x.db.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("read feed %s: %w", table, dynamo.Translate(err))
		}
		for _, it := range page.Items {
			if only != nil && !only[historyVersion(it)] {
				continue
			}
			ch, changed, err := rewriteChangesJSON(attrS(it, "changes"), subj)
			if err != nil {
				return err
			}
			if !changed {
				continue
			}
			_, err = x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]},
				UpdateExpression:          aws.String("SET changes = :c"),
				ConditionExpression:       aws.String("attribute_exists(pk)"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":c": s(ch)},
			})
			if err != nil && !sdkerr.ConditionFailed(err) {
				return fmt.Errorf("rewrite a feed item: %w", dynamo.Translate(err))
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// idHashList is the hashes of every id of the subject (identity.ErasedIDHash): the ids
// found, and those known only by their hashes.
func (s *Subject) idHashList() []string {
	seen := map[string]bool{}
	var out []string
	for id := range s.IDs {
		if h := identity.ErasedIDHash(id); !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	for h := range s.idHashes {
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}
