package commandapi

import (
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/objects"
)

type keycloakBody struct {
	URL          string `json:"url"`
	Realm        string `json:"realm"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	OnDelete     string `json:"on_delete"`
}

func (k *keycloakBody) settings() *commands.KeycloakSettings {
	if k == nil {
		return nil
	}
	return &commands.KeycloakSettings{URL: k.URL, Realm: k.Realm, ClientID: k.ClientID, ClientSecret: k.ClientSecret, OnDelete: k.OnDelete}
}

type provisionBody struct {
	TenantID string        `json:"tenant_id"`
	Keycloak *keycloakBody `json:"keycloak"`
}

// postTenant provisions a tenant; it is idempotent by nature (200 when it is there with the
// same settings), so an Idempotency-Key adds nothing and is checked but not recorded.
func (a *api) postTenant(c echo.Context) error {
	if _, _, err := idempotencyKey(c); err != nil {
		return err
	}
	var b provisionBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return err
	}
	system := c.Param("system")
	if !identity.ValidID(system) {
		return apperr.NotFound("system")
	}
	if !httpapi.PrincipalFrom(c).AllowsTenant(system, b.TenantID) {
		return apperr.Forbidden("the token does not grant access to this tenant")
	}
	rec, created, err := a.provision.Handle(c.Request().Context(), commands.ProvisionTenant{System: system, Tenant: b.TenantID, Keycloak: b.Keycloak.settings()})
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		c.Response().Header().Set(echo.HeaderLocation, "/v1/systems/"+system+"/tenants/"+rec.ID)
	}
	setTenantHeaders(c, rec)
	return c.JSON(status, toTenantJSON(rec))
}

func (a *api) putKeycloak(c echo.Context) error {
	system, tenant := c.Param("system"), c.Param("tenant")
	if !identity.ValidID(system) || !identity.ValidID(tenant) {
		return apperr.NotFound("tenant")
	}
	if _, _, err := idempotencyKey(c); err != nil {
		return err
	}
	var b keycloakBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return err
	}
	rec, err := a.updateKeycloak.Handle(c.Request().Context(), commands.UpdateKeycloak{System: system, Tenant: tenant, Keycloak: *b.settings()})
	if err != nil {
		return err
	}
	setTenantHeaders(c, rec)
	return c.JSON(http.StatusOK, toTenantJSON(rec))
}

func toTenantJSON(rec commands.TenantRecord) objects.Tenant {
	out := objects.Tenant{SystemID: rec.System, TenantID: rec.ID, Status: rec.Status,
		CreatedAt: objects.Timestamp(rec.CreatedAt), UpdatedAt: objects.Timestamp(rec.UpdatedAt)}
	if k := rec.Keycloak; k != nil {
		out.Keycloak = &objects.Keycloak{URL: k.URL, Realm: k.Realm, ClientID: k.ClientID, OnDelete: k.OnDelete}
	}
	return out
}

// setTenantHeaders adds what every successful write answers with: the row's version and
// an id for the command.
func setTenantHeaders(c echo.Context, rec commands.TenantRecord) {
	h := c.Response().Header()
	h.Set("ETag", strconv.Quote(strconv.FormatInt(rec.RowVersion, 10)))
	h.Set("X-Command-Id", uuid.NewString())
}
