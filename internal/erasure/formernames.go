package erasure

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// Former names (docs/erasure.md, "Former names"): a person renamed (user.renamed) left
// what they did under each earlier username there — its history records in `user#<old>`,
// its tombstone, its view and feed, group records and feed items naming the old name,
// Idempotency-Key records and dead letters of `user#<old>`. The old name was free from
// the rename on, so a later user may hold it now: everything under a former name is
// matched by the erased ids, or, where a record holds none, by the time the person held
// the name (FormerName.From to Until); by the name alone only while nobody holds it.

// isFormer reports whether name is one of the subject's former usernames.
func (s *Subject) isFormer(name string) bool {
	for _, f := range s.Former {
		if f.Username == name {
			return true
		}
	}
	return false
}

// formerLetter reports whether a dead letter parked under a former name's aggregate is
// the person's: by the id its record holds, else by its time.
func (s *Subject) formerLetter(reg *events.Registry, dl *deadletters.Letter, f events.FormerName) bool {
	if matched, hasID := s.letterID(reg, dl); hasID {
		return matched
	}
	at, _ := letterTime(dl)
	return !at.IsZero() && !at.Before(f.From) && !at.After(f.Until)
}

// formerOf is the former name whose user aggregate agg is.
func (s *Subject) formerOf(agg string) (events.FormerName, bool) {
	for _, f := range s.Former {
		if dynamo.UserID(f.Username) == agg {
			return f, true
		}
	}
	return events.FormerName{}, false
}

// eraseFormerNames erases the person from each former name's partitions: the write
// model's (history records of the erased ids; the tombstone when nothing else is left, or
// its values), and in every read generation the view, the memberships and the feed.
func (x *Eraser) eraseFormerNames(ctx context.Context, row dynamo.Tenant, subj *Subject, groups map[string]bool) error {
	for _, f := range subj.Former {
		lo, hi, free, err := x.eraseFormerWrite(ctx, row.CommandsTable, subj, f.Username)
		if err != nil {
			return err
		}
		if err := x.eraseFormerRead(ctx, row, subj, f.Username, lo, hi, free, groups); err != nil {
			return err
		}
	}
	return nil
}

// eraseFormerWrite deletes the person's history records under name (by the ids their
// states hold), and the tombstone with the partition's other items when no other
// history is left and nobody holds the name; else it strips the tombstone of the
// person's values. lo and hi are the versions the person's records had there; free
// whether nobody holds the name now.
func (x *Eraser) eraseFormerWrite(ctx context.Context, table string, subj *Subject, name string) (lo, hi int64, free bool, err error) {
	id := dynamo.UserID(name)
	var (
		mine, rest []map[string]types.AttributeValue
		others     int
		config     map[string]types.AttributeValue
	)
	err = x.query(ctx, table, "id", id, func(it map[string]types.AttributeValue) error {
		sk := attrS(it, "sk")
		k := map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}
		switch {
		case sk == dynamo.SKConfig:
			config = it
		case dynamo.IsHistorySK(sk):
			env, err := dynamo.DecodeRecord(x.reg, it)
			if err != nil {
				return err
			}
			if recordOf(env, subj) {
				mine = append(mine, k)
				v := env.Version
				if lo == 0 || v < lo {
					lo = v
				}
				hi = max(hi, v)
			} else {
				others++
			}
		default:
			rest = append(rest, k)
		}
		return nil
	})
	if err != nil {
		return 0, 0, false, err
	}
	if err := x.batchDelete(ctx, table, mine); err != nil {
		return 0, 0, false, err
	}
	if config == nil {
		return lo, hi, true, nil
	}
	tomb := false
	if b, ok := config["deleted"].(*types.AttributeValueMemberBOOL); ok && b.Value {
		tomb = true
	}
	if !tomb {
		return lo, hi, false, nil // a later user holds the name: theirs
	}
	if others == 0 {
		// Nothing of anyone else is left: the name's items go, the tombstone on
		// condition that nobody took the name meanwhile.
		if err := x.batchDelete(ctx, table, rest); err != nil {
			return 0, 0, false, err
		}
		_, err := x.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key:                       map[string]types.AttributeValue{"id": s(id), "sk": s(dynamo.SKConfig)},
			ConditionExpression:       aws.String("deleted = :y AND version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":y": &types.AttributeValueMemberBOOL{Value: true}, ":v": config["version"]}})
		if err != nil && !sdkerr.ConditionFailed(err) {
			return 0, 0, false, fmt.Errorf("delete a former name's tombstone: %w", dynamo.Translate(err))
		}
		return lo, hi, true, nil
	}
	// An earlier holder's history stays, with the tombstone that carries its versions on:
	// stripped of the person's values.
	_, err = x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:                       map[string]types.AttributeValue{"id": s(id), "sk": s(dynamo.SKConfig)},
		ConditionExpression:       aws.String("deleted = :y AND version = :v"),
		UpdateExpression:          aws.String("REMOVE user_id, email, first_name, last_name, attributes, password, former_names, named_at"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":y": &types.AttributeValueMemberBOOL{Value: true}, ":v": config["version"]}})
	if err != nil && !sdkerr.ConditionFailed(err) {
		return 0, 0, false, fmt.Errorf("strip a former name's tombstone: %w", dynamo.Translate(err))
	}
	return lo, hi, true, nil
}

// recordOf reports whether a user record is the subject's, by the ids it holds.
func recordOf(env events.Envelope, subj *Subject) bool {
	var ids []string
	if u, ok := events.UserState(env.Payload); ok {
		ids = append(ids, u.ID)
	}
	switch p := env.Payload.(type) {
	case *events.UserDeleted:
		ids = append(ids, p.PreviousID)
	case *events.UserErased:
		ids = append(ids, p.PreviousID)
	}
	return slices.ContainsFunc(ids, func(id string) bool { return id != "" && subj.isMember("", id) })
}

// eraseFormerRead deletes the person's items under a former name in every read
// generation: when nobody holds the name, its view partition, its memberships in the
// groups and its feed from the person's first version there on; when a later user holds
// it, only the feed items of the person's versions (lo to hi, and the rename's tombstone
// after hi) and the person's membership tombstones (eraseFormerMemberships: a read
// membership holds no id, its group record tells whose it is). The groups' feed items naming the old name are rewritten where the write
// model's records were (their versions).
func (x *Eraser) eraseFormerRead(ctx context.Context, row dynamo.Tenant, subj *Subject, name string, lo, hi int64, free bool, groups map[string]bool) error {
	users, activities := readTables(row, x.names)
	for _, t := range users {
		if free {
			// (When a later user holds the name, the view is theirs.)
			err := x.deletePartition(ctx, t, "id", dynamo.UserID(name), func(string) bool { return true })
			if missing(err) {
				continue
			}
			if err != nil {
				return err
			}
		}
		if err := x.eraseFormerMemberships(ctx, row, t, subj, name, free, groups); err != nil && !missing(err) {
			return err
		}
	}
	former := *subj
	former.Username, former.IDOnly = name, false
	for _, t := range activities {
		pk := projections.EntityPK("user:" + name)
		var err error
		if free {
			under := former
			under.From = lo
			err = x.deleteFeed(ctx, t, pk, &under)
		} else if lo > 0 {
			err = x.deleteFeedVersions(ctx, t, pk, lo, hi+1, subj)
		}
		if missing(err) {
			continue
		}
		if err != nil {
			return err
		}
		for g := range groups {
			only, err := x.erasedVersions(ctx, row.CommandsTable, g)
			if err != nil {
				return err
			}
			if len(only) == 0 {
				continue
			}
			if err := x.rewriteFeed(ctx, t, projections.EntityPK("group:"+g), &former, only); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteFeedVersions deletes the items of a feed of the user's own versions lo to hi, and
// the copies of group membership changes (whose version is the group's) that carry an
// erased id.
func (x *Eraser) deleteFeedVersions(ctx context.Context, table, pk string, lo, hi int64, subj *Subject) error {
	var keys []map[string]types.AttributeValue
	err := x.query(ctx, table, "pk", pk, func(it map[string]types.AttributeValue) error {
		var erased bool
		if strings.HasPrefix(attrS(it, "entity"), "user:") {
			v := historyVersion(it)
			erased = v >= lo && v <= hi
		} else {
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

// formerIdempotencyFilter adds to a Scan's filter the Idempotency-Key records of the former
// names, each within the time the person held it.
func formerIdempotencyFilter(subj *Subject, vals map[string]types.AttributeValue) string {
	var parts []string
	for i, f := range subj.Former {
		n := fmt.Sprintf(":f%d", i)
		vals[n], vals[n+"a"], vals[n+"b"] = s(f.Username), s(dynamo.FormatTime(f.From.Add(-time.Second))), s(dynamo.FormatTime(f.Until.Add(time.Second)))
		parts = append(parts, fmt.Sprintf("(agg_key = %s AND created_at BETWEEN %sa AND %sb)", n, n, n))
	}
	return strings.Join(parts, " OR ")
}
