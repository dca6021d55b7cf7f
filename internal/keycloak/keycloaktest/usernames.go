package keycloaktest

import (
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// usernameProhibited are the characters Keycloak's username-prohibited-characters
// validator refuses besides whitespace and control characters.
const usernameProhibited = "<>&\"'$%!#?§,;:*~/\\|^=[]{}()`"

// usernameProblem is Keycloak's answer to a username (lower-cased) that its user profile
// refuses — the validators length (at most 255 characters, at least minLength) and
// username-prohibited-characters — or nil. Keycloak's default profile wants at least 3;
// the double checks no minimum unless a test sets one (SetUsernameMinLength), since a realm
// may lower it and the directory allows 1–2 character names.
func usernameProblem(username string, minLength int) *apiError {
	if n := utf8.RuneCountInString(username); n > 255 || n < minLength {
		return &apiError{http.StatusBadRequest, map[string]any{
			"field": "username", "errorMessage": "error-invalid-length", "params": []any{"username", max(minLength, 1), 255}}}
	}
	for _, r := range username {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(usernameProhibited, r) {
			return &apiError{http.StatusBadRequest, map[string]any{
				"field": "username", "errorMessage": "error-username-invalid-character", "params": []any{"username", username}}}
		}
	}
	return nil
}
