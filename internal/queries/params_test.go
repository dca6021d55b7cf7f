package queries

import (
	"slices"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/identity"
)

func fieldsOf(err error) []string {
	e, ok := apperr.As(err)
	if !ok {
		return nil
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Field)
	}
	return out
}

func TestParseUsersQuery(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  UsersQuery
		field string // non-empty: the query is invalid and this field is at fault
	}{
		{name: "no parameters list all users newest first", query: "",
			want: UsersQuery{Order: OrderUpdatedDesc}},
		{name: "oldest first is an order", query: "order=updated_asc",
			want: UsersQuery{Order: OrderUpdatedAsc}},
		{name: "an email is trimmed and lower-cased", query: "email=%20JDoe@Example.COM%20",
			want: UsersQuery{Email: "jdoe@example.com"}},
		{name: "a last-name prefix is lower-cased", query: "last_name_prefix=MÜL&limit=7",
			want: UsersQuery{LastNamePrefix: "mül", Page: PageRequest{Limit: 7}}},
		{name: "a first-name prefix keeps its cursor", query: "first_name_prefix=a&cursor=abc",
			want: UsersQuery{FirstNamePrefix: "a", Page: PageRequest{Cursor: "abc"}}},
		{name: "a username prefix is lower-cased", query: "username_prefix=JD",
			want: UsersQuery{UsernamePrefix: "jd"}},
		{name: "a username prefix may hold every character of a username", query: "username_prefix=j.d_o-e%40x",
			want: UsersQuery{UsernamePrefix: "j.d_o-e@x"}},
		{name: "a username prefix with a space is refused", query: "username_prefix=j%20d", field: "username_prefix"},
		{name: "a username prefix longer than a username is refused", query: "username_prefix=" + strings.Repeat("a", 256), field: "username_prefix"},
		{name: "a username prefix with a name prefix is refused", query: "username_prefix=j&last_name_prefix=d", field: "email"},
		{name: "an order with a username prefix is refused", query: "username_prefix=j&order=updated_asc", field: "order"},
		{name: "an unknown parameter is refused", query: "sort=name", field: "sort"},
		{name: "a repeated parameter is refused", query: "order=updated_asc&order=updated_desc", field: "order"},
		{name: "two filters are refused", query: "email=a@b.c&first_name_prefix=a", field: "email"},
		{name: "an order with an email is refused", query: "email=a@b.c&order=updated_desc", field: "order"},
		{name: "an unknown order is refused", query: "order=random", field: "order"},
		{name: "an empty order is refused", query: "order=", field: "order"},
		{name: "a blank email is refused", query: "email=%20%20", field: "email"},
		{name: "a prefix with a NUL is refused", query: "last_name_prefix=a%00b", field: "last_name_prefix"},
		{name: "a prefix that is not UTF-8 is refused", query: "last_name_prefix=%FF", field: "last_name_prefix"},
		{name: "a limit with a sign is refused", query: "limit=%2B5", field: "limit"},
		{name: "a limit of 501 is refused", query: "limit=501", field: "limit"},
		{name: "an empty cursor is refused", query: "cursor=", field: "cursor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseUsersQuery(tc.query)
			if tc.field != "" {
				if apperr.CodeOf(err) != apperr.CodeValidationFailed || !slices.Contains(fieldsOf(err), tc.field) {
					t.Fatalf("err %v, want validation_failed on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("err %v", err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseActivityQuery(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  ActivityQuery
		field string
	}{
		{name: "a user entity is lower-cased", query: "entity=user:JDoe", want: ActivityQuery{Entity: "user:jdoe"}},
		{name: "a group entity becomes its key", query: "entity=group:Site%20Admins", want: ActivityQuery{Entity: "group:site admins"}},
		{name: "an actor is kept as it is", query: "actor=Kc-Sub:1", want: ActivityQuery{Actor: "Kc-Sub:1"}},
		{name: "a real day is a day", query: "day=2024-02-29", want: ActivityQuery{Day: "2024-02-29"}},
		{name: "a day that does not exist is refused", query: "day=2023-02-29", field: "day"},
		{name: "a day with a time is refused", query: "day=2024-02-01T00:00:00Z", field: "day"},
		{name: "no selector is refused", query: "limit=5", field: "entity"},
		{name: "two selectors are refused", query: "entity=user:a&actor=b", field: "entity"},
		{name: "an entity of another kind is refused", query: "entity=tenant:x", field: "entity"},
		{name: "a user entity with an empty name is refused", query: "entity=user:", field: "entity"},
		{name: "a group entity with a slash is refused", query: "entity=group:a/b", field: "entity"},
		{name: "an empty actor is refused", query: "actor=", field: "actor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseActivityQuery(tc.query)
			if tc.field != "" {
				if apperr.CodeOf(err) != apperr.CodeValidationFailed || !slices.Contains(fieldsOf(err), tc.field) {
					t.Fatalf("err %v, want validation_failed on %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("err %v", err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseMinVersion(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   int64
		bad    bool
	}{
		{"no header waits for nothing", nil, 0, false},
		{"a positive integer is a version", []string{"42"}, 42, false},
		{"surrounding spaces are ignored", []string{" 7 "}, 7, false},
		{"zero is refused", []string{"0"}, 0, true},
		{"a negative number is refused", []string{"-3"}, 0, true},
		{"a signed number is refused", []string{"+3"}, 0, true},
		{"a fraction is refused", []string{"1.0"}, 0, true},
		{"an empty value is refused", []string{""}, 0, true},
		{"a number beyond int64 is refused", []string{"9223372036854775808"}, 0, true},
		{"two values are refused", []string{"1", "1"}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMinVersion(tc.values)
			if tc.bad {
				if apperr.CodeOf(err) != apperr.CodeValidationFailed {
					t.Fatalf("err %v, want validation_failed", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want string
		ok   bool
	}{
		{"a username is lower-cased", "J.Doe@Corp", "j.doe@corp", true},
		{"a username of 255 characters is valid", strings.Repeat("a", 255), strings.Repeat("a", 255), true},
		{"a username of 256 characters is not", strings.Repeat("a", 256), "", false},
		{"a plus-addressed email is a username", "Ann+EU@example.com", "ann+eu@example.com", true},
		{"a username with a space is not", "j doe", "", false},
		{"an empty username is not", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := identity.NormalizeUsername(tc.in)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("identity.NormalizeUsername(%q) = %q, %v", tc.in, got, ok)
			}
		})
	}
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"Site Admins", true}, {"ops.team_1-a", true}, {"Équipe", true}, {" lead", false}, {"a/b", false}, {"", false},
	} {
		if got := identity.ValidGroupName(tc.in); got != tc.ok {
			t.Errorf("identity.ValidGroupName(%q) = %v, want %v", tc.in, got, tc.ok)
		}
	}
}
