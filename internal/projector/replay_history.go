package projector

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// split decodes a page of the command table into its history records (and their keys, by
// keyOf) and its state items.
// A record split over parts (dynamo.RecordParts) is joined with them, read from table; the
// part items of the page are passed over.
func (r *Replayer) split(ctx context.Context, table string, items []map[string]types.AttributeValue) ([]events.Envelope, map[string]bool, []stateItem, error) {
	var (
		history []events.Envelope
		keys    = map[string]bool{}
		states  []stateItem
	)
	for _, it := range items {
		sk := dynamo.StringAttr(it, "sk")
		switch {
		case dynamo.IsHistorySK(sk):
			e, err := dynamo.DecodeRecord(r.registry, it)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("replay: %w", err)
			}
			if err := dynamo.JoinParts(ctx, r.db, r.registry, table, it, &e); err != nil {
				return nil, nil, nil, fmt.Errorf("replay: %w", err)
			}
			history = append(history, e)
			keys[keyOf(it)] = true
		case sk == dynamo.SKConfig || dynamo.IsMemberSK(sk):
			s, err := dynamo.DecodeStateItem(it)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("decode state item %s: %w", dynamo.LogItemKey(dynamo.StringAttr(it, "id"), sk), err)
			}
			states = append(states, s)
		}
	}
	return history, keys, states, nil
}

// stateItem is a `config` or `member#` item of the command table (dynamo's codec).
type stateItem = dynamo.StateItem

// historyKey is the key of the history record that carries s, as keyOf writes it.
func historyKey(s stateItem) string {
	return s.ID + "\x00" + dynamo.HistorySK(s.HistoryVersion())
}

var stateFilter = dynamodb.ScanInput{
	FilterExpression:          aws.String("sk = :config OR begins_with(sk, :member)"),
	ExpressionAttributeValues: map[string]types.AttributeValue{":config": &types.AttributeValueMemberS{Value: dynamo.SKConfig}, ":member": &types.AttributeValueMemberS{Value: "member#"}},
}

// missingHistory are the state items whose history record is gone: those whose record is
// not among the page's own (inPage, by keyOf) and not found in the table either.
func (r *Replayer) missingHistory(ctx context.Context, table string, states []stateItem, inPage map[string]bool) ([]stateItem, error) {
	var lookup []stateItem
	for _, s := range states {
		if s.HistoryVersion() >= 1 && !inPage[historyKey(s)] {
			lookup = append(lookup, s)
		}
	}
	var missing []stateItem
	for chunk := range slices.Chunk(lookup, 100) {
		keys := make([]map[string]types.AttributeValue, 0, len(chunk))
		seen := map[string]bool{}
		for _, s := range chunk {
			if seen[historyKey(s)] {
				continue
			}
			seen[historyKey(s)] = true
			keys = append(keys, map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: s.ID}, "sk": &types.AttributeValueMemberS{Value: dynamo.HistorySK(s.HistoryVersion())},
			})
		}
		items, err := r.batchGetKeys(ctx, table, keys, "id, sk")
		if err != nil {
			return nil, fmt.Errorf("look up history records: %w", err)
		}
		found := map[string]bool{}
		for _, it := range items {
			found[keyOf(it)] = true
		}
		for _, s := range chunk {
			if !found[historyKey(s)] {
				missing = append(missing, s)
			}
		}
	}
	return missing, nil
}

func parse(s string) time.Time {
	t, _ := dynamo.ParseTime(s)
	return t
}

// synthesize is the event whose full state is the state item's.
func (r *Replayer) synthesize(ctx context.Context, row dynamo.Tenant, s stateItem, groups *sync.Map) (events.Envelope, error) {
	env := events.Envelope{
		EventID: "state:" + s.ID + ":" + s.SK, SchemaVersion: events.SchemaVersion, Actor: "replay",
		Version: s.HistoryVersion(), OccurredAt: parse(s.UpdatedAt),
	}
	switch {
	case dynamo.IsMemberSK(s.SK):
		g, err := r.groupState(ctx, row, s.ID, groups)
		if err != nil {
			return env, err
		}
		g.Version = s.GroupVersion
		env.Kind, env.Key, env.OccurredAt = events.KindGroup, g.Key, parse(s.AddedAt)
		env.Payload = &events.GroupMemberAdded{Group: g, Username: s.MemberID, UserID: s.UserID, MembershipRev: s.MembershipRev, ExpiresAt: s.Expiry()}
	case s.Type == "user":
		u := events.User{ID: s.UserID, Username: s.Username, Email: s.Email, FirstName: s.FirstName, LastName: s.LastName,
			IsActive: s.IsActive, Attributes: s.Attributes, Version: s.Version, CreatedAt: parse(s.CreatedAt),
			UpdatedAt: parse(s.UpdatedAt), Deleted: s.Deleted, DeletedMembershipRev: s.DeletedRev,
			NamedAt: parse(s.NamedAt), FormerNames: dynamo.DecodeFormerNames(s.FormerNames)}
		env.Kind, env.Key = events.KindUser, s.Username
		env.Payload = &events.UserUpdated{User: u}
		if s.Deleted {
			env.Payload = &events.UserDeleted{User: u}
		}
	case s.Type == "group":
		g := groupOf(s)
		env.Kind, env.Key = events.KindGroup, s.Key
		env.Payload = &events.GroupUpdated{Group: g}
		if s.Deleted {
			env.Payload = &events.GroupDeleted{Group: g}
		}
	default:
		return env, fmt.Errorf("state item %s/%s has unknown type %q", s.ID, s.SK, s.Type)
	}
	env.Type = env.Payload.EventType()
	return env, nil
}

// lastDelete is the delete of an earlier incarnation of a live aggregate that moved on
// since the scan, for its cascade alone. Rebuild's unconditional write of the scanned
// config replaces the tombstone's guard (last_deleted_version, deleted_membership_rev)
// that a live projector wrote meanwhile, so a membership of the deleted incarnation that
// the page adds passes the guard; the current state brings the guard back but, not being
// a delete, no cascade. The cascade tombstones only what the delete covered, and its
// tombstone upsert is older than the current state, which ApplyStates keeps instead.
func lastDelete(s stateItem) (events.Envelope, bool) {
	env := events.Envelope{EventID: "state:" + s.ID + ":last-delete", SchemaVersion: events.SchemaVersion, Actor: "replay",
		OccurredAt: parse(s.UpdatedAt)}
	switch {
	case s.Deleted || dynamo.IsMemberSK(s.SK):
		return env, false
	case s.Type == "user" && s.DeletedRev > 0:
		env.Kind, env.Key, env.Version = events.KindUser, s.Username, s.Version-1
		env.Payload = &events.UserDeleted{User: events.User{Username: s.Username, Version: s.Version - 1, Deleted: true,
			DeletedMembershipRev: s.DeletedRev}}
	case s.Type == "group" && s.LastDeleted > 0:
		g := groupOf(s)
		g.Version, g.Deleted = s.LastDeleted, true
		env.Kind, env.Key, env.Version = events.KindGroup, s.Key, s.LastDeleted
		env.Payload = &events.GroupDeleted{Group: g}
	default:
		return env, false
	}
	env.Type = env.Payload.EventType()
	return env, true
}

func groupOf(s stateItem) events.Group {
	return events.Group{ID: s.GroupID, Key: s.Key, Name: s.Name, Description: s.Description, Attributes: s.Attributes,
		Version: s.Version, CreatedAt: parse(s.CreatedAt), UpdatedAt: parse(s.UpdatedAt), Deleted: s.Deleted,
		LastDeletedVersion: s.LastDeleted, NamedAt: parse(s.NamedAt), FormerNames: dynamo.DecodeFormerGroupNames(s.FormerNames)}
}

func (r *Replayer) groupState(ctx context.Context, row dynamo.Tenant, id string, cache *sync.Map) (events.Group, error) {
	if g, ok := cache.Load(id); ok {
		return g.(events.Group), nil
	}
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(row.CommandsTable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: dynamo.SKConfig}}})
	if err != nil {
		return events.Group{}, fmt.Errorf("read group %s: %w", id, err)
	}
	s, err := dynamo.DecodeStateItem(out.Item)
	if err != nil {
		return events.Group{}, fmt.Errorf("decode group %s: %w", id, err)
	}
	g := groupOf(s)
	cache.Store(id, g)
	return g, nil
}

func (r *Replayer) itemCount(ctx context.Context, table string) int64 {
	out, err := r.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil || out.Table == nil || out.Table.ItemCount == nil {
		return -1
	}
	return *out.Table.ItemCount
}
