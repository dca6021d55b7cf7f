// Package identity holds the rules of API.md's "Objects" that name things: system and
// tenant ids, usernames, group names and their keys, and email addresses. The command
// side (which validates what is stored) and the read side (which validates what is asked
// for) both use these, so a name the one accepts is a name the other finds.
package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"net/mail"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of API.md's "Objects".
const (
	// MaxUsername is in characters (Keycloak's limit).
	MaxUsername  = 255
	MaxGroupName = 128
	MaxEmail     = 254
	// MaxUsernameBytes bounds a username's UTF-8 encoding so that every key that embeds
	// one stays within DynamoDB's limits (a sort key holds at most 1,024 bytes:
	// "member#<username>", "<updated_at>#<username>", "<last name>\x01<username>" with a
	// 255-byte name): 255 characters of the Basic Multilingual Plane, which holds every
	// script's letters, always fit; 255 emoji do not.
	MaxUsernameBytes = 3 * MaxUsername
)

// Messages for a field that breaks a rule, shared so both sides say the same.
const (
	IDRule       = "must match ^[a-z0-9][a-z0-9-]{0,31}$"
	UsernameRule = "must be 1–255 characters (at most 765 bytes in UTF-8), none of them whitespace, " +
		"a control character or one of < > & \" ' $ % ! # ? § , ; : * ~ / \\ | ^ = [ ] { } ( ) `"
)

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// ValidID reports whether s is a valid system or tenant id.
func ValidID(s string) bool { return idRE.MatchString(s) }

// usernameProhibited are the characters Keycloak's username-prohibited-characters rule
// refuses besides whitespace and control characters. '#' and '/' among them keep every
// key layout that embeds a username ("user#<username>", "group#<key>/…") unambiguous.
const usernameProhibited = "<>&\"'$%!#?§,;:*~/\\|^=[]{}()`"

// NormalizeUsername lower-cases a username (as Keycloak does) and reports whether the
// result is a username by API.md's rule, which is Keycloak's own: 1–255 characters, none
// of them whitespace, a control character or one of usernameProhibited; and at most
// MaxUsernameBytes of UTF-8. REST, SCIM, the import and the Go client all decide by it.
func NormalizeUsername(s string) (string, bool) {
	// A rune lower-cases to at most 4 bytes; anything longer cannot pass, and is not worth
	// lower-casing.
	if len(s) > 4*MaxUsername || !utf8.ValidString(s) {
		return "", false
	}
	u := strings.ToLower(s)
	return u, validUsername(u)
}

// validUsername reports whether u, already lower-cased, is a valid username.
func validUsername(u string) bool {
	if u == "" || len(u) > MaxUsernameBytes || utf8.RuneCountInString(u) > MaxUsername || !utf8.ValidString(u) {
		return false
	}
	for _, r := range u {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError || strings.ContainsRune(usernameProhibited, r) {
			return false
		}
	}
	return true
}

// GroupKey is a group name's identity: its lower-cased form.
func GroupKey(name string) string { return strings.ToLower(name) }

// GroupNameProblems lists what is wrong with a group name (1–128 characters of letters,
// digits, space, '.', '_' and '-', no space at either end), or nothing.
func GroupNameProblems(s string) []string {
	n := utf8.RuneCountInString(s)
	if n < 1 || n > MaxGroupName || !utf8.ValidString(s) {
		return []string{"must be 1–128 characters"}
	}
	var out []string
	if strings.TrimSpace(s) != s {
		out = append(out, "must not start or end with a space")
	}
	for _, r := range s {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == ' ' || r == '.' || r == '_' || r == '-') {
			out = append(out, "may hold only letters, digits, space, '.', '_' and '-'")
			break
		}
	}
	return out
}

// ValidGroupName reports whether s is a valid group name.
func ValidGroupName(s string) bool { return len(GroupNameProblems(s)) == 0 }

// NormalizeEmail is an address as stored and looked up: trimmed and lower-cased.
func NormalizeEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// EmailProblem says what is wrong with a normalized, non-empty address, or "": at most
// 254 characters, a bare address (no display name) whose domain has a dot.
func EmailProblem(e string) string {
	if len(e) > MaxEmail {
		return "must be at most 254 characters"
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || a.Name != "" || !strings.Contains(e[strings.LastIndexByte(e, '@')+1:], ".") {
		return "must be a valid email address"
	}
	return ""
}

// ExternalIDAttribute is the attribute that holds the id a provisioning client (a SCIM
// identity provider) knows a user or group by: its externalId. The write model keeps a
// lookup of it, so it holds at most one value of 1–MaxExternalID bytes.
const ExternalIDAttribute = "scim.externalId"

// MaxExternalID bounds an external id in bytes: it is part of a DynamoDB key (at most
// 2048 bytes with its prefix).
const MaxExternalID = 1024

// ExternalID is the external id in attrs, "" when there is none.
func ExternalID(attrs map[string][]string) string {
	if vs := attrs[ExternalIDAttribute]; len(vs) == 1 {
		return vs[0]
	}
	return ""
}

// ErasedIDHash is how the erasure ledger keeps the id of an erased user's incarnation: the
// hex SHA-256 of the id. An id is a random UUID, so its hash names nobody and cannot be
// guessed back, yet every process can hash the id it meets and recognise an erased
// incarnation without holding a key (docs/erasure.md).
func ErasedIDHash(id string) string {
	sum := sha256.Sum256([]byte("ssodir-erased-user-id:" + id))
	return hex.EncodeToString(sum[:])
}
