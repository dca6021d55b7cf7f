package dynamo_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

var (
	at      = time.Date(2026, 11, 21, 10, 0, 0, 123_000_000, time.UTC)
	later   = at.Add(5*time.Minute + 456*time.Millisecond)
	someone = events.User{
		ID: "7d1c", Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", LastName: "Doe", IsActive: true,
		Attributes: map[string][]string{"dept": {"eng", "ops"}}, Version: 3, CreatedAt: at, UpdatedAt: later,
		DeletedMembershipRev: 2,
	}
	tombstone = events.User{Username: "jdoe", Version: 4, CreatedAt: at, UpdatedAt: later, Deleted: true, DeletedMembershipRev: 5}
	admins    = events.Group{
		ID: "9f2e", Key: "team alpha", Name: "Team Alpha", Description: "multi\nline", Attributes: map[string][]string{"k": {"v"}},
		Version: 3, CreatedAt: at, UpdatedAt: later, LastDeletedVersion: 1,
	}
	deletedGroup = events.Group{Key: "team alpha", Name: "Team Alpha", Version: 4, CreatedAt: at, UpdatedAt: later,
		Deleted: true, LastDeletedVersion: 4}
)

// envelope is a record of payload with every metadata field set.
func envelope(p events.Payload) events.Envelope {
	e := events.Envelope{
		EventID: "evt-" + string(p.EventType()), Type: p.EventType(), SchemaVersion: events.SchemaVersion,
		Actor: "kc-user-7", CommandID: "cmd-1", CorrelationID: "corr-1", OccurredAt: later,
		Changes: map[string]events.Change{
			"email":      {Old: "old@example.com", New: "jdoe@example.com"},
			"is_active":  {Old: nil, New: true},
			"attributes": {Old: nil, New: map[string]any{"dept": []any{"eng"}}},
		},
		Payload: p,
	}
	if u, ok := events.UserState(p); ok {
		e.Kind, e.Key, e.Version = events.KindUser, u.Username, u.Version
	} else if g, ok := events.GroupState(p); ok {
		e.Kind, e.Key, e.Version = events.KindGroup, g.Key, g.Version
	}
	return e
}

// everyEvent is one record of every event type, with every payload field set.
func everyEvent() []events.Envelope {
	user4 := someone
	user4.Version = 4
	renamed := someone
	renamedGroup := admins
	renamedGroup.Key, renamedGroup.Name, renamedGroup.Version, renamedGroup.NamedAt = "wheel", "Wheel", 4, later
	renamedGroup.FormerNames = []events.FormerGroupName{{Name: "Team Alpha", Key: "team alpha", From: at, Until: later}}
	renamed.Username, renamed.Version, renamed.NamedAt = "jane.doe", 4, later
	renamed.FormerNames = []events.FormerName{{Username: "jdoe", From: at, Until: later}}
	return []events.Envelope{
		envelope(&events.UserCreated{User: someone, PasswordCiphertext: "v1.local.abc"}),
		envelope(&events.UserUpdated{User: someone}),
		envelope(&events.UserPasswordChanged{User: user4, PasswordCiphertext: "v1.local.def"}),
		envelope(&events.UserDeactivated{User: someone}),
		envelope(&events.UserActivated{User: someone}),
		envelope(&events.UserDeleted{User: tombstone, PreviousID: "7d1c", Groups: []string{"admins", "team alpha"}}),
		envelope(&events.UserErased{User: tombstone, PreviousID: "7d1c", Groups: []string{"admins"}, ErasureID: "0b5e"}),
		envelope(&events.UserRenamed{User: renamed, PreviousUsername: "jdoe", PreviousVersion: 3, PreviousDeletedMembershipRev: 3,
			Memberships: []events.RenamedMembership{{GroupKey: "team alpha", GroupName: "Team Alpha", GroupVersion: 3, AddedVersion: 2,
				AddedAt: at, MembershipRev: 1}}}),
		envelope(&events.GroupCreated{Group: admins}),
		envelope(&events.GroupUpdated{Group: admins}),
		envelope(&events.GroupDeleted{Group: deletedGroup, PreviousID: "9f2e"}),
		envelope(&events.GroupRenamed{Group: renamedGroup, PreviousName: "Team Alpha", PreviousKey: "team alpha", PreviousVersion: 3,
			Members: []events.RenamedMember{{Username: "jdoe", UserID: "4a7b", MembershipRev: 2, AddedAt: at}}}),
		envelope(&events.GroupMemberAdded{Group: admins, Username: "jdoe", UserID: "7d1c", MembershipRev: 6}),
		envelope(&events.GroupMemberRemoved{Group: admins, Username: "jdoe", UserID: "7d1c"}),
		envelope(&events.GroupMemberExpirySet{Group: admins, Username: "jdoe", UserID: "7d1c", MembershipRev: 6, AddedAt: at,
			ExpiresAt: &later, Previous: &at}),
		envelope(&events.GroupMembersChanged{Group: admins,
			Added:   []events.Member{{Username: "jdoe", UserID: "7d1c", MembershipRev: 3, ExpiresAt: &later}, {Username: "asmith", UserID: "8e2d", MembershipRev: 1}},
			Removed: []events.Member{{Username: "bob", UserID: "5a0b"}}}),
	}
}

func TestEveryEventTypeIsCovered(t *testing.T) {
	var covered []events.Type
	for _, e := range everyEvent() {
		covered = append(covered, e.Type)
	}
	registered := events.NewRegistry().Types()
	slices.Sort(covered)
	slices.Sort(registered)
	if !slices.Equal(covered, registered) {
		t.Errorf("round trips cover %v, the registry holds %v", covered, registered)
	}
}

// TestRecordRoundTrip encodes every event type as its config#<version> item, stores it in
// DynamoDB Local, reads it back and decodes it: the event comes back equal.
func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	local := dynamotest.Current(t)
	db := local.DynamoDB()
	table := dynamotest.UniqueName("records") + "_user_commands"
	if err := dynamo.EnsureTable(t.Context(), db, dynamo.CommandsTable(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dynamo.DeleteTable(context.Background(), db, table) })
	reg := events.NewRegistry()
	recordedAt := later.Add(40 * time.Millisecond)
	seedCommand := map[events.Type]string{
		events.UserCreatedType: "add", events.GroupCreatedType: "add", events.GroupMemberAddedType: "add",
		events.UserDeletedType: "delete", events.UserErasedType: "delete", events.GroupDeletedType: "delete", events.GroupMemberRemovedType: "delete",
	}

	for i, want := range everyEvent() {
		t.Run(string(want.Type), func(t *testing.T) {
			ttl := int64(0)
			if i%2 == 1 {
				ttl = later.Add(90 * 24 * time.Hour).Unix()
			}
			item, err := dynamo.EncodeRecord(want, recordedAt, ttl)
			if err != nil {
				t.Fatal(err)
			}
			if got := str(item, "id"); got != dynamo.AggregateID(want.Kind, want.Key) {
				t.Errorf("id %q", got)
			}
			if got := str(item, "sk"); got != dynamo.HistorySK(want.Version) || got != "config#000000000003" && got != "config#000000000004" {
				t.Errorf("sk %q", got)
			}
			command := seedCommand[want.Type]
			if command == "" {
				command = "update"
			}
			if got := str(item, "command"); got != command {
				t.Errorf("command %q, want %q", got, command)
			}
			if _, ok := item["ttl"]; ok != (ttl > 0) {
				t.Errorf("ttl present %v with retention %d", ok, ttl)
			}
			if n, ok := item["recorded_at_ms"].(*types.AttributeValueMemberN); !ok || n.Value != "1795255500619" {
				t.Errorf("recorded_at_ms %v", item["recorded_at_ms"])
			}

			// Straight back, and through the table.
			got, err := dynamo.DecodeRecord(reg, item)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded\n %+v\nwant\n %+v", got, want)
			}
			if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
				t.Fatal(err)
			}
			out, err := db.GetItem(t.Context(), &dynamodb.GetItemInput{
				TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"id": item["id"], "sk": item["sk"]},
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err = dynamo.DecodeRecord(reg, out.Item)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("decoded from the table\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

func TestDecodeRecordRefusesWhatIsNotARecord(t *testing.T) {
	reg := events.NewRegistry()
	good := func() map[string]types.AttributeValue {
		item, err := dynamo.EncodeRecord(envelope(&events.UserUpdated{User: someone}), later, 0)
		if err != nil {
			t.Fatal(err)
		}
		return item
	}
	cases := []struct {
		name   string
		change func(map[string]types.AttributeValue)
	}{
		{"a config item", func(it map[string]types.AttributeValue) { it["sk"] = s("config") }},
		{"a membership item", func(it map[string]types.AttributeValue) { it["sk"] = s("member#jdoe") }},
		{"an unknown event type", func(it map[string]types.AttributeValue) { it["event_type"] = s("user.teleported") }},
		{"a newer schema version", func(it map[string]types.AttributeValue) {
			it["schema_version"] = &types.AttributeValueMemberN{Value: "2"}
		}},
		{"no schema version", func(it map[string]types.AttributeValue) { delete(it, "schema_version") }},
		{"no event id", func(it map[string]types.AttributeValue) { delete(it, "event_id") }},
		{"no version", func(it map[string]types.AttributeValue) { delete(it, "version") }},
		{"an unknown kind", func(it map[string]types.AttributeValue) { it["kind"] = s("role") }},
		{"a malformed time", func(it map[string]types.AttributeValue) { it["occurred_at"] = s("yesterday") }},
		{"a malformed payload", func(it map[string]types.AttributeValue) { it["data"] = s(`{"user":`) }},
		{"malformed changes", func(it map[string]types.AttributeValue) { it["changes"] = s(`[1]`) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			item := good()
			if _, err := dynamo.DecodeRecord(reg, item); err != nil {
				t.Fatalf("the unchanged item does not decode: %v", err)
			}
			tc.change(item)
			if e, err := dynamo.DecodeRecord(reg, item); err == nil {
				t.Errorf("decoded %+v, want an error", e)
			}
		})
	}
}

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func str(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
