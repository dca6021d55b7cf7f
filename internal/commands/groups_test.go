package commands_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

func TestGroupCommands(t *testing.T) {
	admins := createGroup("Admins")
	runCases(t, []commandCase{
		{
			name: "a new group is created at version 1, keyed by its lower-cased name",
			when: step{cmd: commands.CreateGroup{Name: "Team Alpha", Description: "The first\nteam", Attributes: map[string][]string{"k": {"v"}}}},
			then: []event{{events.GroupCreatedType, "team alpha", 1, map[string]any{
				"name": "Team Alpha", "key": "team alpha", "description": "The first\nteam",
				"changes": []string{"attributes", "description", "name"},
			}}},
			version: 1,
		},
		{
			name:  "a group name is unique case-insensitively",
			given: []any{admins},
			when:  step{cmd: createGroup("ADMINS")},
			err:   apperr.CodeGroupExists,
		},
		{
			name:   "an invalid group name and description are refused by field",
			when:   step{cmd: commands.CreateGroup{Name: "no/slashes", Description: strings.Repeat("d", 1025)}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"description", "name"},
		},
		{
			name:   "a group name with surrounding spaces is refused",
			when:   step{cmd: createGroup(" admins")},
			err:    apperr.CodeValidationFailed,
			fields: []string{"name"},
		},
		{
			name:    "updating a group's description records group.updated, finding the group in any case",
			given:   []any{admins},
			when:    step{cmd: commands.UpdateGroup{Name: "aDmInS", Description: ptr("the admins")}},
			then:    []event{{events.GroupUpdatedType, "admins", 2, map[string]any{"description": "the admins", "name": "Admins", "changes": []string{"description"}}}},
			version: 2,
		},
		{
			name:    "a group update that changes nothing records nothing",
			given:   []any{commands.CreateGroup{Name: "Admins", Description: "d"}},
			when:    step{cmd: commands.UpdateGroup{Name: "admins", Description: ptr("d"), Attributes: &map[string][]string{}}},
			version: 1,
		},
		{
			name:  "a group update with a stale If-Match is refused",
			given: []any{admins, commands.UpdateGroup{Name: "admins", Description: ptr("x")}},
			when:  ifMatch(1, commands.UpdateGroup{Name: "admins", Description: ptr("y")}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name: "updating an unknown group is not found",
			when: step{cmd: commands.UpdateGroup{Name: "nobody", Description: ptr("x")}},
			err:  apperr.CodeNotFound,
		},
		{
			name:  "deleting a group records group.deleted and removes its memberships",
			given: []any{admins, createUser("jdoe", ""), createUser("john", ""), addMember("admins", "jdoe"), addMember("admins", "john")},
			when:  step{cmd: commands.DeleteGroup{Name: "ADMINS"}},
			then:  []event{{events.GroupDeletedType, "admins", 4, map[string]any{"deleted": true, "changes": []string{"name"}}}},
			also: func(t *testing.T, w *world, _ any) {
				groupHasNoMembers(t, w, "admins")
				if _, groups, err := w.real.UserMemberships(t.Context(), w.tenant, "jdoe"); err != nil || len(groups) != 0 {
					t.Errorf("jdoe still lists groups %v (%v)", groups, err)
				}
			},
		},
		{
			name:  "deleting a group with more members than one transaction holds removes every membership",
			given: append([]any{createGroup("big")}, usersInGroup(50, "big")...),
			when:  step{cmd: commands.DeleteGroup{Name: "big"}},
			then:  []event{{events.GroupDeletedType, "big", 52, map[string]any{"deleted": true}}},
			also: func(t *testing.T, w *world, _ any) {
				groupHasNoMembers(t, w, "big")
				g, err := w.real.LoadGroup(t.Context(), w.tenant, "big")
				if err != nil || g.CleanupPending {
					t.Errorf("tombstone still marked for clean-up (%v)", err)
				}
			},
		},
		{
			name:  "a deleted group can be created again: versions continue and the id is new",
			given: []any{admins, commands.DeleteGroup{Name: "admins"}},
			when:  step{cmd: createGroup("admins")},
			then:  []event{{events.GroupCreatedType, "admins", 3, map[string]any{"name": "admins", "deleted": false}}},
			also: func(t *testing.T, w *world, _ any) {
				first := w.record(events.KindGroup, "admins", 1).Payload.(*events.GroupCreated).Group.ID
				again := w.record(events.KindGroup, "admins", 3).Payload.(*events.GroupCreated).Group.ID
				if first == "" || first == again {
					t.Errorf("ids %q and %q, want two different ids", first, again)
				}
			},
		},
		{
			name:  "a deleted group is not found",
			given: []any{admins, commands.DeleteGroup{Name: "admins"}},
			when:  step{cmd: commands.DeleteGroup{Name: "admins"}},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "a group delete with a stale If-Match is refused",
			given: []any{admins, commands.UpdateGroup{Name: "admins", Description: ptr("x")}},
			when:  ifMatch(1, commands.DeleteGroup{Name: "admins"}),
			err:   apperr.CodeVersionMismatch,
		},
	})
}

func TestMemberCommands(t *testing.T) {
	admins, jdoe := createGroup("Admins"), createUser("jdoe", "jdoe@example.com")
	runCases(t, []commandCase{
		{
			name:    "adding a user records group.member_added on the group",
			given:   []any{admins, jdoe},
			when:    step{cmd: addMember("ADMINS", "JDoe")},
			then:    []event{{events.GroupMemberAddedType, "admins", 2, map[string]any{"member": "jdoe", "name": "Admins", "changes": []string{"member"}}}},
			version: 2,
			also: func(t *testing.T, w *world, _ any) {
				if ok, err := w.real.IsMember(t.Context(), w.tenant, "admins", "jdoe"); err != nil || !ok {
					t.Errorf("jdoe is not a member (%v)", err)
				}
				if rev, groups, err := w.real.UserMemberships(t.Context(), w.tenant, "jdoe"); err != nil || rev != 1 || !slices.Equal(groups, []string{"admins"}) {
					t.Errorf("jdoe's memberships: rev %d, groups %v (%v)", rev, groups, err)
				}
			},
		},
		{
			name:    "adding a member again records nothing and answers the group's version",
			given:   []any{admins, jdoe, addMember("admins", "jdoe")},
			when:    step{cmd: addMember("admins", "jdoe")},
			version: 2,
		},
		{
			name:    "removing a member records group.member_removed",
			given:   []any{admins, jdoe, addMember("admins", "jdoe")},
			when:    step{cmd: commands.RemoveMember{Group: "admins", Username: "jdoe"}},
			then:    []event{{events.GroupMemberRemovedType, "admins", 3, map[string]any{"member": "jdoe"}}},
			version: 3,
			also:    func(t *testing.T, w *world, _ any) { noMemberships(t, w, "jdoe") },
		},
		{
			name:    "removing a user who is not a member records nothing",
			given:   []any{admins, jdoe},
			when:    step{cmd: commands.RemoveMember{Group: "admins", Username: "jdoe"}},
			version: 1,
		},
		{
			name:  "adding an unknown user is not found",
			given: []any{admins},
			when:  step{cmd: addMember("admins", "nobody")},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "adding to an unknown group is not found",
			given: []any{jdoe},
			when:  step{cmd: addMember("nobody", "jdoe")},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "adding a deleted user is not found",
			given: []any{admins, jdoe, commands.DeleteUser{Username: "jdoe"}},
			when:  step{cmd: addMember("admins", "jdoe")},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "removing an unknown user is not found",
			given: []any{admins},
			when:  step{cmd: commands.RemoveMember{Group: "admins", Username: "nobody"}},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "removing from an unknown group is not found",
			given: []any{jdoe},
			when:  step{cmd: commands.RemoveMember{Group: "nobody", Username: "jdoe"}},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "adding a member with a stale If-Match of the group is refused",
			given: []any{admins, jdoe, commands.UpdateGroup{Name: "admins", Description: ptr("x")}},
			when:  ifMatch(1, addMember("admins", "jdoe")),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name:  "adding a member with the group's current If-Match is accepted",
			given: []any{admins, jdoe},
			when:  ifMatch(1, addMember("admins", "jdoe")),
			then:  []event{{events.GroupMemberAddedType, "admins", 2, nil}},
		},
		{
			name:  "removing a member with a stale If-Match of the group is refused",
			given: []any{admins, jdoe, addMember("admins", "jdoe")},
			when:  ifMatch(1, commands.RemoveMember{Group: "admins", Username: "jdoe"}),
			err:   apperr.CodeVersionMismatch,
		},
	})
}
