package erasure

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/events"
)

// Former names in the second pass (docs/erasure.md, "Former names"): the second pass
// finds the person's former usernames in the erasure's pointer item (the first pass
// keeps them there while it still reads the user's partition; the pointer goes with the
// tombstone) and sweeps the memberships under them again.

// keepFormer adds the subject's former names to the erasure's pointer item.
func (x *Eraser) keepFormer(ctx context.Context, row dynamo.Tenant, erasureID string, former []events.FormerName) error {
	b, err := json.Marshal(former)
	if err != nil {
		return err
	}
	_, err = x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(row.CommandsTable), Key: pointerKey(erasureID),
		UpdateExpression:          aws.String("SET former_names = :f"),
		ConditionExpression:       aws.String("attribute_exists(id)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":f": s(string(b))},
	})
	if err != nil && !sdkerr.ConditionFailed(err) {
		return fmt.Errorf("keep the former names of erasure %s: %w", erasureID, dynamo.Translate(err))
	}
	return nil
}

// keptFormer reads the former names the first pass kept in the erasure's pointer.
func (x *Eraser) keptFormer(ctx context.Context, row dynamo.Tenant, erasureID string) ([]events.FormerName, error) {
	out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(row.CommandsTable), Key: pointerKey(erasureID), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read the pointer of erasure %s: %w", erasureID, dynamo.Translate(err))
	}
	raw := attrS(out.Item, "former_names")
	if raw == "" {
		return nil, nil
	}
	var former []events.FormerName
	if err := json.Unmarshal([]byte(raw), &former); err != nil {
		return nil, fmt.Errorf("erasure %s: former names: %w", erasureID, err)
	}
	return former, nil
}

// sweepFormerMemberships sweeps the read memberships under each former name again, in
// every read generation (eraseFormerMemberships).
func (x *Eraser) sweepFormerMemberships(ctx context.Context, row dynamo.Tenant, subj *Subject, groups map[string]bool) error {
	for _, f := range subj.Former {
		free, err := x.nameFree(ctx, row.CommandsTable, f.Username)
		if err != nil {
			return err
		}
		users, _ := readTables(row, x.names)
		for _, t := range users {
			if err := x.eraseFormerMemberships(ctx, row, t, subj, f.Username, free, groups); err != nil && !missing(err) {
				return err
			}
		}
	}
	return nil
}

// nameFree reports whether nobody holds the username now (no user, or a tombstone).
func (x *Eraser) nameFree(ctx context.Context, table, name string) (bool, error) {
	out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": s(dynamo.UserID(name)), "sk": s(dynamo.SKConfig)}})
	if err != nil {
		return false, fmt.Errorf("read a former name's user: %w", dynamo.Translate(err))
	}
	if out.Item == nil {
		return true, nil
	}
	b, ok := out.Item["deleted"].(*types.AttributeValueMemberBOOL)
	return ok && b.Value, nil
}

// eraseFormerMemberships deletes, in the read table t, the person's memberships under a
// former name in the groups the person was in. When nobody holds the name, every one.
// When a later user holds it, a live membership is theirs (the person's moved with the
// rename), and so is a tombstone whose group record (at the tombstone's version) names
// the name with another id; a tombstone whose record names the person (or an erased
// member, after the rewrite) is the person's, and goes.
func (x *Eraser) eraseFormerMemberships(ctx context.Context, row dynamo.Tenant, t string, subj *Subject, name string, free bool, groups map[string]bool) error {
	var keys []map[string]types.AttributeValue
	for _, g := range sortedKeys(groups) {
		k := map[string]types.AttributeValue{"id": s(dynamo.GroupID(g)), "sk": s(dynamo.MemberSK(name))}
		if free {
			keys = append(keys, k)
			continue
		}
		out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(t), Key: k, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return fmt.Errorf("read a membership under a former name: %w", errors.Join(dynamo.Translate(err), missingErr(err)))
		}
		tomb, ok := out.Item["is_deleted"].(*types.AttributeValueMemberBOOL)
		if out.Item == nil || !ok || !tomb.Value {
			continue
		}
		v := out.Item["version"]
		mine, err := x.tombstoneOf(ctx, row.CommandsTable, g, historyVersion(out.Item), name, subj)
		if err != nil {
			return err
		}
		if !mine {
			continue
		}
		_, err = x.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(t), Key: k,
			ConditionExpression:       aws.String("is_deleted = :y AND version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":y": &types.AttributeValueMemberBOOL{Value: true}, ":v": v}})
		if err != nil && !sdkerr.ConditionFailed(err) {
			return fmt.Errorf("delete a membership tombstone under a former name: %w", errors.Join(dynamo.Translate(err), missingErr(err)))
		}
	}
	return x.batchDelete(ctx, t, keys)
}

// tombstoneOf reports whether the group record at version names name only as the subject
// (or as an erased member): the membership tombstone it left under the name is theirs. A
// record that names the name with another id, or that is not there, is not.
func (x *Eraser) tombstoneOf(ctx context.Context, table, group string, version int64, name string, subj *Subject) (bool, error) {
	out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": s(dynamo.GroupID(group)), "sk": s(dynamo.HistorySK(version))}})
	if err != nil {
		return false, fmt.Errorf("read a group record: %w", dynamo.Translate(err))
	}
	if out.Item == nil {
		return false, nil
	}
	env, err := dynamo.DecodeRecord(x.reg, out.Item)
	if err != nil {
		return false, err
	}
	if err := dynamo.JoinParts(ctx, x.db, x.reg, table, out.Item, &env); err != nil {
		return false, err
	}
	type member struct {
		name, id string
		erased   bool
	}
	var ms []member
	switch p := env.Payload.(type) {
	case *events.GroupMemberAdded:
		ms = append(ms, member{p.Username, p.UserID, p.Erased})
	case *events.GroupMemberRemoved:
		ms = append(ms, member{p.Username, p.UserID, p.Erased})
	case *events.GroupMembersChanged:
		for _, m := range append(append([]events.Member{}, p.Added...), p.Removed...) {
			ms = append(ms, member{m.Username, m.UserID, m.Erased})
		}
	case *events.GroupRenamed:
		for _, m := range p.Members {
			ms = append(ms, member{m.Username, m.UserID, m.Erased})
		}
	case *events.GroupDeleted:
		for _, m := range p.Members {
			ms = append(ms, member{m.Username, m.UserID, m.Erased})
		}
	}
	mine := false
	for _, m := range ms {
		switch {
		case m.name == name && !subj.isMember("", m.id):
			return false, nil // the later holder's
		case m.erased || (m.name == name && subj.isMember("", m.id)):
			mine = true
		}
	}
	return mine, nil
}
