package main

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/ssodir/ssodir/internal/events"
)

func TestCursorTampering(t *testing.T) {
	a := startApp(t, options{})
	for _, tenant := range []string{tenantA, tenantB} {
		f := a.tenant(t, tenant)
		for _, u := range []string{"lana", "lars", "lee", "liam", "lou"} {
			apply(t, f, f.CreateUser(events.User{Username: u, FirstName: "L", LastName: "L" + u}))
		}
		apply(t, f, f.CreateGroup("one", ""), f.CreateGroup("two", ""), f.CreateGroup("three", ""))
	}
	first := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), url.Values{"last_name_prefix": {"ll"}, "limit": {"2"}})
	if first.NextCursor == nil {
		t.Fatal("the first page has no next_cursor")
	}
	cursor := *first.NextCursor

	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatalf("the cursor is not base64url: %v", err)
	}
	flip := func(i int) string {
		b := slices.Clone(raw)
		b[i] ^= 0x01
		return base64.RawURLEncoding.EncodeToString(b)
	}

	bad := []struct {
		name   string
		tenant string
		path   string
		query  url.Values
	}{
		{"a cursor with a flipped byte in its signature", tenantA, "/users", url.Values{"last_name_prefix": {"ll"}, "cursor": {flip(0)}}},
		{"a cursor with a flipped byte in its body", tenantA, "/users", url.Values{"last_name_prefix": {"ll"}, "cursor": {flip(len(raw) - 3)}}},
		{"a truncated cursor", tenantA, "/users", url.Values{"last_name_prefix": {"ll"}, "cursor": {cursor[:len(cursor)-4]}}},
		{"a cursor that is not base64url", tenantA, "/users", url.Values{"last_name_prefix": {"ll"}, "cursor": {"not a cursor!"}}},
		{"an empty cursor", tenantA, "/users", url.Values{"last_name_prefix": {"ll"}, "cursor": {""}}},
		{"a very long cursor", tenantA, "/users", url.Values{"last_name_prefix": {"ll"}, "cursor": {string(make([]byte, 5000))}}},
		{"the cursor on another tenant", tenantB, "/users", url.Values{"last_name_prefix": {"ll"}, "cursor": {cursor}}},
		{"the cursor on the list of all users", tenantA, "/users", url.Values{"cursor": {cursor}}},
		{"the cursor on the first-name list", tenantA, "/users", url.Values{"first_name_prefix": {"ll"}, "cursor": {cursor}}},
		{"the cursor on the username list", tenantA, "/users", url.Values{"username_prefix": {"ll"}, "cursor": {cursor}}},
		{"the cursor with another prefix", tenantA, "/users", url.Values{"last_name_prefix": {"lla"}, "cursor": {cursor}}},
		{"the cursor on the groups list", tenantA, "/groups", url.Values{"cursor": {cursor}}},
		{"the cursor on the activity feed", tenantA, "/activity", url.Values{"day": {"2026-11-21"}, "cursor": {cursor}}},
	}
	for _, tc := range bad {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			r := a.get(t, bootstrap, tenantPath(tc.tenant, tc.path)+"?"+tc.query.Encode())
			code, fields := r.problem(t)
			if r.status != http.StatusBadRequest || code != "validation_failed" || !slices.Equal(fields, []string{"cursor"}) {
				t.Errorf("%d %s, want 400 validation_failed on cursor", r.status, r.body)
			}
		})
	}

	t.Run("the cursor continues its own list, also with another page size", func(t *testing.T) {
		p := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), url.Values{"last_name_prefix": {"LL"}, "limit": {"10"}, "cursor": {cursor}})
		if got, want := usernames(p.Items), []string{"lee", "liam", "lou"}; !slices.Equal(got, want) {
			t.Errorf("users %v, want %v", got, want)
		}
		if p.NextCursor != nil {
			t.Errorf("next_cursor %q at the end, want null", *p.NextCursor)
		}
	})
	t.Run("a username-prefix cursor continues its list and no other", func(t *testing.T) {
		first := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), url.Values{"username_prefix": {"L"}, "limit": {"2"}})
		if got, want := usernames(first.Items), []string{"lana", "lars"}; !slices.Equal(got, want) || first.NextCursor == nil {
			t.Fatalf("first page %v (next %v), want %v and a cursor", got, first.NextCursor, want)
		}
		rest := list[userJSON](t, a, bootstrap, tenantPath(tenantA, "/users"), url.Values{"username_prefix": {"l"}, "cursor": {*first.NextCursor}})
		if got, want := usernames(rest.Items), []string{"lee", "liam", "lou"}; !slices.Equal(got, want) || rest.NextCursor != nil {
			t.Errorf("rest %v (next %v), want %v and null", got, rest.NextCursor, want)
		}
		r := a.get(t, bootstrap, tenantPath(tenantA, "/users")+"?"+url.Values{"username_prefix": {"la"}, "cursor": {*first.NextCursor}}.Encode())
		if code, _ := r.problem(t); r.status != http.StatusBadRequest || code != "validation_failed" {
			t.Errorf("the cursor with another username prefix: %d %s, want 400", r.status, r.body)
		}
	})
	t.Run("the cursor of a page that ends exactly at the last item is null", func(t *testing.T) {
		p := list[groupJSON](t, a, bootstrap, tenantPath(tenantA, "/groups"), url.Values{"limit": {"3"}})
		if len(p.Items) != 3 || p.NextCursor != nil {
			t.Errorf("%d groups, next_cursor %v; want 3 and null", len(p.Items), p.NextCursor)
		}
	})
}
