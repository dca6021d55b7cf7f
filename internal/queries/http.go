package queries

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/httpapi"
)

// Prefix is the path of a tenant; every query route but the tenant's own and the list of
// tenants is below it.
const Prefix = "/v1/systems/:system/tenants/:tenant"

// TenantsPath is the list of a system's tenants.
const TenantsPath = "/v1/systems/:system/tenants"

// HeaderMinVersion asks GET user / GET group to wait for the view to reach a version.
const HeaderMinVersion = "X-Min-Version"

// Handlers serve the query API's routes. Errors are returned to echo's one error handler.
type Handlers struct{ svc *Service }

// NewHandlers serves svc over HTTP.
func NewHandlers(svc *Service) *Handlers { return &Handlers{svc: svc} }

// Register adds the query routes to e; mw (authentication and the tenant check) runs on
// each of them after routing, so that it sees :system and :tenant. Unknown paths stay
// plain 404s and wrong methods 405s.
func (h *Handlers) Register(e *echo.Echo, mw ...echo.MiddlewareFunc) {
	e.GET(TenantsPath, h.tenantList, mw...)
	e.GET(Prefix, h.tenant, mw...)
	e.GET(Prefix+"/users", h.users, mw...)
	e.GET(Prefix+"/users/:username", h.user, mw...)
	e.GET(Prefix+"/users/:username/groups", h.userGroups, mw...)
	e.GET(Prefix+"/groups", h.groups, mw...)
	e.GET(Prefix+"/groups/:name", h.group, mw...)
	e.GET(Prefix+"/groups/:name/members", h.groupMembers, mw...)
	e.GET(Prefix+"/activity", h.activity, mw...)
	e.GET(Prefix+"/erasures/:erasure_id", h.erasure, mw...)
	e.GET(Prefix+"/events", h.events, mw...)
	e.GET(Prefix+"/access-report", h.accessReport, mw...)
}

func (h *Handlers) erasure(c echo.Context) error {
	if err := noQuery(c); err != nil {
		return err
	}
	id := c.Param("erasure_id")
	system, tenant := tenantOf(c)
	e, err := h.svc.Erasure(c.Request().Context(), system, tenant, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

// tenantOf is the request's system and tenant. Ids that cannot exist are answered 404 by
// the service, like any unknown tenant. httpapi has decoded every path parameter before
// a handler runs.
func tenantOf(c echo.Context) (system, tenant string) {
	return c.Param("system"), c.Param("tenant")
}

// noQuery refuses query parameters on routes that take none.
func noQuery(c echo.Context) error {
	_, err := ParseQuery(c.Request().URL.RawQuery)
	return err
}

func (h *Handlers) tenant(c echo.Context) error {
	if err := noQuery(c); err != nil {
		return err
	}
	system, tenant := tenantOf(c)
	t, err := h.svc.Tenant(c.Request().Context(), system, tenant)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

// tenantList lists the tenants of a system that the caller may read: mw checks the scope
// (the path names no tenant to check), and the principal it authenticated filters the list.
func (h *Handlers) tenantList(c echo.Context) error {
	p, err := ParseListQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	system := c.Param("system")
	page, err := h.svc.Tenants(c.Request().Context(), system, p, httpapi.PrincipalFrom(c).AllowsTenant)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (h *Handlers) user(c echo.Context) error {
	if err := noQuery(c); err != nil {
		return err
	}
	minVersion, err := ParseMinVersion(c.Request().Header.Values(HeaderMinVersion))
	if err != nil {
		return err
	}
	username := c.Param("username")
	system, tenant := tenantOf(c)
	u, err := h.svc.User(c.Request().Context(), system, tenant, username, minVersion)
	if err != nil {
		return err
	}
	setETag(c, u.Version)
	return c.JSON(http.StatusOK, u)
}

func (h *Handlers) group(c echo.Context) error {
	if err := noQuery(c); err != nil {
		return err
	}
	minVersion, err := ParseMinVersion(c.Request().Header.Values(HeaderMinVersion))
	if err != nil {
		return err
	}
	name := c.Param("name")
	system, tenant := tenantOf(c)
	g, err := h.svc.Group(c.Request().Context(), system, tenant, name, minVersion)
	if err != nil {
		return err
	}
	setETag(c, g.Version)
	return c.JSON(http.StatusOK, g)
}

func setETag(c echo.Context, version int64) {
	c.Response().Header().Set("ETag", `"`+strconv.FormatInt(version, 10)+`"`)
}

func (h *Handlers) users(c echo.Context) error {
	q, err := ParseUsersQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	system, tenant := tenantOf(c)
	page, err := h.svc.Users(c.Request().Context(), system, tenant, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (h *Handlers) userGroups(c echo.Context) error {
	if handled, err := asOfRoute(c, h.svc.UserGroupsAsOf, "username"); handled {
		return err
	}
	p, err := ParseListQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	username := c.Param("username")
	system, tenant := tenantOf(c)
	page, err := h.svc.UserGroups(c.Request().Context(), system, tenant, username, p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (h *Handlers) groups(c echo.Context) error {
	p, err := ParseListQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	system, tenant := tenantOf(c)
	page, err := h.svc.Groups(c.Request().Context(), system, tenant, p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (h *Handlers) groupMembers(c echo.Context) error {
	if handled, err := asOfRoute(c, h.svc.GroupMembersAsOf, "name"); handled {
		return err
	}
	p, err := ParseListQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	name := c.Param("name")
	system, tenant := tenantOf(c)
	page, err := h.svc.GroupMembers(c.Request().Context(), system, tenant, name, p)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}

func (h *Handlers) activity(c echo.Context) error {
	q, err := ParseActivityQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	system, tenant := tenantOf(c)
	page, err := h.svc.Activity(c.Request().Context(), system, tenant, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}
