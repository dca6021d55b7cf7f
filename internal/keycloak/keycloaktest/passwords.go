package keycloaktest

import (
	"fmt"
	"net/http"
	"slices"
)

// SetPasswordHistory sets the realm's passwordHistory(n) policy (0 removes it): a
// reset-password to the user's current password or one of the n-1 before it answers 400
// {"error": "invalidPasswordHistoryMessage", "error_description": ...}, as Keycloak's
// UserResource.resetPassword does with the policy's error (a ModelException turned into an
// ErrorResponseException).
func (s *Server) SetPasswordHistory(realmName string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	r.passwordHistory = max(n, 0)
	return nil
}

// checkPasswordHistory is the realm's passwordHistory policy on a new password for u.
func (r *realm) checkPasswordHistory(u *user, password string) *apiError {
	if r.passwordHistory <= 0 || u.passwordSets == 0 {
		return nil
	}
	recent := []string{u.password}
	if k := r.passwordHistory - 1; k > 0 {
		recent = append(recent, u.previous[max(len(u.previous)-k, 0):]...)
	}
	if !slices.Contains(recent, password) {
		return nil
	}
	return &apiError{http.StatusBadRequest, map[string]any{
		"error":             "invalidPasswordHistoryMessage",
		"error_description": fmt.Sprintf("Invalid password: must not be equal to any of last %d passwords.", r.passwordHistory),
	}}
}
