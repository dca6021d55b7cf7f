package projections_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// projectionCase: given the write side's history, when its records arrive in order (each
// index of the log, possibly repeated or left out), then the read table holds exactly
// these items. Every case also checks that applying the records again changes nothing,
// that the same records in recorded order (and in shuffles random orders) give the same
// tables, as does one ApplyBatch of them all, that there is one activity item per event,
// and that no password is anywhere.
type projectionCase struct {
	name     string
	given    func(w *world)
	order    []int
	shuffles int
	then     []want
	// laggingIndex runs the projector over a DynamoDB whose UserGroupGSI shows nothing
	// yet, as an eventually consistent index on AWS may right after a write (DynamoDB
	// Local updates its indexes synchronously).
	laggingIndex bool
}

// laggingIndex is DynamoDB with an UserGroupGSI that has not caught up with anything.
type laggingIndex struct{ *dynamodb.Client }

func (l laggingIndex) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if aws.ToString(in.IndexName) == dynamo.IndexUserGroup {
		return &dynamodb.QueryOutput{}, nil
	}
	return l.Client.Query(ctx, in, opts...)
}

func runCases(t *testing.T, cases []projectionCase) {
	t.Helper()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := client(t)
			var pdb projections.DB = db
			if tc.laggingIndex {
				pdb = laggingIndex{db}
			}
			p := projections.New(pdb, projections.Options{Retention: retention})
			w := newWorld(t)
			tc.given(w)
			order := tc.order
			if order == nil {
				order = indexes(len(w.log))
			}
			applied := pick(w.log, order)

			tables := newTables(t, db)
			applyAll(t, p, tables, applied)
			got := takeSnapshot(t, db, tables)
			assertItems(t, got, tc.then)
			assertActivities(t, got, applied)
			assertPointers(t, got, applied)
			assertNoSecrets(t, got)

			applyAll(t, p, tables, applied)
			if d := got.diff(takeSnapshot(t, db, tables)); d != "" {
				t.Errorf("applying the records a second time changed the tables:\n%s", d)
			}

			inOrder := slices.Compact(slices.Sorted(slices.Values(order)))
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			orders := [][]int{}
			if !slices.Equal(inOrder, order) {
				orders = append(orders, inOrder)
			}
			for range tc.shuffles {
				perm := slices.Clone(inOrder)
				rng.Shuffle(len(perm), func(a, b int) { perm[a], perm[b] = perm[b], perm[a] })
				orders = append(orders, perm)
			}
			for _, o := range orders {
				reset(t, db, tables)
				applyAll(t, p, tables, pick(w.log, o))
				if d := got.diff(takeSnapshot(t, db, tables)); d != "" {
					t.Errorf("order %v gives other tables than order %v:\n%s", o, order, d)
				}
			}

			reset(t, db, tables)
			if err := p.ApplyBatch(context.Background(), tables, append(slices.Clone(applied), applied...)); err != nil {
				t.Fatal(err)
			}
			if d := got.diff(takeSnapshot(t, db, tables)); d != "" {
				t.Errorf("one ApplyBatch of the records, twice over, gives other tables:\n%s", d)
			}
		})
	}
}

func indexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestUserEvents(t *testing.T) {
	jdoe := func(w *world) { w.createUser("jdoe", "Jane.Doe@Example.com", "Jane", "Doe") }
	live := func(version int, extra map[string]any) want {
		attrs := map[string]any{"version": version, "is_deleted": false, "kind": "user"}
		for k, v := range extra {
			attrs[k] = v
		}
		return want{key: "user#jdoe/config", attrs: attrs}
	}
	runCases(t, []projectionCase{
		{
			name:  "user.created applied once gives a live user view with every GSI key",
			given: jdoe,
			then: []want{{key: "user#jdoe/config", exact: true, attrs: map[string]any{
				"id": "user#jdoe", "sk": "config", "kind": "user", "user_id": "jdoe-id1", "username": "jdoe",
				"email": "jane.doe@example.com", "first_name": "Jane", "last_name": "Doe", "is_active": true,
				"attributes": map[string]any{"dept": []any{"eng"}}, "version": 1,
				"created_at": at(1), "config_updated_at": at(1), "deleted_membership_rev": 0, "is_deleted": false,
				"updated_sort": at(1) + "#jdoe", "last_name_sort": "doe\x01jdoe", "first_name_sort": "jane\x01jdoe",
				"name_sort": "jdoe",
			}}},
		},
		{
			name: "user.created applied after a later user.updated leaves the newer state",
			given: func(w *world) {
				jdoe(w)
				w.updateUser("jdoe", func(u *events.User) { u.FirstName = "Janet" })
			},
			order: []int{1, 0},
			then: []want{live(2, map[string]any{
				"first_name": "Janet", "first_name_sort": "janet\x01jdoe", "created_at": at(1),
				"config_updated_at": at(2), "updated_sort": at(2) + "#jdoe",
			})},
		},
		{
			name: "user.updated gives the new email lower-cased, the names and their sort keys",
			given: func(w *world) {
				jdoe(w)
				w.updateUser("jdoe", func(u *events.User) { u.Email, u.LastName = "J.Doe@Corp.EXAMPLE", "Doe-Smith" })
			},
			then: []want{live(2, map[string]any{
				"email": "j.doe@corp.example", "last_name": "Doe-Smith", "last_name_sort": "doe-smith\x01jdoe",
				"first_name_sort": "jane\x01jdoe", "updated_sort": at(2) + "#jdoe",
			})},
		},
		{
			name: "user.updated that clears the last name removes last_name_sort",
			given: func(w *world) {
				jdoe(w)
				w.updateUser("jdoe", func(u *events.User) { u.LastName = "" })
			},
			then: []want{{
				key:    "user#jdoe/config",
				attrs:  map[string]any{"version": 2, "first_name_sort": "jane\x01jdoe"},
				absent: []string{"last_name", "last_name_sort"},
			}},
		},
		{
			name: "user.updated v3 applied before user.created v1 and user.updated v2 keeps v3",
			given: func(w *world) {
				jdoe(w)
				w.updateUser("jdoe", func(u *events.User) { u.FirstName = "A" })
				w.updateUser("jdoe", func(u *events.User) { u.FirstName = "B" })
			},
			order:    []int{2, 0, 1},
			shuffles: 4,
			then:     []want{live(3, map[string]any{"first_name": "B", "first_name_sort": "b\x01jdoe"})},
		},
		{
			name: "user.password_changed bumps the version and leaves no password anywhere",
			given: func(w *world) {
				jdoe(w)
				w.changePassword("jdoe")
			},
			then: []want{live(2, map[string]any{"config_updated_at": at(2), "email": "jane.doe@example.com"})},
		},
		{
			name: "user.password_changed applied before user.created keeps the newer version",
			given: func(w *world) {
				jdoe(w)
				w.changePassword("jdoe")
			},
			order: []int{1, 0},
			then:  []want{live(2, map[string]any{"config_updated_at": at(2)})},
		},
		{
			name: "user.deactivated makes the user inactive",
			given: func(w *world) {
				jdoe(w)
				w.setActive("jdoe", false)
			},
			then: []want{live(2, map[string]any{"is_active": false})},
		},
		{
			name: "user.deactivated applied before user.created keeps the user inactive",
			given: func(w *world) {
				jdoe(w)
				w.setActive("jdoe", false)
			},
			order: []int{1, 0},
			then:  []want{live(2, map[string]any{"is_active": false})},
		},
		{
			name: "user.activated after user.deactivated makes the user active again",
			given: func(w *world) {
				jdoe(w)
				w.setActive("jdoe", false)
				w.setActive("jdoe", true)
			},
			then: []want{live(3, map[string]any{"is_active": true})},
		},
		{
			name: "user.activated applied before user.deactivated and user.created keeps the user active",
			given: func(w *world) {
				jdoe(w)
				w.setActive("jdoe", false)
				w.setActive("jdoe", true)
			},
			order:    []int{2, 1, 0},
			shuffles: 5,
			then:     []want{live(3, map[string]any{"is_active": true})},
		},
		{
			name: "user.deleted leaves a tombstone without GSI keys and tombstones the user's memberships",
			given: func(w *world) {
				jdoe(w)
				w.createGroup("Admins", "")
				w.createGroup("Ops", "")
				w.addMember("admins", "jdoe")
				w.addMember("ops", "jdoe")
				w.deleteUser("jdoe")
			},
			then: []want{
				{key: "user#jdoe/config", exact: true, attrs: map[string]any{
					"id": "user#jdoe", "sk": "config", "username": "jdoe", "version": 2, "config_updated_at": at(6),
					"deleted_membership_rev": 3, "is_deleted": true, "is_active": false,
				}},
				{key: "group#admins/config", attrs: map[string]any{"version": 2, "is_deleted": false}},
				{key: "group#ops/config", attrs: map[string]any{"version": 2, "is_deleted": false}},
				{key: "group#admins/member#jdoe", exact: true, attrs: map[string]any{
					"id": "group#admins", "sk": "member#jdoe", "username": "jdoe", "group_key": "admins",
					"group_name": "Admins", "version": 2, "membership_rev": 1, "added_at": at(4), "is_deleted": true,
				}},
				{
					key:    "group#ops/member#jdoe",
					attrs:  map[string]any{"version": 2, "membership_rev": 2, "is_deleted": true},
					absent: []string{"member_id", "member_of"},
				},
			},
		},
		{
			name: "user.deleted applied before user.created leaves the tombstone",
			given: func(w *world) {
				jdoe(w)
				w.deleteUser("jdoe")
			},
			order: []int{1, 0},
			then: []want{{
				key: "user#jdoe/config", attrs: map[string]any{"version": 2, "is_deleted": true},
				absent: []string{"kind", "email", "updated_sort", "last_name_sort", "first_name_sort", "name_sort"},
			}},
		},
		{
			name: "group.member_added applied after user.deleted with a lower revision leaves no live membership",
			given: func(w *world) {
				jdoe(w)
				w.createGroup("Admins", "")
				w.addMember("admins", "jdoe")
				w.deleteUser("jdoe")
			},
			order:    []int{0, 1, 3, 2},
			shuffles: 6,
			then: []want{
				{key: "user#jdoe/config", attrs: map[string]any{"version": 2, "is_deleted": true, "deleted_membership_rev": 2}},
				{key: "group#admins/config", attrs: map[string]any{"version": 2, "is_deleted": false}},
				{
					key:    "group#admins/member#jdoe",
					attrs:  map[string]any{"version": 2, "membership_rev": 1, "is_deleted": true, "added_at": at(3)},
					absent: []string{"member_id", "member_of"},
				},
			},
		},
		{
			name: "user.deleted finds through UserGroupGSI a membership whose removal is still to come",
			given: func(w *world) {
				jdoe(w)
				w.createGroup("Admins", "")
				w.addMember("admins", "jdoe")
				w.removeMember("admins", "jdoe")
				w.deleteUser("jdoe") // lists no groups: the write side had removed it already
			},
			order:    []int{0, 1, 2, 4},
			shuffles: 6,
			then: []want{
				{key: "user#jdoe/config", attrs: map[string]any{"version": 2, "is_deleted": true}},
				{key: "group#admins/config", attrs: map[string]any{"version": 2}},
				{
					key:    "group#admins/member#jdoe",
					attrs:  map[string]any{"version": 2, "membership_rev": 1, "is_deleted": true},
					absent: []string{"member_id", "member_of"},
				},
			},
		},
		{
			name: "a user re-created after user.deleted shows the latest incarnation, in any order",
			given: func(w *world) {
				jdoe(w)
				w.createGroup("Admins", "")
				w.addMember("admins", "jdoe")
				w.deleteUser("jdoe")
				w.createUser("jdoe", "jane@new.example", "Jane", "Roe")
				w.addMember("admins", "jdoe")
			},
			shuffles: 8,
			then: []want{
				live(3, map[string]any{
					"user_id": "jdoe-id2", "email": "jane@new.example", "last_name_sort": "roe\x01jdoe",
					"deleted_membership_rev": 2, "created_at": at(5),
				}),
				{key: "group#admins/config", attrs: map[string]any{"version": 3}},
				{key: "group#admins/member#jdoe", attrs: map[string]any{
					"version": 3, "membership_rev": 3, "member_id": "jdoe", "member_of": "admins", "is_deleted": false,
				}},
			},
		},
	})
}

func TestGroupEvents(t *testing.T) {
	admins := func(w *world) { w.createGroup("Admins", "the admins") }
	user := func(name string) want {
		return want{key: "user#" + name + "/config", attrs: map[string]any{"is_deleted": false}}
	}
	runCases(t, []projectionCase{
		{
			name:  "group.created applied once gives a live group view with every GSI key",
			given: admins,
			then: []want{{key: "group#admins/config", exact: true, attrs: map[string]any{
				"id": "group#admins", "sk": "config", "kind": "group", "group_id": "admins-id1", "key": "admins",
				"name": "Admins", "description": "the admins", "version": 1, "created_at": at(1),
				"config_updated_at": at(1), "last_deleted_version": 0, "is_deleted": false,
				"updated_sort": at(1) + "#admins", "name_sort": "admins",
			}}},
		},
		{
			name: "group.created applied after group.updated keeps the update",
			given: func(w *world) {
				admins(w)
				w.updateGroup("admins", "gold")
			},
			order: []int{1, 0},
			then: []want{{key: "group#admins/config", attrs: map[string]any{
				"version": 2, "description": "gold", "created_at": at(1), "config_updated_at": at(2),
			}}},
		},
		{
			name: "group.updated changes the description and attributes",
			given: func(w *world) {
				admins(w)
				w.updateGroup("admins", "gold")
			},
			then: []want{{key: "group#admins/config", attrs: map[string]any{
				"version": 2, "description": "gold", "attributes": map[string]any{"tier": []any{"gold"}},
				"updated_sort": at(2) + "#admins", "name_sort": "admins",
			}}},
		},
		{
			name: "group.updated v3 applied before group.created v1 and group.updated v2 keeps v3",
			given: func(w *world) {
				admins(w)
				w.updateGroup("admins", "silver")
				w.updateGroup("admins", "gold")
			},
			order:    []int{2, 0, 1},
			shuffles: 4,
			then:     []want{{key: "group#admins/config", attrs: map[string]any{"version": 3, "description": "gold"}}},
		},
		{
			name: "group.deleted leaves a tombstone and tombstones every membership, keeping their versions",
			given: func(w *world) {
				admins(w)
				w.createUser("a", "a@example.com", "", "")
				w.createUser("b", "b@example.com", "", "")
				w.addMember("admins", "a")
				w.addMember("admins", "b")
				w.deleteGroup("admins")
			},
			then: []want{
				{key: "group#admins/config", exact: true, attrs: map[string]any{
					"id": "group#admins", "sk": "config", "key": "admins", "name": "Admins", "version": 4,
					"config_updated_at": at(6), "last_deleted_version": 4, "is_deleted": true,
				}},
				{key: "group#admins/member#a", attrs: map[string]any{"version": 2, "is_deleted": true}, absent: []string{"member_id", "member_of"}},
				{key: "group#admins/member#b", attrs: map[string]any{"version": 3, "is_deleted": true}, absent: []string{"member_id", "member_of"}},
				user("a"), user("b"),
			},
		},
		{
			name: "group.member_added applied after group.deleted leaves no live membership",
			given: func(w *world) {
				admins(w)
				w.createUser("a", "a@example.com", "", "")
				w.addMember("admins", "a")
				w.deleteGroup("admins")
			},
			order:    []int{0, 1, 3, 2},
			shuffles: 6,
			then: []want{
				{key: "group#admins/config", attrs: map[string]any{"version": 3, "is_deleted": true, "last_deleted_version": 3}},
				{key: "group#admins/member#a", attrs: map[string]any{"version": 2, "is_deleted": true, "membership_rev": 1}, absent: []string{"member_id", "member_of"}},
				user("a"),
			},
		},
		{
			name: "a group re-created after group.deleted shows only the new incarnation and its members, in any order",
			given: func(w *world) {
				admins(w)
				w.createUser("a", "a@example.com", "", "")
				w.createUser("b", "b@example.com", "", "")
				w.addMember("admins", "a")
				w.deleteGroup("admins")
				w.createGroup("ADMINS", "")
				w.addMember("admins", "b")
			},
			shuffles: 8,
			then: []want{
				{key: "group#admins/config", attrs: map[string]any{
					"version": 5, "name": "ADMINS", "group_id": "admins-id2", "last_deleted_version": 3, "is_deleted": false,
				}},
				{key: "group#admins/member#a", attrs: map[string]any{"version": 2, "is_deleted": true}, absent: []string{"member_id", "member_of"}},
				{key: "group#admins/member#b", attrs: map[string]any{
					"version": 5, "member_id": "b", "member_of": "admins", "group_name": "ADMINS", "is_deleted": false,
				}},
				user("a"), user("b"),
			},
		},
		{
			name: "group.member_added gives a live membership and bumps the group version",
			given: func(w *world) {
				admins(w)
				w.createUser("jdoe", "jdoe@example.com", "Jane", "Doe")
				w.addMember("admins", "jdoe")
			},
			then: []want{
				{key: "group#admins/config", attrs: map[string]any{"version": 2, "config_updated_at": at(3), "is_deleted": false}},
				{key: "group#admins/member#jdoe", exact: true, attrs: map[string]any{
					"id": "group#admins", "sk": "member#jdoe", "member_id": "jdoe", "member_of": "admins",
					"username": "jdoe", "group_key": "admins", "group_name": "Admins", "version": 2,
					"membership_rev": 1, "added_at": at(3), "is_deleted": false,
				}},
				user("jdoe"),
			},
		},
		{
			name: "group.member_added applied after group.member_removed leaves the membership removed",
			given: func(w *world) {
				admins(w)
				w.createUser("jdoe", "jdoe@example.com", "", "")
				w.addMember("admins", "jdoe")
				w.removeMember("admins", "jdoe")
			},
			order: []int{0, 1, 3, 2},
			then: []want{
				{key: "group#admins/config", attrs: map[string]any{"version": 3}},
				{key: "group#admins/member#jdoe", attrs: map[string]any{"version": 3, "is_deleted": true, "membership_rev": 0},
					absent: []string{"member_id", "member_of", "added_at"}},
				user("jdoe"),
			},
		},
		{
			name: "a member added again after group.member_removed is live, in any order",
			given: func(w *world) {
				admins(w)
				w.createUser("jdoe", "jdoe@example.com", "", "")
				w.addMember("admins", "jdoe")
				w.removeMember("admins", "jdoe")
				w.addMember("admins", "jdoe")
			},
			shuffles: 6,
			then: []want{
				{key: "group#admins/config", attrs: map[string]any{"version": 4}},
				{key: "group#admins/member#jdoe", attrs: map[string]any{
					"version": 4, "membership_rev": 2, "member_id": "jdoe", "member_of": "admins", "is_deleted": false, "added_at": at(5),
				}},
				user("jdoe"),
			},
		},
		{
			name: "group.member_removed leaves a membership tombstone with the group's version",
			given: func(w *world) {
				admins(w)
				w.createUser("jdoe", "jdoe@example.com", "", "")
				w.addMember("admins", "jdoe")
				w.removeMember("admins", "jdoe")
			},
			then: []want{
				{key: "group#admins/config", attrs: map[string]any{"version": 3, "config_updated_at": at(4)}},
				{key: "group#admins/member#jdoe", exact: true, attrs: map[string]any{
					"id": "group#admins", "sk": "member#jdoe", "username": "jdoe", "group_key": "admins",
					"group_name": "Admins", "version": 3, "membership_rev": 0, "is_deleted": true,
				}},
				user("jdoe"),
			},
		},
		{
			name: "group.member_removed whose group.member_added never arrived still leaves a tombstone",
			given: func(w *world) {
				admins(w)
				w.createUser("jdoe", "jdoe@example.com", "", "")
				w.addMember("admins", "jdoe")
				w.removeMember("admins", "jdoe")
			},
			order: []int{3, 1},
			then: []want{
				{key: "group#admins/config", attrs: map[string]any{"version": 3}},
				{key: "group#admins/member#jdoe", attrs: map[string]any{"version": 3, "is_deleted": true}, absent: []string{"member_id"}},
				user("jdoe"),
			},
		},
	})
}

func TestMembersChangedEvents(t *testing.T) {
	setup := func(w *world) {
		w.createGroup("Admins", "")
		for _, u := range []string{"ann", "bob", "cid"} {
			w.createUser(u, u+"@example.com", "", "")
		}
		w.addMember("admins", "bob")
	}
	membership := func(user string, attrs map[string]any, absent ...string) want {
		return want{key: "group#admins/member#" + user, attrs: attrs, absent: absent}
	}
	users := []want{{key: "user#ann/config"}, {key: "user#bob/config"}, {key: "user#cid/config"}}
	runCases(t, []projectionCase{
		{
			name: "group.members_changed gives live memberships of the added and tombstones of the removed, at its one version",
			given: func(w *world) {
				setup(w)
				w.changeMembers("admins", []string{"ann", "cid"}, []string{"bob"})
			},
			shuffles: 4,
			then: append([]want{
				{key: "group#admins/config", attrs: map[string]any{"version": 3, "config_updated_at": at(6), "is_deleted": false}},
				{key: "group#admins/member#ann", exact: true, attrs: map[string]any{
					"id": "group#admins", "sk": "member#ann", "member_id": "ann", "member_of": "admins",
					"username": "ann", "group_key": "admins", "group_name": "Admins", "version": 3,
					"membership_rev": 1, "added_at": at(6), "is_deleted": false,
				}},
				membership("cid", map[string]any{"version": 3, "member_id": "cid", "is_deleted": false}),
				membership("bob", map[string]any{"version": 3, "is_deleted": true}, "member_id", "member_of"),
			}, users...),
		},
		{
			name: "user.deleted that does not list a group a members change added tombstones that membership, also before the index shows it",
			given: func(w *world) {
				setup(w)
				w.changeMembers("admins", []string{"ann"}, nil)
				w.deleteUser("ann") // lists no groups: the change's items were not written yet
			},
			laggingIndex: true,
			shuffles:     6,
			then: []want{
				{key: "group#admins/config", attrs: map[string]any{"version": 3}},
				membership("ann", map[string]any{"version": 3, "membership_rev": 1, "is_deleted": true}, "member_id", "member_of"),
				membership("bob", map[string]any{"version": 2, "is_deleted": false, "member_id": "bob"}),
				{key: "user#ann/config", attrs: map[string]any{"is_deleted": true, "deleted_membership_rev": 1}},
				{key: "user#bob/config"}, {key: "user#cid/config"},
			},
		},
		{
			name: "a members change of a user re-created after a delete is live, whatever arrives first",
			given: func(w *world) {
				setup(w)
				w.changeMembers("admins", []string{"ann"}, nil)
				w.deleteUser("ann")
				w.createUser("ann", "ann@example.com", "", "")
				w.changeMembers("admins", []string{"ann"}, []string{"bob"})
			},
			laggingIndex: true,
			shuffles:     8,
			then: append([]want{
				{key: "group#admins/config", attrs: map[string]any{"version": 4}},
				membership("ann", map[string]any{"version": 4, "membership_rev": 2, "is_deleted": false, "member_id": "ann"}),
				membership("bob", map[string]any{"version": 4, "is_deleted": true}, "member_id"),
			}, users...),
		},
	})
}

// TestEveryEventTypeHasAReducer guards against an event type added to internal/events
// without a projection: the stream would dead-letter every such record.
func TestEveryEventTypeHasAReducer(t *testing.T) {
	reducers := projections.NewReducers(0)
	for _, typ := range events.NewRegistry().Types() {
		if reducers[typ] == nil {
			t.Errorf("no reducer for %s", typ)
		}
	}
	if got, want := len(reducers), len(events.NewRegistry().Types()); got != want {
		t.Errorf("%d reducers for %d event types", got, want)
	}
}
