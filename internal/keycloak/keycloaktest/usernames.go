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

// usernameProblem is Keycloak's answer to a username (lower-cased) that its default user
// profile refuses — the validators length (at most 255 characters) and
// username-prohibited-characters — or nil. Its minimum length (3 by default) is not
// checked: a realm may lower it, and the directory allows shorter names.
func usernameProblem(username string) *apiError {
	if utf8.RuneCountInString(username) > 255 {
		return &apiError{http.StatusBadRequest, map[string]any{
			"field": "username", "errorMessage": "error-invalid-length", "params": []any{"username", 3, 255}}}
	}
	for _, r := range username {
		if unicode.IsSpace(r) || unicode.IsControl(r) || strings.ContainsRune(usernameProhibited, r) {
			return &apiError{http.StatusBadRequest, map[string]any{
				"field": "username", "errorMessage": "error-username-invalid-character", "params": []any{"username", username}}}
		}
	}
	return nil
}
