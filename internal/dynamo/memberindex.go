package dynamo

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/events"
)

// The member index (docs/erasure.md, "The member index"): for every group history record
// that names a member, an item `memberidx#<user id>` / `ref#<version>#<group key>` (with
// `group_key` and `version`) in the tenant's write table, so that an erasure finds the
// group records naming its person by a Query of their ids instead of a Scan of the
// tenant. The id is the user's immutable one, so the records from before a rename are
// found too. The items never expire (a group record does not), and an erasure deletes
// its person's.
//
// A change that names one member (group.member_added, group.member_removed) writes its
// item in its own transaction. One that may name more than a transaction holds
// (group.members_changed, group.renamed, group.deleted) writes a pending mark instead,
// `memberidx-pending` / `ref#<version>#<group key>`, and replaces it with the items right
// after its commit; an erasure reads the marks still there (a writer that died in
// between) and the records they name. Either way a group record that names someone is,
// from its commit on, found by the index or by a mark.
//
// The tenant's mark `memberidx` / `complete` says that every group record of the table is
// indexed: written when the table is created empty (EnsureTables), or by the backfill
// (internal/memberindex) after its last segment. A table without it (a tenant from before
// the index) is searched by a Scan. The live path writes the index whether or not the
// mark is there: the backfill counts on it.
const (
	memberIndexPrefix = "memberidx#"
	// MemberIndexPending is the partition of the pending marks.
	MemberIndexPending = "memberidx-pending"
	memberIndexMarkID  = "memberidx"
	memberIndexMarkSK  = "complete"
	// memberIndexSKPrefix begins an index item's sort key: `ref#<version>#<group key>`.
	memberIndexSKPrefix = "ref#"
)

// MemberIndexID is the partition of a user id's index items.
func MemberIndexID(userID string) string { return memberIndexPrefix + userID }

// MemberIndexMarkKey is the key of the tenant's mark that its index is complete.
func MemberIndexMarkKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str(memberIndexMarkID), "sk": str(memberIndexMarkSK)}
}

// memberIndexSK never looks like a history record's sort key (the stream's consumers
// pass over it).
func memberIndexSK(groupKey string, version int64) string {
	return fmt.Sprintf("%s%012d#%s", memberIndexSKPrefix, version, groupKey)
}

func memberIndexRef(id, groupKey string, version int64) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"id": str(id), "sk": str(memberIndexSK(groupKey, version)), "group_key": str(groupKey), "version": num(version),
	}
}

// MemberIndexItem is the index item of the group record at version naming userID.
func MemberIndexItem(userID, groupKey string, version int64) map[string]types.AttributeValue {
	return memberIndexRef(MemberIndexID(userID), groupKey, version)
}

// MemberIndexPendingItem is the pending mark of the group record at version: its index
// items are not written yet.
func MemberIndexPendingItem(groupKey string, version int64) map[string]types.AttributeValue {
	return memberIndexRef(MemberIndexPending, groupKey, version)
}

// NamedMemberIDs are the ids of the members a group event names, without duplicates (none
// for an event that names no member).
func NamedMemberIDs(p events.Payload) []string {
	var ids []string
	switch p := p.(type) {
	case *events.GroupMemberAdded:
		ids = append(ids, p.UserID)
	case *events.GroupMemberRemoved:
		ids = append(ids, p.UserID)
	case *events.GroupMemberExpirySet:
		ids = append(ids, p.UserID)
	case *events.GroupMembersChanged:
		for _, m := range append(slices.Clone(p.Added), p.Removed...) {
			ids = append(ids, m.UserID)
		}
	case *events.GroupRenamed:
		for _, m := range p.Members {
			ids = append(ids, m.UserID)
		}
	case *events.GroupDeleted:
		for _, m := range p.Members {
			ids = append(ids, m.UserID)
		}
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })
	slices.Sort(ids)
	return slices.Compact(ids)
}

// MemberIndexItems are the index items of a group record (none for another).
func MemberIndexItems(e events.Envelope) []map[string]types.AttributeValue {
	if e.Kind != events.KindGroup {
		return nil
	}
	var out []map[string]types.AttributeValue
	for _, id := range NamedMemberIDs(e.Payload) {
		out = append(out, MemberIndexItem(id, e.Key, e.Version))
	}
	return out
}

// memberIndexInTx is how many index items a change writes in its own transaction; one
// naming more writes a pending mark (its items follow the commit).
const memberIndexInTx = 1

// memberIndexWrites are the writes of a group record's index in its transaction: its items,
// or its pending mark (pending true: indexPending replaces it after the commit).
func memberIndexWrites(table string, e events.Envelope) (puts []types.TransactWriteItem, pending bool) {
	items := MemberIndexItems(e)
	switch {
	case len(items) == 0:
		return nil, false
	case len(items) <= memberIndexInTx && e.Type != events.GroupMembersChangedType && e.Type != events.GroupRenamedType &&
		e.Type != events.GroupDeletedType:
		for _, it := range items {
			puts = append(puts, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: it}})
		}
		return puts, false
	}
	return []types.TransactWriteItem{{Put: &types.Put{TableName: aws.String(table),
		Item: MemberIndexPendingItem(e.Key, e.Version)}}}, true
}

// indexPending writes the index items of a committed record whose transaction wrote a
// pending mark, then deletes the mark. A failure leaves the mark, which erasures read:
// nothing is lost, so it is not the command's error.
func (s *CommandStore) indexPending(ctx context.Context, table string, e events.Envelope) {
	var reqs []types.WriteRequest
	for _, it := range MemberIndexItems(e) {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: it}})
	}
	if err := BatchWrite(ctx, s.db, table, reqs); err != nil {
		return
	}
	_, _ = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{"id": str(MemberIndexPending), "sk": str(memberIndexSK(e.Key, e.Version))}})
}

// markMemberIndex writes the member index's mark into a write table that holds nothing
// yet: every group record written to it from now on is indexed. A table that holds
// something is left alone (its mark is there, or it predates the index: the backfill,
// internal/memberindex).
func markMemberIndex(ctx context.Context, db *dynamodb.Client, table string) error {
	out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Limit: aws.Int32(1), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("read %s: %w", table, translate(err))
	}
	if len(out.Items) > 0 || len(out.LastEvaluatedKey) > 0 {
		return nil
	}
	return putMemberIndexMark(ctx, db, table)
}

func putMemberIndexMark(ctx context.Context, db *dynamodb.Client, table string) error {
	item := MemberIndexMarkKey()
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(id)")})
	if err != nil && !sdkerr.ConditionFailed(err) {
		return fmt.Errorf("mark the member index of %s: %w", table, translate(err))
	}
	return nil
}
