package dynamo

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/events"
)

// TimeFormat is how every timestamp is stored: RFC 3339, UTC, milliseconds, fixed width so
// that strings sort as times.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime formats t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ParseTime parses a TimeFormat string.
func ParseTime(v string) (time.Time, error) { return time.Parse(TimeFormat, v) }

// Key prefixes of the write and read tables.
const (
	SKConfig      = "config"
	SKMemberships = "memberships"
	skHistory     = "config#"
	skMember      = "member#"
	skGroupPtr    = "group#"
)

// UserID is the partition key of a user aggregate.
func UserID(username string) string { return "user#" + username }

// GroupID is the partition key of a group aggregate.
func GroupID(key string) string { return "group#" + key }

// AggregateID is the partition key of an aggregate of kind k.
func AggregateID(k events.AggregateKind, key string) string { return string(k) + "#" + key }

// HistorySK is the sort key of version v's immutable record.
func HistorySK(v int64) string { return fmt.Sprintf("%s%012d", skHistory, v) }

// MemberSK is the sort key of a membership in a group's partition.
func MemberSK(username string) string { return skMember + username }

// GroupPointerSK is the sort key of a membership pointer in a user's partition.
func GroupPointerSK(groupKey string) string { return skGroupPtr + groupKey }

// IsHistorySK reports whether sk names a `config#<version>` record (not one of its
// parts: IsPartSK).
func IsHistorySK(sk string) bool {
	return strings.HasPrefix(sk, skHistory) && !strings.Contains(sk[len(skHistory):], "#")
}

// IsMemberSK reports whether sk names a membership item.
func IsMemberSK(sk string) bool { return strings.HasPrefix(sk, skMember) }

// seedCommand is the seed's `command` attribute for an event: add, update or delete.
func seedCommand(t events.Type) string {
	switch t {
	case events.UserCreatedType, events.GroupCreatedType, events.GroupMemberAddedType:
		return "add"
	case events.UserDeletedType, events.UserErasedType, events.GroupDeletedType, events.GroupMemberRemovedType:
		return "delete"
	}
	return "update"
}

// EncodeRecord is the `config#<version>` item of an event. ttl, when non-zero, is the
// history item's expiry (epoch seconds).
func EncodeRecord(e events.Envelope, recordedAt time.Time, ttl int64) (map[string]types.AttributeValue, error) {
	data, err := events.Encode(e.Payload)
	if err != nil {
		return nil, err
	}
	item := map[string]types.AttributeValue{
		"id":             str(AggregateID(e.Kind, e.Key)),
		"sk":             str(HistorySK(e.Version)),
		"event_type":     str(string(e.Type)),
		"schema_version": num(int64(e.SchemaVersion)),
		"event_id":       str(e.EventID),
		"kind":           str(string(e.Kind)),
		"key":            str(e.Key),
		"version":        num(e.Version),
		"actor":          str(e.Actor),
		"command_id":     str(e.CommandID),
		"correlation_id": str(e.CorrelationID),
		"occurred_at":    str(FormatTime(e.OccurredAt)),
		"updated_at":     str(FormatTime(e.OccurredAt)),
		"recorded_at_ms": num(recordedAt.UnixMilli()),
		"command":        str(seedCommand(e.Type)),
		"sso_type":       str("keycloak"),
		"data":           str(string(data)),
	}
	if len(e.Changes) > 0 {
		ch, err := json.Marshal(e.Changes)
		if err != nil {
			return nil, fmt.Errorf("encode changes of %s: %w", e.Type, err)
		}
		item["changes"] = str(string(ch))
	}
	if ttl > 0 {
		item["ttl"] = num(ttl)
	}
	return item, nil
}

// DecodeRecord turns a `config#<version>` item back into its event.
func DecodeRecord(reg *events.Registry, item map[string]types.AttributeValue) (events.Envelope, error) {
	var e events.Envelope
	sk := getS(item, "sk")
	if !IsHistorySK(sk) {
		return e, fmt.Errorf("item %s/%s is not a history record", logID(getS(item, "id")), logSK(sk))
	}
	e.EventID = getS(item, "event_id")
	e.Type = events.Type(getS(item, "event_type"))
	sv, err := getN(item, "schema_version")
	if err != nil {
		return e, err
	}
	e.SchemaVersion = int(sv)
	e.Kind = events.AggregateKind(getS(item, "kind"))
	e.Key = getS(item, "key")
	if e.Version, err = getN(item, "version"); err != nil {
		return e, err
	}
	e.Actor = getS(item, "actor")
	e.CommandID = getS(item, "command_id")
	e.CorrelationID = getS(item, "correlation_id")
	if e.OccurredAt, err = ParseTime(getS(item, "occurred_at")); err != nil {
		return e, fmt.Errorf("record %s v%d: occurred_at: %w", logAgg(e.Kind, e.Key), e.Version, err)
	}
	if ch := getS(item, "changes"); ch != "" {
		if err := json.Unmarshal([]byte(ch), &e.Changes); err != nil {
			return e, fmt.Errorf("record %s v%d: changes: %w", logAgg(e.Kind, e.Key), e.Version, err)
		}
	}
	if e.Payload, err = reg.Decode(e.Type, e.SchemaVersion, []byte(getS(item, "data"))); err != nil {
		return e, fmt.Errorf("record %s v%d: %w", logAgg(e.Kind, e.Key), e.Version, err)
	}
	if e.EventID == "" || e.Key == "" || e.Version < 1 || (e.Kind != events.KindUser && e.Kind != events.KindGroup) {
		return e, fmt.Errorf("record %s/%s: missing metadata", logID(getS(item, "id")), sk)
	}
	return e, nil
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func boolean(v bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: v} }

func getS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s: missing or not a number", name)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return n, nil
}

func getBool(item map[string]types.AttributeValue, name string) bool {
	v, ok := item[name].(*types.AttributeValueMemberBOOL)
	return ok && v.Value
}

// StringAttr is the string value of an item's attribute, "" when absent or not a string.
func StringAttr(item map[string]types.AttributeValue, name string) string { return getS(item, name) }
