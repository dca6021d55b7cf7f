package client_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
)

// TestUsernamesAsProvidersSendThem: a plus-addressed email, a name beyond ASCII and a
// username of 255 characters go through every way in and out that names a user: create,
// the user's own routes, memberships, lists with cursors, and the activity feed.
func TestUsernamesAsProvidersSendThem(t *testing.T) {
	t.Parallel()
	_, ten := newTenant(t)
	ctx := context.Background()
	long := strings.Repeat("l", 250) + "@x.io"
	names := []string{"ann+eu@example.com", "jörg", long}
	for _, n := range names {
		if got, ok := client.NormalizeUsername(strings.ToUpper(n)); !ok || got != n {
			t.Fatalf("NormalizeUsername(%q) = %q, %v", strings.ToUpper(n), got, ok)
		}
	}
	if _, ok := client.NormalizeUsername("ann#eu"); ok {
		t.Fatal("NormalizeUsername accepts a '#'")
	}
	if _, err := ten.CreateGroup(ctx, client.NewGroup{Name: "Provisioned"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		u, err := ten.CreateUser(ctx, client.NewUser{Username: strings.ToUpper(n), Password: "correct horse"})
		if err != nil || u.Username != n {
			t.Fatalf("create %q: %+v %v", n, u, err)
		}
		if u, err = ten.UpdateUser(ctx, n, client.UserPatch{FirstName: ptr("First")}); err != nil {
			t.Fatalf("update %q: %v", n, err)
		}
		if _, err := ten.DeactivateUser(ctx, n); err != nil {
			t.Fatalf("deactivate %q: %v", n, err)
		}
		if _, err := ten.SetPassword(ctx, n, "another horse"); err != nil {
			t.Fatalf("password %q: %v", n, err)
		}
		r, err := ten.AddMember(ctx, "Provisioned", n)
		if err != nil {
			t.Fatalf("add %q: %v", n, err)
		}
		got, err := ten.GetUser(ctx, n, client.MinVersion(u.Version+2))
		if err != nil || got.Username != n || got.IsActive || got.FirstName != "First" {
			t.Fatalf("get %q: %+v %v", n, got, err)
		}
		if _, err := ten.GetGroup(ctx, "Provisioned", client.MinVersion(r.Version)); err != nil {
			t.Fatal(err)
		}
	}

	eventually(t, func() bool { return len(collect(t, ten.GroupMembers(ctx, "provisioned", 1))) == len(names) })
	var members []string
	for _, u := range collect(t, ten.GroupMembers(ctx, "provisioned", 1)) {
		members = append(members, u.Username)
	}
	if want := slices.Sorted(slices.Values(names)); !slices.Equal(members, want) {
		t.Fatalf("members by one a page %q, want %q", members, want)
	}
	var all []string
	for _, u := range collect(t, ten.Users(ctx, client.UserFilter{Limit: 1})) {
		all = append(all, u.Username)
	}
	if slices.Sort(all); !slices.Equal(all, members) {
		t.Fatalf("users by one a page %q, want %q", all, members)
	}
	for _, n := range names {
		byPrefix := collect(t, ten.Users(ctx, client.UserFilter{UsernamePrefix: n, Limit: 1}))
		if len(byPrefix) != 1 || byPrefix[0].Username != n {
			t.Errorf("username_prefix=%q: %+v", n, byPrefix)
		}
		if gs := collect(t, ten.UserGroups(ctx, n, 1)); len(gs) != 1 || gs[0].Name != "Provisioned" {
			t.Errorf("groups of %q: %+v", n, gs)
		}
		var types []string
		eventually(t, func() bool {
			types = types[:0]
			for _, a := range collect(t, ten.Activity(ctx, client.ActivityFilter{Entity: client.UserEntity(n), Limit: 1})) {
				types = append(types, a.Type)
			}
			return len(types) == 5
		})
		// Newest first: joining Provisioned (the group's change, in the user's feed too).
		if want := []string{"group.member_added", "user.password_changed", "user.deactivated", "user.updated", "user.created"}; !slices.Equal(types, want) {
			t.Errorf("activity of %q: %v, want %v", n, types, want)
		}
		if _, err := ten.RemoveMember(ctx, "Provisioned", n); err != nil {
			t.Errorf("remove %q: %v", n, err)
		}
		if _, err := ten.DeleteUser(ctx, n); err != nil {
			t.Errorf("delete %q: %v", n, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// eventually waits, generously, for what the projector writes after the views.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("not within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
