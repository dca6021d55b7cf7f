package commands_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

func TestUserCommands(t *testing.T) {
	runCases(t, []commandCase{
		{
			name: "a new username and email create version 1 of the user",
			when: step{cmd: createUser("jdoe", "jdoe@example.com")},
			then: []event{{events.UserCreatedType, "jdoe", 1, map[string]any{
				"username": "jdoe", "email": "jdoe@example.com", "is_active": true, "deleted": false,
				"has_password": false, "actor": actor, "changes": []string{"email", "first_name", "is_active", "last_name"},
			}}},
			version: 1,
			also: func(t *testing.T, w *world, _ any) {
				if !emailGuard(t, w, "jdoe@example.com") {
					t.Error("the email's guard item was not written")
				}
			},
		},
		{
			name: "a username and email in upper case are stored lower-cased",
			when: step{cmd: createUser("JDoe", "JDoe@Example.COM")},
			then: []event{{events.UserCreatedType, "jdoe", 1, map[string]any{"username": "jdoe", "email": "jdoe@example.com"}}},
		},
		{
			name: "a user created inactive is recorded inactive",
			when: step{cmd: commands.CreateUser{Username: "jdoe", IsActive: ptr(false)}},
			then: []event{{events.UserCreatedType, "jdoe", 1, map[string]any{"is_active": false, "email": ""}}},
		},
		{
			name:  "a taken username is refused",
			given: []any{createUser("jdoe", "jdoe@example.com")},
			when:  step{cmd: createUser("JDOE", "other@example.com")},
			err:   apperr.CodeUsernameTaken,
		},
		{
			name:  "a taken email is refused, whatever its case",
			given: []any{createUser("jdoe", "jdoe@example.com")},
			when:  step{cmd: createUser("john", "JDoe@EXAMPLE.com")},
			err:   apperr.CodeEmailTaken,
		},
		{
			name:  "a user created again after a delete continues its versions and gets a new id",
			given: []any{createUser("jdoe", "jdoe@example.com"), commands.DeleteUser{Username: "jdoe"}},
			when:  step{cmd: createUser("jdoe", "jdoe@example.com")},
			then:  []event{{events.UserCreatedType, "jdoe", 3, map[string]any{"email": "jdoe@example.com", "deleted": false}}},
			also: func(t *testing.T, w *world, _ any) {
				first := w.record(events.KindUser, "jdoe", 1).Payload.(*events.UserCreated).User.ID
				again := w.record(events.KindUser, "jdoe", 3).Payload.(*events.UserCreated).User.ID
				deleted := w.record(events.KindUser, "jdoe", 2).Payload.(*events.UserDeleted)
				if first == "" || again == "" || first == again || deleted.PreviousID != first {
					t.Errorf("ids: first %q, deleted %q, again %q; want two different ids", first, deleted.PreviousID, again)
				}
			},
		},
		{
			name: "every invalid field is reported by name",
			when: step{cmd: commands.CreateUser{
				Username: "not valid!", Email: "not-an-email", FirstName: strings.Repeat("x", 256),
				LastName: "bell\a", Attributes: map[string][]string{"": {"x"}}, Password: ptr("short"),
			}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"attributes", "email", "first_name", "last_name", "password", "username"},
		},
		{
			name:   "an empty username is refused",
			when:   step{cmd: commands.CreateUser{Username: ""}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"username"},
		},
		{
			name: "too many attributes are refused",
			when: step{cmd: commands.CreateUser{Username: "jdoe", Attributes: func() map[string][]string {
				m := map[string][]string{}
				for i := range 51 {
					m[fmt.Sprint("k", i)] = []string{"v"}
				}
				return m
			}()}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"attributes"},
		},
		{
			name: "a password given at creation is recorded only as ciphertext",
			when: step{cmd: commands.CreateUser{Username: "jdoe", Password: ptr("correct horse battery")}},
			then: []event{{events.UserCreatedType, "jdoe", 1, map[string]any{"has_password": true}}},
			also: func(t *testing.T, w *world, _ any) {
				ct := w.record(events.KindUser, "jdoe", 1).Payload.(*events.UserCreated).PasswordCiphertext
				checkPassword(t, w, "jdoe", ct, "correct horse battery")
			},
		},
	})
}

// checkPassword asserts that ct is the password's ciphertext and that the plaintext is in
// no item of the tenant.
func checkPassword(t *testing.T, w *world, username, ct, plaintext string) {
	t.Helper()
	if ct == "" || strings.Contains(ct, plaintext) {
		t.Fatalf("password ciphertext %q", ct)
	}
	pt, err := w.box.Decrypt(t.Context(), ct, "password:"+w.tenant.System+"/"+w.tenant.ID+"/"+username)
	if err != nil || string(pt) != plaintext {
		t.Errorf("ciphertext decrypts to %q, %v", pt, err)
	}
	user, err := w.real.LoadUser(t.Context(), w.tenant, username)
	if err != nil || user.PasswordCiphertext != ct {
		t.Errorf("config holds password %q (%v), want the record's ciphertext", user.PasswordCiphertext, err)
	}
	for _, it := range w.items() {
		if k, ok := dynamotest.FindPlaintext(it, plaintext); ok {
			t.Errorf("item %s holds the password in clear in %s", itemKey(it), k)
		}
	}
}

func TestUpdateUser(t *testing.T) {
	jdoe := createUser("jdoe", "jdoe@example.com")
	runCases(t, []commandCase{
		{
			name:  "changing the email records user.updated with the change",
			given: []any{jdoe},
			when:  step{cmd: commands.UpdateUser{Username: "jdoe", Email: ptr("New@Example.com")}},
			then: []event{{events.UserUpdatedType, "jdoe", 2, map[string]any{
				"email": "new@example.com", "changes": []string{"email"}, "first_name": "First",
			}}},
			version: 2,
			also: func(t *testing.T, w *world, _ any) {
				if emailGuard(t, w, "jdoe@example.com") || !emailGuard(t, w, "new@example.com") {
					t.Error("the old email's guard is kept or the new one's is missing")
				}
			},
		},
		{
			name:  "an email given up by an update can be taken by another user",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", Email: ptr("new@example.com")}},
			when:  step{cmd: createUser("john", "jdoe@example.com")},
			then:  []event{{events.UserCreatedType, "john", 1, map[string]any{"email": "jdoe@example.com"}}},
		},
		{
			name:  "an email taken by an update cannot be used by another user",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", Email: ptr("new@example.com")}},
			when:  step{cmd: createUser("john", "NEW@example.com")},
			err:   apperr.CodeEmailTaken,
		},
		{
			name:  "changing the email to another user's is refused",
			given: []any{jdoe, createUser("john", "john@example.com")},
			when:  step{cmd: commands.UpdateUser{Username: "john", Email: ptr("JDOE@example.com")}},
			err:   apperr.CodeEmailTaken,
			also: func(t *testing.T, w *world, _ any) {
				if !emailGuard(t, w, "john@example.com") {
					t.Error("the refused update released john's email")
				}
			},
		},
		{
			name:  "clearing the email frees it",
			given: []any{jdoe},
			when:  step{cmd: commands.UpdateUser{Username: "jdoe", Email: ptr("")}},
			then:  []event{{events.UserUpdatedType, "jdoe", 2, map[string]any{"email": "", "changes": []string{"email"}}}},
			also: func(t *testing.T, w *world, _ any) {
				if emailGuard(t, w, "jdoe@example.com") {
					t.Error("the cleared email's guard is kept")
				}
			},
		},
		{
			name:    "an update that changes nothing records nothing and answers the current version",
			given:   []any{jdoe},
			when:    step{cmd: commands.UpdateUser{Username: "jdoe", Email: ptr("JDOE@example.com"), FirstName: ptr("First")}},
			version: 1,
		},
		{
			name:  "attributes replace the whole map",
			given: []any{commands.CreateUser{Username: "jdoe", Attributes: map[string][]string{"a": {"1"}, "b": {"2"}}}},
			when:  step{cmd: commands.UpdateUser{Username: "jdoe", Attributes: &map[string][]string{"c": {"3"}}}},
			then: []event{{events.UserUpdatedType, "jdoe", 2, map[string]any{
				"attributes": map[string][]string{"c": {"3"}}, "changes": []string{"attributes"},
			}}},
		},
		{
			name:  "an update with the current If-Match is accepted",
			given: []any{jdoe},
			when:  ifMatch(1, commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}),
			then:  []event{{events.UserUpdatedType, "jdoe", 2, map[string]any{"last_name": "Doe"}}},
		},
		{
			name:  "an update with a stale If-Match is refused",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}},
			when:  ifMatch(1, commands.UpdateUser{Username: "jdoe", LastName: ptr("Roe")}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name:   "an invalid email is refused by field",
			given:  []any{jdoe},
			when:   step{cmd: commands.UpdateUser{Username: "jdoe", Email: ptr("jdoe@"), LastName: ptr("x\x00")}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"email", "last_name"},
		},
		{
			name: "an unknown user is not found",
			when: step{cmd: commands.UpdateUser{Username: "nobody", LastName: ptr("Doe")}},
			err:  apperr.CodeNotFound,
		},
		{
			name:  "a deleted user is not found",
			given: []any{jdoe, commands.DeleteUser{Username: "jdoe"}},
			when:  step{cmd: commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}},
			err:   apperr.CodeNotFound,
		},
	})
}

func TestChangePassword(t *testing.T) {
	jdoe := createUser("jdoe", "jdoe@example.com")
	runCases(t, []commandCase{
		{
			name:    "a password change is a new version whose payload holds ciphertext, not the password",
			given:   []any{jdoe},
			when:    step{cmd: commands.ChangePassword{Username: "jdoe", Password: "plaintext-Pa55word"}},
			then:    []event{{events.UserPasswordChangedType, "jdoe", 2, map[string]any{"changes": []string{}, "email": "jdoe@example.com"}}},
			version: 2,
			also: func(t *testing.T, w *world, _ any) {
				e := w.record(events.KindUser, "jdoe", 2)
				checkPassword(t, w, "jdoe", e.Payload.(*events.UserPasswordChanged).PasswordCiphertext, "plaintext-Pa55word")
			},
		},
		{
			name:  "setting the same password again is still a new version",
			given: []any{jdoe, commands.ChangePassword{Username: "jdoe", Password: "plaintext-Pa55word"}},
			when:  step{cmd: commands.ChangePassword{Username: "jdoe", Password: "plaintext-Pa55word"}},
			then:  []event{{events.UserPasswordChangedType, "jdoe", 3, nil}},
		},
		{
			name:   "a password shorter than 8 characters is refused",
			given:  []any{jdoe},
			when:   step{cmd: commands.ChangePassword{Username: "jdoe", Password: "1234567"}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"password"},
		},
		{
			name:   "a password longer than 128 characters is refused",
			given:  []any{jdoe},
			when:   step{cmd: commands.ChangePassword{Username: "jdoe", Password: strings.Repeat("p", 129)}},
			err:    apperr.CodeValidationFailed,
			fields: []string{"password"},
		},
		{
			name:  "a password change with a stale If-Match is refused",
			given: []any{jdoe, commands.ChangePassword{Username: "jdoe", Password: "first-password"}},
			when:  ifMatch(1, commands.ChangePassword{Username: "jdoe", Password: "second-password"}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name: "the password of an unknown user is not found",
			when: step{cmd: commands.ChangePassword{Username: "nobody", Password: "plaintext-Pa55word"}},
			err:  apperr.CodeNotFound,
		},
	})
}

func TestSetUserActive(t *testing.T) {
	jdoe := createUser("jdoe", "jdoe@example.com")
	deactivate := commands.SetUserActive{Username: "jdoe", Active: false}
	activate := commands.SetUserActive{Username: "jdoe", Active: true}
	runCases(t, []commandCase{
		{
			name:    "deactivating an active user records user.deactivated",
			given:   []any{jdoe},
			when:    step{cmd: deactivate},
			then:    []event{{events.UserDeactivatedType, "jdoe", 2, map[string]any{"is_active": false, "changes": []string{"is_active"}}}},
			version: 2,
		},
		{
			name:    "deactivating an inactive user records nothing and answers the current version",
			given:   []any{jdoe, deactivate},
			when:    step{cmd: deactivate},
			version: 2,
		},
		{
			name:  "activating an inactive user records user.activated",
			given: []any{jdoe, deactivate},
			when:  step{cmd: activate},
			then:  []event{{events.UserActivatedType, "jdoe", 3, map[string]any{"is_active": true}}},
		},
		{
			name:    "activating an active user records nothing",
			given:   []any{jdoe},
			when:    step{cmd: activate},
			version: 1,
		},
		{
			name:  "deactivating with a stale If-Match is refused",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}},
			when:  ifMatch(1, deactivate),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name: "deactivating an unknown user is not found",
			when: step{cmd: deactivate},
			err:  apperr.CodeNotFound,
		},
	})
}

func TestDeleteUser(t *testing.T) {
	jdoe := createUser("jdoe", "jdoe@example.com")
	runCases(t, []commandCase{
		{
			name:  "deleting a user records user.deleted and frees its username and email",
			given: []any{jdoe},
			when:  step{cmd: commands.DeleteUser{Username: "JDoe"}},
			then: []event{{events.UserDeletedType, "jdoe", 2, map[string]any{
				"deleted": true, "email": "", "group_count": 0, "changes": []string{"email", "first_name", "is_active", "last_name"},
			}}},
			version: 2,
			also: func(t *testing.T, w *world, _ any) {
				if emailGuard(t, w, "jdoe@example.com") {
					t.Error("the deleted user's email guard is kept")
				}
				w.given(createUser("john", "jdoe@example.com"))
			},
		},
		{
			name: "deleting a user removes its memberships from the write model",
			given: []any{jdoe, createGroup("Admins"), createGroup("Ops"), addMember("admins", "jdoe"), addMember("OPS", "jdoe"),
				createUser("john", ""), addMember("admins", "john")},
			when: step{cmd: commands.DeleteUser{Username: "jdoe"}},
			then: []event{{events.UserDeletedType, "jdoe", 2, map[string]any{"groups": []string{"admins", "ops"}}}},
			also: func(t *testing.T, w *world, _ any) {
				noMemberships(t, w, "jdoe")
				if !w.hasItem(dynamo.GroupID("admins"), dynamo.MemberSK("john")) {
					t.Error("another user's membership went too")
				}
			},
		},
		{
			name:  "deleting a user in more groups than one transaction holds removes every membership",
			given: append([]any{jdoe}, groupsWithMember(50, "jdoe")...),
			when:  step{cmd: commands.DeleteUser{Username: "jdoe"}},
			then:  []event{{events.UserDeletedType, "jdoe", 2, map[string]any{"group_count": 50}}},
			also: func(t *testing.T, w *world, _ any) {
				noMemberships(t, w, "jdoe")
				u, err := w.real.LoadUser(t.Context(), w.tenant, "jdoe")
				if err != nil || u.CleanupPending {
					t.Errorf("tombstone still marked for clean-up (%v)", err)
				}
			},
		},
		{
			name:  "a deleted user is not found",
			given: []any{jdoe, commands.DeleteUser{Username: "jdoe"}},
			when:  step{cmd: commands.DeleteUser{Username: "jdoe"}},
			err:   apperr.CodeNotFound,
		},
		{
			name:  "a delete with a stale If-Match is refused",
			given: []any{jdoe, commands.UpdateUser{Username: "jdoe", LastName: ptr("Doe")}},
			when:  ifMatch(1, commands.DeleteUser{Username: "jdoe"}),
			err:   apperr.CodeVersionMismatch,
		},
		{
			name:  "a user created again is not a member of the groups of its former self",
			given: []any{jdoe, createGroup("admins"), addMember("admins", "jdoe"), commands.DeleteUser{Username: "jdoe"}, jdoe},
			when:  step{cmd: addMember("admins", "jdoe")},
			then:  []event{{events.GroupMemberAddedType, "admins", 3, map[string]any{"member": "jdoe"}}},
		},
	})
}

// interruptedStore is the real store, except that the clean-up after a delete fails the
// first time: DynamoDB failed, or the process died, between the delete's transaction and
// its follow-up.
type interruptedStore struct {
	commands.Store
	interrupted bool
	// failed is the clean-up that failed, for running it late.
	failed commands.Cleanup
}

func (s *interruptedStore) RemoveMembersAfter(ctx context.Context, t commands.Tenant, c commands.Cleanup) error {
	if !s.interrupted {
		s.interrupted = true
		s.failed = c
		return errors.New("throttled")
	}
	return s.Store.RemoveMembersAfter(ctx, t, c)
}

// TestInterruptedDelete checks a delete whose memberships do not fit into its transaction
// and whose follow-up clean-up fails: the delete is done (it is recorded, so it is not
// answered with an error), what is left behaves as gone, and a re-create finishes the job.
func TestInterruptedDelete(t *testing.T) {
	t.Parallel()
	// Two memberships more than one transaction holds.
	n := (*dynamo.CommandStore)(nil).MaxMembersPerChange() + 2
	last := fmt.Sprintf("%03d", n-1)
	cases := []struct {
		name     string
		given    []any
		delete   any
		tomb     func(w *world) (bool, error)
		leftover any
		recreate any
		check    func(t *testing.T, w *world)
		// rejoin is made by the new incarnation; the delete's own clean-up, run late
		// (its process was paused, not dead), must leave it.
		rejoin any
		member [2]string
	}{
		{
			name:   "a user in more groups than a transaction holds",
			given:  append([]any{createUser("jdoe", "")}, groupsWithMember(n, "jdoe")...),
			delete: commands.DeleteUser{Username: "jdoe"},
			tomb: func(w *world) (bool, error) {
				u, err := w.real.LoadUser(w.t.Context(), w.tenant, "jdoe")
				return u.CleanupPending, err
			},
			leftover: commands.RemoveMember{Group: "g" + last, Username: "jdoe"},
			recreate: createUser("jdoe", ""),
			check:    func(t *testing.T, w *world) { noMemberships(t, w, "jdoe") },
			rejoin:   addMember("g"+last, "jdoe"),
			member:   [2]string{"g" + last, "jdoe"},
		},
		{
			name:   "a group with more members than a transaction holds",
			given:  append([]any{createGroup("big")}, usersInGroup(n, "big")...),
			delete: commands.DeleteGroup{Name: "big"},
			tomb: func(w *world) (bool, error) {
				g, err := w.real.LoadGroup(w.t.Context(), w.tenant, "big")
				return g.CleanupPending, err
			},
			leftover: addMember("big", "u"+last),
			recreate: createGroup("BIG"),
			check:    func(t *testing.T, w *world) { groupHasNoMembers(t, w, "big") },
			rejoin:   addMember("big", "u"+last),
			member:   [2]string{"big", "u" + last},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.given(tc.given...)
			store := &interruptedStore{Store: w.real}
			w.store = store
			if _, err := w.exec(t.Context(), step{cmd: tc.delete}); err != nil {
				t.Fatalf("the delete was recorded but answered %v", err)
			}
			leftovers := 0
			for _, it := range w.items() {
				if dynamo.IsMemberSK(s(it, "sk")) {
					leftovers++
				}
			}
			// A group delete's transaction also holds the checks of the counts of user
			// deletes its member list rests on (and the parts of a long list): fewer
			// memberships go in it.
			if leftovers < 2 || leftovers != len(store.failed.Members) {
				t.Fatalf("%d memberships left after the interrupted clean-up, want the %d (at least 2) beyond one transaction", leftovers, len(store.failed.Members))
			}
			if pending, err := tc.tomb(w); err != nil || !pending {
				t.Fatalf("the tombstone is not marked for clean-up (%v)", err)
			}
			records := len(w.history())
			if _, err := w.exec(t.Context(), step{cmd: tc.leftover}); apperr.CodeOf(err) != apperr.CodeNotFound {
				t.Errorf("a command on a left-over membership answered %v, want not found", err)
			}
			if n := len(w.history()); n != records {
				t.Errorf("a command on a left-over membership recorded %d events", n-records)
			}
			w.given(tc.recreate)
			tc.check(t, w)

			w.given(tc.rejoin)
			if err := w.real.RemoveMembersAfter(t.Context(), w.tenant, w.store.(*interruptedStore).failed); err != nil {
				t.Fatalf("the late clean-up: %v", err)
			}
			if ok, err := w.real.IsMember(t.Context(), w.tenant, tc.member[0], tc.member[1]); err != nil || !ok {
				t.Errorf("the delete's clean-up, run late, removed %s's membership of %s made after the re-create (%v)", tc.member[1], tc.member[0], err)
			}
			pointer := false
			for _, it := range w.items() {
				pointer = pointer || (s(it, "id") == dynamo.UserID(tc.member[1]) && s(it, "sk") == dynamo.GroupPointerSK(tc.member[0]))
			}
			if !pointer {
				t.Errorf("the late clean-up removed the group pointer of %s's new membership of %s", tc.member[1], tc.member[0])
			}
		})
	}
}
