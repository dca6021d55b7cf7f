package main

import (
	"strings"
	"testing"
)

// TestImportTakesUsernamesAsTheAPIDoes: the import checks usernames with the directory's
// own rule (API.md, Keycloak's): an email with a plus, letters beyond ASCII and 255
// characters pass, lower-cased; a '#', a space or 256 characters are the line's problem.
func TestImportTakesUsernamesAsTheAPIDoes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Ann+EU@Example.com", "ann+eu@example.com", true},
		{"Jörg", "jörg", true},
		{strings.Repeat("a", 255), strings.Repeat("a", 255), true},
		{strings.Repeat("a", 256), "", false},
		{"ann#eu", "", false},
		{"ann eu", "", false},
	} {
		lines := []line[userRecord]{{no: 1, rec: userRecord{Username: tc.in}}}
		validateUsers(lines)
		if ok := len(lines[0].problems) == 0; ok != tc.ok || (ok && lines[0].rec.Username != tc.want) {
			t.Errorf("%q: username %q, problems %v; want %q, ok %v", tc.in, lines[0].rec.Username, lines[0].problems, tc.want, tc.ok)
		}
	}
}
