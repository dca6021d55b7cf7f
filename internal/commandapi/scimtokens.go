package commandapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/objects"
	"github.com/ssodir/ssodir/internal/scimtoken"
)

type scimTokenBody struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at"`
}

func tenantParams(c echo.Context) (system, tenant string, err error) {
	system, tenant = c.Param("system"), c.Param("tenant")
	if !identity.ValidID(system) || !identity.ValidID(tenant) {
		return "", "", apperr.NotFound("tenant")
	}
	return system, tenant, nil
}

// postScimToken makes a SCIM token; the answer is the only time its secret is shown.
func (a *api) postScimToken(c echo.Context) error {
	system, tenant, err := tenantParams(c)
	if err != nil {
		return err
	}
	var b scimTokenBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return err
	}
	rec, token, err := a.scimTokens.Create(c.Request().Context(),
		commands.CreateScimToken{System: system, Tenant: tenant, Name: b.Name, ExpiresAt: b.ExpiresAt}, httpapi.PrincipalFrom(c).Subject)
	if err != nil {
		return err
	}
	out := scimTokenJSON(rec)
	out.Token = token
	c.Response().Header().Set(echo.HeaderLocation, "/v1/systems/"+system+"/tenants/"+tenant+"/scim-tokens/"+rec.ID)
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusCreated, out)
}

func (a *api) listScimTokens(c echo.Context) error {
	system, tenant, err := tenantParams(c)
	if err != nil {
		return err
	}
	recs, err := a.scimTokens.List(c.Request().Context(), system, tenant)
	if err != nil {
		return err
	}
	out := objects.ScimTokenList{Items: make([]objects.ScimToken, 0, len(recs))}
	for _, r := range recs {
		out.Items = append(out.Items, scimTokenJSON(r))
	}
	return c.JSON(http.StatusOK, out)
}

func (a *api) deleteScimToken(c echo.Context) error {
	system, tenant, err := tenantParams(c)
	if err != nil {
		return err
	}
	if err := a.scimTokens.Revoke(c.Request().Context(), system, tenant, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func scimTokenJSON(r scimtoken.Record) objects.ScimToken {
	out := objects.ScimToken{ID: r.ID, Name: r.Name, CreatedAt: objects.Timestamp(r.CreatedAt), CreatedBy: r.CreatedBy}
	if !r.ExpiresAt.IsZero() {
		e := objects.Timestamp(r.ExpiresAt)
		out.ExpiresAt = &e
	}
	return out
}
