package identity_test

import (
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/identity"
)

func TestValidID(t *testing.T) {
	cases := []struct {
		id   string
		want bool
	}{
		{"acme", true},
		{"a", true},
		{"0-tenant-9", true},
		{strings.Repeat("a", 32), true},
		{strings.Repeat("a", 33), false},
		{"", false},
		{"-acme", false},
		{"Acme", false},
		{"ac_me", false},
		{"acme.eu", false},
	}
	for _, c := range cases {
		if got := identity.ValidID(c.id); got != c.want {
			t.Errorf("ValidID(%q) = %v, want %v", c.id, got, c.want)
		}
	}
}

func TestNormalizeUsernameFollowsAPIMD(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
		ok   bool
	}{
		{"a plain username", "jdoe", "jdoe", true},
		{"upper case is lower-cased, as Keycloak does", "JDoe", "jdoe", true},
		{"an email address", "Ann.O.Smith@Example.com", "ann.o.smith@example.com", true},
		{"a plus-addressed email", "ann+eu@example.com", "ann+eu@example.com", true},
		{"a letter beyond ASCII", "Jörg", "jörg", true},
		{"letters of other scripts", "Ἀθηνᾶ.李", "ἀθηνᾶ.李", true},
		{"what Keycloak allows of ASCII punctuation", "a.b_c-d@e+f", "a.b_c-d@e+f", true},
		{"255 characters", strings.Repeat("a", 255), strings.Repeat("a", 255), true},
		{"255 characters of three bytes each", strings.Repeat("李", 255), strings.Repeat("李", 255), true},
		{"a Kelvin sign lower-cases to an ASCII k", "\u212Aate", "kate", true},
		{"empty", "", "", false},
		{"256 characters", strings.Repeat("a", 256), "", false},
		{"255 characters of four bytes each pass no key", strings.Repeat("😀", 255), "", false},
		{"a space", "j doe", "", false},
		{"a no-break space", "j\u00a0doe", "", false},
		{"a tab", "j\tdoe", "", false},
		{"a control character", "j\x01doe", "", false},
		{"invalid UTF-8", "j\xffdoe", "", false},
		{"far too long to lower-case", strings.Repeat("A", 1100), "", false},
	}
	for _, r := range "<>&\"'$%!#?§,;:*~/\\|^=[]{}()`" {
		cases = append(cases, struct {
			name string
			in   string
			want string
			ok   bool
		}{"Keycloak refuses " + string(r), "a" + string(r) + "b", "", false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := identity.NormalizeUsername(c.in)
			if ok != c.ok || (ok && got != c.want) {
				t.Errorf("NormalizeUsername(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestGroupNames(t *testing.T) {
	cases := []struct {
		name     string
		in       string
		key      string
		problems int
	}{
		{"letters, digits, space and punctuation", "Team A.1_b-c", "team a.1_b-c", 0},
		{"letters of any script", "Équipe Ünï", "équipe ünï", 0},
		{"128 characters", strings.Repeat("é", 128), strings.Repeat("é", 128), 0},
		{"129 characters", strings.Repeat("é", 129), "", 1},
		{"empty", "", "", 1},
		{"a leading space", " admins", "", 1},
		{"a slash", "a/b", "", 1},
		{"a trailing space and a slash: both are said", "a/b ", "", 2},
		{"invalid UTF-8", "a\xffb", "", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := identity.GroupNameProblems(c.in)
			if len(got) != c.problems {
				t.Fatalf("GroupNameProblems(%q) = %q, want %d problems", c.in, got, c.problems)
			}
			if identity.ValidGroupName(c.in) != (c.problems == 0) {
				t.Errorf("ValidGroupName(%q) disagrees with GroupNameProblems", c.in)
			}
			if c.problems == 0 && identity.GroupKey(c.in) != c.key {
				t.Errorf("GroupKey(%q) = %q, want %q", c.in, identity.GroupKey(c.in), c.key)
			}
		})
	}
}

func TestEmails(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want string
		ok   bool
	}{
		{"trimmed and lower-cased", "  JDoe@Example.COM ", "jdoe@example.com", true},
		{"a plus address", "j+x@example.com", "j+x@example.com", true},
		{"254 characters", strings.Repeat("a", 64) + "@" + strings.Repeat("b", 185) + ".com", "", true},
		{"255 characters", strings.Repeat("a", 64) + "@" + strings.Repeat("b", 186) + ".com", "", false},
		{"no dot in the domain", "j@localhost", "j@localhost", false},
		{"a display name", "Jane <j@example.com>", "", false},
		{"no at sign", "example.com", "example.com", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := identity.NormalizeEmail(c.in)
			if c.want != "" && e != c.want {
				t.Errorf("NormalizeEmail(%q) = %q, want %q", c.in, e, c.want)
			}
			if ok := identity.EmailProblem(e) == ""; ok != c.ok {
				t.Errorf("EmailProblem(%q) = %q, want ok %v", e, identity.EmailProblem(e), c.ok)
			}
		})
	}
}
