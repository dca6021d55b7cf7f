package scim

import (
	"encoding/json"
	"testing"
)

func doc(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return lowerKeys(v).(map[string]any)
}

const jane = `{"id": "2819c223-7f76-453a", "externalId": "00u1abc", "userName": "jane@example.com",
	"name": {"givenName": "Jane", "familyName": "Doe"}, "active": true,
	"emails": [{"value": "jane@example.com", "type": "work", "primary": true}, {"value": "jd@home.example", "type": "home"}],
	"meta": {"lastModified": "2026-11-21T10:05:00.000Z"},
	"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": {"department": "Sales", "manager": {"value": "m-1"}}}`

func TestFilterMatches(t *testing.T) {
	cases := []struct {
		filter string
		want   bool
	}{
		{`userName eq "jane@example.com"`, true},
		{`userName eq "JANE@Example.COM"`, true},
		{`USERNAME EQ "jane@example.com"`, true},
		{`userName Eq "jane@example.com" AND externalId eq "00u1abc"`, true},
		{`externalId eq "00U1ABC"`, false},
		{`id eq "2819c223-7f76-453a"`, true},
		{`emails[type eq "work"].value eq "jane@example.com"`, true},
		{`emails[Type EQ "Work"].Value Eq "JANE@example.com"`, true},
		{`emails[type eq "home"].value eq "jane@example.com"`, false},
		{`emails[type eq "work" and primary eq true]`, true},
		{`emails.value eq "jd@home.example"`, true},
		{`emails eq "jd@home.example"`, true},
		{`emails co "home"`, true},
		{`name.familyName sw "d"`, true},
		{`name.givenName ew "NE"`, true},
		{`active eq true`, true},
		{`active eq false`, false},
		{`title pr`, false},
		{`name pr`, true},
		{`not (title pr)`, true},
		{`userName ne "jane@example.com"`, false},
		{`title ne "x"`, true},
		{`meta.lastModified gt "2026-11-21T10:00:00Z"`, true},
		{`meta.lastModified lt "2026-11-21T10:00:00Z"`, false},
		{`userName eq "x" or (active eq true and name.familyName eq "Doe")`, true},
		{`userName eq "x" or active eq true and name.familyName eq "Roe"`, false},
		{`urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department eq "sales"`, true},
		{`urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:manager.value eq "m-1"`, true},
		{`urn:ietf:params:scim:schemas:core:2.0:User:userName eq "jane@example.com"`, true},
	}
	res := doc(t, jane)
	for _, c := range cases {
		f, err := parseFilter(c.filter)
		if err != nil {
			t.Errorf("%s: %v", c.filter, err)
			continue
		}
		if got := matches(f, res); got != c.want {
			t.Errorf("%s: matches %v, want %v", c.filter, got, c.want)
		}
	}
}

func TestMalformedFiltersAreRefused(t *testing.T) {
	for _, s := range []string{
		``, `userName`, `userName eq`, `userName equals "x"`, `userName eq "x" and`, `(userName eq "x"`,
		`userName eq "x")`, `emails[type eq "work"`, `emails[type eq "work"].`, `userName eq "unterminated`,
		`userName eq x`, `"x" eq userName`, `name.givenName[type eq "x"]`, `userName eq "x" userName eq "y"`,
		`a.b.c eq "x"`, `userName eq 1e999`, `not userName eq "x"`,
	} {
		if _, err := parseFilter(s); err == nil {
			t.Errorf("%q was accepted", s)
		} else if _, ok := err.(*filterError); !ok {
			t.Errorf("%q: %T, want a filterError", s, err)
		}
	}
	deep := ""
	for range maxFilterDepth + 2 {
		deep += "("
	}
	if _, err := parseFilter(deep + `a eq "b"`); err == nil {
		t.Error("a filter nested deeper than the limit was accepted")
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{`userName eq "a"`, `emails[type eq "work"].value eq "x"`, `not (a pr) or b gt 3`} {
		f.Add(s)
	}
	res := map[string]any{"username": "a", "emails": []any{map[string]any{"type": "work", "value": "x"}}}
	f.Fuzz(func(t *testing.T, s string) {
		if fl, err := parseFilter(s); err == nil {
			matches(fl, res)
		}
	})
}
