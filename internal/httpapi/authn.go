package httpapi

import (
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/auth"
)

const principalKey = "ssodir.principal"

// RequireScope lets a request through only with a bearer token that a accepts and that
// grants scope and, on routes with :system and :tenant, access to that tenant.
func RequireScope(a *auth.Authenticator, scope string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			token, err := bearerToken(c.Request().Header.Get(echo.HeaderAuthorization))
			if err != nil {
				return err
			}
			p, err := a.Authenticate(c.Request().Context(), token)
			if err != nil {
				return err
			}
			if !p.HasScope(scope) {
				return apperr.Forbidden("the token lacks the scope " + scope)
			}
			names := c.ParamNames()
			if slices.Contains(names, "system") && slices.Contains(names, "tenant") &&
				!p.AllowsTenant(c.Param("system"), c.Param("tenant")) {
				return apperr.Forbidden("the token does not grant access to this tenant")
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

// bearerToken extracts the token of an "Authorization: Bearer <token>" header; the scheme
// is case-insensitive (RFC 9110).
func bearerToken(header string) (string, error) {
	if header == "" {
		return "", apperr.Unauthenticated("missing Authorization header")
	}
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || strings.ContainsAny(token, " \t") {
		return "", apperr.Unauthenticated("Authorization header must be \"Bearer <token>\"")
	}
	return token, nil
}

// PrincipalFrom is the caller that RequireScope authenticated; the zero Principal, with no
// scopes and no tenants, on a route without it.
func PrincipalFrom(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

// BearerToken is the token of a request's "Authorization: Bearer <token>" header, for
// ports that authenticate in their own way (SCIM tokens); unauthenticated without one.
func BearerToken(c echo.Context) (string, error) {
	return bearerToken(c.Request().Header.Get(echo.HeaderAuthorization))
}
