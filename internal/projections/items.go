package projections

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// Item is one DynamoDB item.
type Item = map[string]types.AttributeValue

// The views below are the items of the read and activity tables (docs/storage.md). The
// projector writes them by marshalling these structs and the query side decodes them with
// the Decode functions, so both sides share one shape. Timestamps are strings in
// dynamo.TimeFormat because that is how they sort inside keys.

// UserView is a user's `config` item in the read table (id `user#<username>`, sk `config`).
// A tombstone has IsDeleted, Version, Username, ConfigUpdatedAt and DeletedMembershipRev
// only — no GSI keys, so no index lists it.
type UserView struct {
	ID         string              `dynamodbav:"id"`
	SK         string              `dynamodbav:"sk"`
	Kind       string              `dynamodbav:"kind,omitempty"`
	UserID     string              `dynamodbav:"user_id,omitempty"`
	Username   string              `dynamodbav:"username"`
	Email      string              `dynamodbav:"email,omitempty"`
	FirstName  string              `dynamodbav:"first_name,omitempty"`
	LastName   string              `dynamodbav:"last_name,omitempty"`
	IsActive   bool                `dynamodbav:"is_active"`
	Attributes map[string][]string `dynamodbav:"attributes,omitempty"`
	Version    int64               `dynamodbav:"version"`
	CreatedAt  string              `dynamodbav:"created_at,omitempty"`
	// ConfigUpdatedAt is the user's own updated_at; UpdatedAt is when it was projected.
	ConfigUpdatedAt      string `dynamodbav:"config_updated_at,omitempty"`
	UpdatedAt            string `dynamodbav:"updated_at,omitempty"`
	DeletedMembershipRev int64  `dynamodbav:"deleted_membership_rev"`
	IsDeleted            bool   `dynamodbav:"is_deleted"`
	UpdatedSort          string `dynamodbav:"updated_sort,omitempty"`
	LastNameSort         string `dynamodbav:"last_name_sort,omitempty"`
	FirstNameSort        string `dynamodbav:"first_name_sort,omitempty"`
	// NameSort is the username: GroupNameGSI's `user` partition lists users by username.
	NameSort string `dynamodbav:"name_sort,omitempty"`
	// FormerNames are the usernames the person held before renames, with when: the
	// activity feed of the user reads their partitions for those times too.
	FormerNames []dynamo.FormerName `dynamodbav:"former_names,omitempty"`
}

// GroupView is a group's `config` item (id `group#<key>`, sk `config`). A tombstone has
// IsDeleted, Version, Key, Name, ConfigUpdatedAt and LastDeletedVersion only.
type GroupView struct {
	ID                 string              `dynamodbav:"id"`
	SK                 string              `dynamodbav:"sk"`
	Kind               string              `dynamodbav:"kind,omitempty"`
	GroupID            string              `dynamodbav:"group_id,omitempty"`
	Key                string              `dynamodbav:"key"`
	Name               string              `dynamodbav:"name"`
	Description        string              `dynamodbav:"description,omitempty"`
	Attributes         map[string][]string `dynamodbav:"attributes,omitempty"`
	Version            int64               `dynamodbav:"version"`
	CreatedAt          string              `dynamodbav:"created_at,omitempty"`
	ConfigUpdatedAt    string              `dynamodbav:"config_updated_at,omitempty"`
	UpdatedAt          string              `dynamodbav:"updated_at,omitempty"`
	LastDeletedVersion int64               `dynamodbav:"last_deleted_version"`
	IsDeleted          bool                `dynamodbav:"is_deleted"`
	UpdatedSort        string              `dynamodbav:"updated_sort,omitempty"`
	NameSort           string              `dynamodbav:"name_sort,omitempty"`
	// FormerNames are the names the group held before renames, with when: its activity
	// feed reads their partitions for those times too.
	FormerNames []dynamo.FormerName `dynamodbav:"former_names,omitempty"`
}

// MembershipView is a membership item (id `group#<key>`, sk `member#<username>`). Only a
// live one carries MemberID and MemberOf, the keys of UserGroupGSI and GroupMemberGSI.
// Version is the group version of the last membership event; a tombstone written for a
// member_removed has no MembershipRev and AddedAt.
type MembershipView struct {
	ID            string `dynamodbav:"id"`
	SK            string `dynamodbav:"sk"`
	MemberID      string `dynamodbav:"member_id,omitempty"`
	MemberOf      string `dynamodbav:"member_of,omitempty"`
	Username      string `dynamodbav:"username"`
	GroupKey      string `dynamodbav:"group_key"`
	GroupName     string `dynamodbav:"group_name"`
	Version       int64  `dynamodbav:"version"`
	MembershipRev int64  `dynamodbav:"membership_rev"`
	AddedAt       string `dynamodbav:"added_at,omitempty"`
	// ExpiresAt is when the membership ends by itself ("" never).
	ExpiresAt string `dynamodbav:"expires_at,omitempty"`
	IsDeleted bool   `dynamodbav:"is_deleted"`
	UpdatedAt string `dynamodbav:"updated_at,omitempty"`
}

// ActivityView is an activity item (pk EntityPK, sk ActivitySK); ActorGSI and DayGSI list
// it per actor and per UTC day.
type ActivityView struct {
	PK         string `dynamodbav:"pk"`
	SK         string `dynamodbav:"sk"`
	EventID    string `dynamodbav:"event_id"`
	Type       string `dynamodbav:"type"`
	Entity     string `dynamodbav:"entity"`
	Actor      string `dynamodbav:"actor"`
	OccurredAt string `dynamodbav:"occurred_at"`
	Version    int64  `dynamodbav:"version"`
	// Changes is the JSON of the event's change set (field → {old, new}); see ChangeSet.
	Changes string `dynamodbav:"changes"`
	// ExpiresAt is the TTL in epoch seconds; 0 (absent) keeps the item forever.
	ExpiresAt int64 `dynamodbav:"expires_at,omitempty"`
	// ActorPK and DayPK are absent on the copy of a membership change in the member's
	// own feed (memberFeedItems), which ActorGSI and DayGSI must not list twice.
	ActorPK string `dynamodbav:"actor_pk,omitempty"`
	DayPK   string `dynamodbav:"day_pk,omitempty"`
	// UserID is the member's id on that copy only (an erasure matches it); never shown.
	UserID string `dynamodbav:"user_id,omitempty"`
}

// ChangeSet decodes Changes.
func (a ActivityView) ChangeSet() (map[string]events.Change, error) {
	out := map[string]events.Change{}
	if a.Changes == "" {
		return out, nil
	}
	if err := json.Unmarshal([]byte(a.Changes), &out); err != nil {
		return nil, fmt.Errorf("activity %s: changes: %w", a.EventID, err)
	}
	return out, nil
}

// DecodeUser decodes a user config item of the read table.
func DecodeUser(item Item) (UserView, error) { return decodeUser(item) }

// DecodeGroup decodes a group config item of the read table.
func DecodeGroup(item Item) (GroupView, error) { return decodeGroup(item) }

// DecodeMembership decodes a membership item of the read table.
func DecodeMembership(item Item) (MembershipView, error) {
	return decodeMembership(item)
}

// DecodeActivity decodes an activity item.
func DecodeActivity(item Item) (ActivityView, error) {
	return decode[ActivityView](item, "activity")
}

func decode[T any](item Item, what string) (T, error) {
	var v T
	if err := attributevalue.UnmarshalMap(item, &v); err != nil {
		return v, fmt.Errorf("decode %s item: %w", what, err)
	}
	return v, nil
}

func marshal(v any) (Item, error) {
	item, err := attributevalue.MarshalMap(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return item, nil
}

// Key and GSI attribute values (docs/storage.md); the query side builds its key
// conditions with the same functions.

// EntityPK is the activity partition of an entity such as "user:jdoe"
// (events.Envelope.Entity).
func EntityPK(entity string) string { return "entity#" + entity }

// GroupPointer is the item in a user's partition of the read table that names a group the
// projector wrote a membership of the user in (MemberAdd): only id, sk and group_key, the
// same whatever the order of events, so that applying them in any order leaves it the same.
func GroupPointer(username, groupKey string) Item {
	return Item{"id": str(dynamo.UserID(username)), "sk": str(dynamo.GroupPointerSK(groupKey)), "group_key": str(groupKey)}
}

// ActivitySK orders an entity's (and an actor's, and a day's) activity by time; the event
// id makes it unique and derived from the event, so a replayed record rewrites its item.
func ActivitySK(occurredAt time.Time, eventID string) string {
	return dynamo.FormatTime(occurredAt) + "#" + eventID
}

// ActorPK is the ActorGSI partition of an actor.
func ActorPK(actor string) string { return "actor#" + actor }

// DayPK is the DayGSI partition of t's UTC day.
func DayPK(t time.Time) string { return "day#" + t.UTC().Format(time.DateOnly) }

// UpdatedSort is the UserUpdatedAtGSI sort key: the entity's own updated_at (TimeFormat),
// then its username or group key so that equal times still have a total order.
func UpdatedSort(configUpdatedAt, name string) string { return configUpdatedAt + "#" + name }

// NameSort is the UserLastNameGSI / UserFirstNameGSI sort key. \u0001 sorts before every
// character a name may hold, so "ann" sorts before "anna" whatever the usernames.
func NameSort(name, username string) string { return NamePrefix(name) + "\u0001" + username }

// NamePrefix is the begins_with value for a case-insensitive name prefix search.
func NamePrefix(prefix string) string { return strings.ToLower(prefix) }

// EmailKey is the UserEmailGSI partition of an email address.
func EmailKey(email string) string { return strings.ToLower(email) }
