package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/objects"
)

func (s *CommandStore) idempotencyPut(key string, rec commands.IdempotencyRecord) *types.Put {
	item := map[string]types.AttributeValue{
		"key":          str(key),
		"request_hash": str(rec.RequestHash),
		"status":       num(int64(rec.Status)),
		"kind":         str(string(rec.Kind)),
		"agg_key":      str(rec.Key),
		"version":      num(rec.Version),
		"command_id":   str(rec.CommandID),
		"created_at":   str(FormatTime(rec.CreatedAt)),
		"expires_at":   num(rec.CreatedAt.Add(idempotencyWindow).Unix()),
	}
	if rec.Location != "" {
		item["location"] = str(rec.Location)
	}
	if len(rec.Body) > 0 {
		item["body"] = str(string(rec.Body))
	}
	// An expired record that TTL has not removed yet may be taken over.
	return &types.Put{
		TableName:                 aws.String(s.names.Idempotency()),
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(#k) OR expires_at < :now"),
		ExpressionAttributeNames:  map[string]string{"#k": "key"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(rec.CreatedAt.Unix())},
	}
}

// LookupIdempotency finds what a first request with this (scoped) key recorded; nil when
// nothing or only an expired record is there.
func (s *CommandStore) LookupIdempotency(ctx context.Context, key string) (*commands.IdempotencyRecord, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.names.Idempotency()),
		Key:            map[string]types.AttributeValue{"key": str(key)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("look up idempotency key: %w", translate(err))
	}
	if out.Item == nil {
		return nil, nil
	}
	exp, _ := getN(out.Item, "expires_at")
	if exp < s.now().Unix() {
		return nil, nil
	}
	status, _ := getN(out.Item, "status")
	version, _ := getN(out.Item, "version")
	created, _ := ParseTime(getS(out.Item, "created_at"))
	return &commands.IdempotencyRecord{
		RequestHash: getS(out.Item, "request_hash"),
		Status:      int(status),
		Location:    getS(out.Item, "location"),
		Kind:        events.AggregateKind(getS(out.Item, "kind")),
		Key:         getS(out.Item, "agg_key"),
		Version:     version,
		CommandID:   getS(out.Item, "command_id"),
		CreatedAt:   created,
		Body:        []byte(getS(out.Item, "body")),
	}, nil
}

// replayOrReused explains a taken idempotency key: the same request is replayed, another
// request with the same key is refused.
func (s *CommandStore) replayOrReused(ctx context.Context, idem commands.Idempotency) error {
	rec, err := s.LookupIdempotency(ctx, idem.Key)
	if err != nil {
		return err
	}
	if rec == nil {
		// Expired between the write and this read: let the command be decided again.
		return commands.ErrVersionConflict
	}
	if !idem.Request.Matches(rec.RequestHash) {
		return apperr.IdempotencyKeyReused()
	}
	return &commands.ReplayError{Record: *rec}
}

// RecordNoop records an idempotent request that changed nothing.
func (s *CommandStore) RecordNoop(ctx context.Context, t commands.Tenant, idem commands.Idempotency, commandID string, kind events.AggregateKind, key string, version int64) error {
	rec := commands.IdempotencyRecord{
		RequestHash: idem.Request.Stored, Status: idem.Status, Location: idem.Location,
		Kind: kind, Key: key, Version: version, CommandID: commandID, CreatedAt: s.now(),
	}
	if s.keepsAnswers(idem) {
		// The answer is the state of the version the request found; its record may expire
		// before the key does.
		env, err := s.LoadRecord(ctx, t, kind, key, version)
		if err != nil && !errors.Is(err, commands.ErrRecordGone) {
			return err
		}
		if err == nil {
			if rec.Body, err = answerBody(env.Payload); err != nil {
				return err
			}
		}
	}
	put := s.idempotencyPut(idem.Key, rec)
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression,
		ExpressionAttributeNames: put.ExpressionAttributeNames, ExpressionAttributeValues: put.ExpressionAttributeValues,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return s.replayOrReused(ctx, idem)
	}
	if err != nil {
		return fmt.Errorf("record idempotency key: %w", translate(err))
	}
	return nil
}

// keepsAnswers reports whether an idempotency record keeps its answer's body: only when
// history records expire (they rebuild it otherwise), and only for answers with a body.
func (s *CommandStore) keepsAnswers(idem commands.Idempotency) bool {
	return s.historyRetention > 0 && idem.Status != http.StatusNoContent
}

// answerBody is the JSON body a command's answer carries: the state after it, as API.md's
// objects show it (never a password).
func answerBody(p events.Payload) ([]byte, error) {
	var obj any
	if u, ok := events.UserState(p); ok {
		obj = objects.FromUser(u)
	} else if g, ok := events.GroupState(p); ok {
		obj = objects.FromGroup(g)
	} else {
		return nil, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode the answer to keep: %w", err)
	}
	return b, nil
}
