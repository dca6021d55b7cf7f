package projections_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// query runs one Query to the end and returns its items in order.
func query(t *testing.T, db *dynamodb.Client, in *dynamodb.QueryInput) []projections.Item {
	t.Helper()
	var out []projections.Item
	pages := dynamodb.NewQueryPaginator(db, in)
	for pages.HasMorePages() {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatalf("query %s %s: %v", aws.ToString(in.TableName), aws.ToString(in.IndexName), err)
		}
		out = append(out, page.Items...)
	}
	return out
}

// byKey is a Query of index for items whose partition attribute pk equals v, optionally
// with begins_with on the sort attribute sk.
func byKey(table, index, pk, v, sk, prefix string, forward bool) *dynamodb.QueryInput {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": pk},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: v}},
		ScanIndexForward:          aws.Bool(forward),
	}
	if index != "" {
		in.IndexName = aws.String(index)
	}
	if prefix != "" {
		in.KeyConditionExpression = aws.String("#pk = :pk AND begins_with(#sk, :p)")
		in.ExpressionAttributeNames["#sk"] = sk
		in.ExpressionAttributeValues[":p"] = &types.AttributeValueMemberS{Value: prefix}
	}
	return in
}

func usernames(t *testing.T, items []projections.Item) []string {
	t.Helper()
	out := []string{}
	for _, it := range items {
		u, err := projections.DecodeUser(it)
		if err != nil {
			t.Fatal(err)
		}
		if u.IsDeleted {
			t.Errorf("an index lists the tombstone of %s", u.Username)
		}
		out = append(out, u.Username)
	}
	return out
}

func groupKeys(t *testing.T, items []projections.Item) []string {
	t.Helper()
	out := []string{}
	for _, it := range items {
		g, err := projections.DecodeGroup(it)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g.Key)
	}
	return out
}

func memberships(t *testing.T, items []projections.Item) []string {
	t.Helper()
	out := []string{}
	for _, it := range items {
		m, err := projections.DecodeMembership(it)
		if err != nil {
			t.Fatal(err)
		}
		if m.IsDeleted {
			t.Errorf("an index lists the membership tombstone %s/%s", m.GroupKey, m.Username)
		}
		out = append(out, m.GroupKey+":"+m.Username)
	}
	return out
}

// TestReadIndexesServeTheQueryAPI: given users and groups with memberships, some deleted,
// when the query side runs the Queries API.md's list endpoints need, then each answers
// exactly the live entities in the documented order, decoded with the shared views.
func TestReadIndexesServeTheQueryAPI(t *testing.T) {
	t.Parallel()
	db := client(t)
	projectedAt := time.Date(2027, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	p := projections.New(db, projections.Options{Now: func() time.Time { return projectedAt }})
	tables := newTables(t, db)

	w := newWorld(t)
	w.createUser("jdoe", "JDoe@Example.com", "Jane", "Doe")
	w.createUser("zed", "zed@example.com", "Zed", "Ann")
	w.createUser("amy", "amy@example.com", "Amy", "Anna")
	w.createUser("bob", "bob@example.com", "Bob", "")
	w.createUser("gone", "gone@example.com", "Gone", "Annex")
	w.createGroup("Ops", "")
	w.createGroup("Admins", "")
	w.createGroup("Old", "")
	w.addMember("admins", "jdoe")
	w.addMember("ops", "jdoe")
	w.addMember("admins", "zed")
	w.addMember("admins", "gone")
	w.addMember("old", "jdoe")
	w.deleteUser("gone")
	w.deleteGroup("old")
	w.updateUser("zed", func(u *events.User) { u.FirstName = "Zed" + "ek" })
	applyAll(t, p, tables, w.log)

	cases := []struct {
		name string
		in   *dynamodb.QueryInput
		got  func(*testing.T, []projections.Item) []string
		want []string
	}{
		{"UserEmailGSI finds a user by the lower-cased email",
			byKey(tables.Users, dynamo.IndexUserEmail, "email", projections.EmailKey("jdoe@EXAMPLE.com"), "", "", true), usernames, []string{"jdoe"}},
		{"UserEmailGSI does not find a deleted user",
			byKey(tables.Users, dynamo.IndexUserEmail, "email", "gone@example.com", "", "", true), usernames, []string{}},
		{"UserLastNameGSI lists a case-insensitive prefix by name, a shorter name first",
			byKey(tables.Users, dynamo.IndexUserLastName, "kind", "user", "last_name_sort", projections.NamePrefix("ANN"), true), usernames, []string{"zed", "amy"}},
		{"UserLastNameGSI lists no user without a last name",
			byKey(tables.Users, dynamo.IndexUserLastName, "kind", "user", "", "", true), usernames, []string{"zed", "amy", "jdoe"}},
		{"UserFirstNameGSI lists a first-name prefix",
			byKey(tables.Users, dynamo.IndexUserFirstName, "kind", "user", "first_name_sort", projections.NamePrefix("z"), true), usernames, []string{"zed"}},
		{"UserUpdatedAtGSI lists users most recently updated first",
			byKey(tables.Users, dynamo.IndexUserUpdatedAt, "kind", "user", "", "", false), usernames, []string{"zed", "bob", "amy", "jdoe"}},
		{"UserUpdatedAtGSI lists groups by update time too",
			byKey(tables.Users, dynamo.IndexUserUpdatedAt, "kind", "group", "", "", true), groupKeys, []string{"ops", "admins"}},
		{"GroupNameGSI lists live users by username in the user partition, without the deleted one",
			byKey(tables.Users, dynamo.IndexGroupName, "kind", "user", "", "", true), usernames, []string{"amy", "bob", "jdoe", "zed"}},
		{"GroupNameGSI lists a username prefix",
			byKey(tables.Users, dynamo.IndexGroupName, "kind", "user", "name_sort", "j", true), usernames, []string{"jdoe"}},
		{"GroupNameGSI lists live groups by key",
			byKey(tables.Users, dynamo.IndexGroupName, "kind", "group", "", "", true), groupKeys, []string{"admins", "ops"}},
		{"UserGroupGSI lists a user's live groups by key",
			byKey(tables.Users, dynamo.IndexUserGroup, "member_id", "jdoe", "", "", true), memberships, []string{"admins:jdoe", "ops:jdoe"}},
		{"UserGroupGSI lists nothing for a deleted user",
			byKey(tables.Users, dynamo.IndexUserGroup, "member_id", "gone", "", "", true), memberships, []string{}},
		{"GroupMemberGSI lists a group's live members by username",
			byKey(tables.Users, dynamo.IndexGroupMember, "member_of", "admins", "", "", true), memberships, []string{"admins:jdoe", "admins:zed"}},
		{"GroupMemberGSI lists nothing for a deleted group",
			byKey(tables.Users, dynamo.IndexGroupMember, "member_of", "old", "", "", true), memberships, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.got(t, query(t, db, tc.in)); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}

	t.Run("a read item carries the projection time as updated_at", func(t *testing.T) {
		items := query(t, db, byKey(tables.Users, "", "id", dynamo.UserID("jdoe"), "", "", true))
		u, err := projections.DecodeUser(items[0])
		if err != nil {
			t.Fatal(err)
		}
		if want := dynamo.FormatTime(projectedAt); u.UpdatedAt != want || u.ConfigUpdatedAt != at(1) {
			t.Errorf("updated_at %q config_updated_at %q, want %q and %q", u.UpdatedAt, u.ConfigUpdatedAt, want, at(1))
		}
	})
}

// TestActivityFeed: given events by two actors over two days, when they are projected,
// then there is exactly one activity item per event, readable per entity, per actor and
// per day, newest first, expiring after the retention, with the change set and no
// password.
func TestActivityFeed(t *testing.T) {
	t.Parallel()
	db := client(t)
	w := newWorld(t)
	w.createUser("jdoe", "jdoe@example.com", "Jane", "Doe")
	w.createGroup("Admins", "")
	w.actor = "alice"
	w.later(24 * time.Hour)
	w.changePassword("jdoe")
	w.updateUser("jdoe", func(u *events.User) { u.LastName = "Roe" })
	w.addMember("admins", "jdoe")
	w.deleteUser("jdoe")

	for _, tc := range []struct {
		name      string
		retention time.Duration
	}{
		// Long enough that DynamoDB Local's TTL sweeper cannot remove an item mid-test.
		{"with a retention every item expires after it", 10 * 365 * 24 * time.Hour},
		{"without a retention no item expires", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := projections.New(db, projections.Options{Retention: tc.retention})
			tables := newTables(t, db)
			applyAll(t, p, tables, w.log)
			applyAll(t, p, tables, w.log)
			s := takeSnapshot(t, db, tables)
			assertActivities(t, s, w.log)
			assertNoSecrets(t, s)

			byID := map[string]events.Envelope{}
			for _, e := range w.log {
				byID[e.EventID] = e
			}
			ids := func(items []projections.Item) []string {
				out := []string{}
				for _, it := range items {
					a, err := projections.DecodeActivity(it)
					if err != nil {
						t.Fatal(err)
					}
					e := byID[a.EventID]
					want := e.OccurredAt.Add(tc.retention).Unix()
					if tc.retention == 0 {
						want = 0
					}
					if a.ExpiresAt != want {
						t.Errorf("activity %s expires at %d, want %d", a.EventID, a.ExpiresAt, want)
					}
					if a.Type != string(e.Type) || a.Entity != e.Entity() || a.Actor != e.Actor ||
						a.Version != e.Version || a.OccurredAt != dynamo.FormatTime(e.OccurredAt) {
						t.Errorf("activity %+v does not describe %s %s v%d by %s", a, e.Type, e.Entity(), e.Version, e.Actor)
					}
					out = append(out, a.EventID)
				}
				return out
			}
			for _, q := range []struct {
				name string
				in   *dynamodb.QueryInput
				want []string
			}{
				{"per entity", byKey(tables.Activities, "", "pk", projections.EntityPK("user:jdoe"), "", "", false),
					[]string{"ev0006", "ev0005", "ev0004", "ev0003", "ev0001"}},
				{"per group entity", byKey(tables.Activities, "", "pk", projections.EntityPK("group:admins"), "", "", false),
					[]string{"ev0005", "ev0002"}},
				{"per actor", byKey(tables.Activities, dynamo.IndexActor, "actor_pk", projections.ActorPK("alice"), "", "", false),
					[]string{"ev0006", "ev0005", "ev0004", "ev0003"}},
				{"per day", byKey(tables.Activities, dynamo.IndexDay, "day_pk", projections.DayPK(t0), "", "", false),
					[]string{"ev0002", "ev0001"}},
				{"per next day", byKey(tables.Activities, dynamo.IndexDay, "day_pk", projections.DayPK(t0.Add(24*time.Hour)), "", "", true),
					[]string{"ev0003", "ev0004", "ev0005", "ev0006"}},
			} {
				if got := ids(query(t, db, q.in)); !slices.Equal(got, q.want) {
					t.Errorf("%s: %v, want %v", q.name, got, q.want)
				}
			}

			items := query(t, db, byKey(tables.Activities, "", "pk", projections.EntityPK("user:jdoe"), "", "", false))
			a, err := projections.DecodeActivity(items[2])
			if err != nil {
				t.Fatal(err)
			}
			ch, err := a.ChangeSet()
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := ch["last_name"]; !ok || c.Old != "Doe" || c.New != "Roe" || len(ch) != 1 {
				t.Errorf("change set of the update: %+v, want last_name Doe → Roe only", ch)
			}
		})
	}
}
