package main

import (
	"net/url"
	"slices"
	"testing"

	"github.com/ssodir/ssodir/internal/events"
)

func TestListOrders(t *testing.T) {
	a := startApp(t, options{})
	f := a.tenant(t, tenantA)
	// Names chosen so that the orders differ: by last name then username, by first name,
	// by update time, and "Al" before "Alan" whatever the usernames.
	apply(t, f,
		f.CreateUser(events.User{Username: "zed", FirstName: "Zoe", LastName: "Al", Email: "zed@example.com"}),
		f.CreateUser(events.User{Username: "abe", FirstName: "abel", LastName: "Alan", Email: "abe@example.com"}),
		f.CreateUser(events.User{Username: "bob", FirstName: "Bob", LastName: "alpha", Email: "bob@example.com"}),
		f.CreateUser(events.User{Username: "amy", FirstName: "Amy", LastName: "Alpha", Email: "amy@example.com"}),
		f.CreateUser(events.User{Username: "carl", FirstName: "ABEL", LastName: "ALPHONSE", Email: "carl@example.com"}),
		f.CreateUser(events.User{Username: "dora", FirstName: "Dora", LastName: "Beta", Email: "Dora.B@Example.com"}),
		f.CreateUser(events.User{Username: "nolast", FirstName: "Nora"}),
	)
	apply(t, f, f.UpdateUser("bob", func(u *events.User) { u.FirstName = "Robert" }))
	apply(t, f,
		f.CreateGroup("beta", ""), f.CreateGroup("Alpha", ""), f.CreateGroup("gamma", ""), f.CreateGroup("ALPHA2", ""),
		f.AddMember("gamma", "dora"), f.AddMember("gamma", "abe"), f.AddMember("gamma", "zed"),
		f.AddMember("beta", "abe"), f.AddMember("ALPHA2", "abe"),
	)

	users := []struct {
		name  string
		query url.Values
		want  []string
	}{
		{"a last-name prefix matches in any case, ordered by last name then username",
			url.Values{"last_name_prefix": {"ALP"}}, []string{"amy", "bob", "carl"}},
		{"a shorter last name sorts before a longer one it prefixes, whatever the usernames",
			url.Values{"last_name_prefix": {"al"}}, []string{"zed", "abe", "amy", "bob", "carl"}},
		{"a first-name prefix matches in any case, ordered by first name then username",
			url.Values{"first_name_prefix": {"abe"}}, []string{"abe", "carl"}},
		{"a username prefix matches in any case, ordered by username",
			url.Values{"username_prefix": {"A"}}, []string{"abe", "amy"}},
		{"a username prefix that is a whole username lists it and the longer ones",
			url.Values{"username_prefix": {"no"}}, []string{"nolast"}},
		{"a prefix that matches nobody lists nothing",
			url.Values{"last_name_prefix": {"xylo"}}, []string{}},
		{"all users are listed most recently updated first by default",
			nil, []string{"bob", "nolast", "dora", "carl", "amy", "abe", "zed"}},
		{"updated_desc is the default order spelt out",
			url.Values{"order": {"updated_desc"}}, []string{"bob", "nolast", "dora", "carl", "amy", "abe", "zed"}},
		{"updated_asc lists the oldest update first",
			url.Values{"order": {"updated_asc"}}, []string{"zed", "abe", "amy", "carl", "dora", "nolast", "bob"}},
		{"an email matches in any case",
			url.Values{"email": {"dora.b@EXAMPLE.com"}}, []string{"dora"}},
		{"an unknown email lists nothing",
			url.Values{"email": {"nobody@example.com"}}, []string{}},
	}
	for _, tc := range users {
		t.Run(tc.name, func(t *testing.T) {
			p := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), tc.query)
			if got := usernames(p.Items); !slices.Equal(got, tc.want) {
				t.Errorf("users %v, want %v", got, tc.want)
			}
			if p.NextCursor != nil {
				t.Errorf("next_cursor %q on a complete list, want null", *p.NextCursor)
			}
		})
	}

	t.Run("groups are listed by name case-insensitively", func(t *testing.T) {
		p := list[groupJSON](t, a, bootstrap, tenantPath(tenantA, "/groups"), nil)
		if got, want := groupNames(p.Items), []string{"Alpha", "ALPHA2", "beta", "gamma"}; !slices.Equal(got, want) {
			t.Errorf("groups %v, want %v", got, want)
		}
	})
	t.Run("a user's groups are listed by name case-insensitively", func(t *testing.T) {
		p := list[groupJSON](t, a, bootstrap, tenantPath(tenantA, "/users/abe/groups"), nil)
		if got, want := groupNames(p.Items), []string{"ALPHA2", "beta", "gamma"}; !slices.Equal(got, want) {
			t.Errorf("groups %v, want %v", got, want)
		}
	})
	t.Run("a group's members are listed by username", func(t *testing.T) {
		p := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/groups/GAMMA/members"), nil)
		if got, want := usernames(p.Items), []string{"abe", "dora", "zed"}; !slices.Equal(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
	})
	t.Run("an entity's activity is listed newest first", func(t *testing.T) {
		p := list[activityJSON](t, a, bootstrap, tenantPath(tenantA, "/activity"), url.Values{"entity": {"group:gamma"}})
		var versions []int64
		for _, it := range p.Items {
			versions = append(versions, it.Version)
		}
		if want := []int64{4, 3, 2, 1}; !slices.Equal(versions, want) {
			t.Errorf("versions %v, want %v", versions, want)
		}
	})
}
