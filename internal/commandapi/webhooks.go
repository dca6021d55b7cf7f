package commandapi

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/auth"
	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/objects"
	"github.com/ssodir/ssodir/internal/queries"
	"github.com/ssodir/ssodir/internal/webhooks"
)

// Webhook limits.
const (
	maxWebhooksPerTenant  = 25
	maxWebhookDescription = 500
	maxWebhookTypes       = 64
	defaultDeliveries     = 50
	maxDeliveries         = 200
)

// webhookRoutes serves API.md's webhooks (tenants:admin).
type webhookRoutes struct {
	store   *webhooks.Store
	policy  webhooks.Policy
	tenants commands.TenantStore
	known   *events.Registry
}

func registerWebhooks(e *echo.Echo, d Deps) {
	if d.Webhooks == nil {
		return
	}
	w := &webhookRoutes{store: d.Webhooks, policy: d.WebhookPolicy, tenants: d.Tenants, known: events.NewRegistry()}
	admin := httpapi.RequireScope(d.Auth, auth.ScopeTenantsAdmin)
	const base = "/v1/systems/:system/tenants/:tenant/webhooks"
	e.POST(base, w.create, admin)
	e.GET(base, w.list, admin)
	e.GET(base+"/:id", w.get, admin)
	e.DELETE(base+"/:id", w.delete, admin)
	e.GET(base+"/:id/deliveries", w.deliveries, admin)
	e.POST(base+"/:id/replay", w.replay, admin)
	e.POST(base+"/:id/rotate-secret", w.rotate, admin)
}

type webhookBody struct {
	URL         string   `json:"url"`
	Types       []string `json:"types"`
	Description string   `json:"description"`
}

func (w *webhookRoutes) create(c echo.Context) error {
	system, tenant, err := tenantParams(c)
	if err != nil {
		return err
	}
	var b webhookBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var p apperr.Fields
	u, uerr := w.policy.CheckURL(ctx, b.URL)
	if uerr != nil {
		p.Add("url", uerr.Error())
	}
	seen := map[string]bool{}
	for _, t := range b.Types {
		if !w.known.Known(events.Type(t)) {
			p.Add("types", "holds "+strconv.Quote(t)+", which is not an event name (e.g. user.created)")
		} else if seen[t] {
			p.Add("types", "holds "+strconv.Quote(t)+" twice")
		}
		seen[t] = true
	}
	if len(b.Types) > maxWebhookTypes {
		p.Add("types", "holds too many names")
	}
	if utf8.RuneCountInString(b.Description) > maxWebhookDescription || !utf8.ValidString(b.Description) {
		p.Add("description", "must be at most 500 characters")
	}
	if err := p.Err("The webhook is not valid"); err != nil {
		return err
	}
	if _, err := w.tenants.GetTenant(ctx, system, tenant); err != nil {
		return err
	}
	existing, err := w.store.List(ctx, system, tenant)
	if err != nil {
		return apperr.Unavailable(err, time.Second)
	}
	if len(existing) >= maxWebhooksPerTenant {
		return apperr.InvalidField("url", "the tenant has "+strconv.Itoa(maxWebhooksPerTenant)+" webhooks, the most it may")
	}
	e, secret, err := w.store.Create(ctx, webhooks.Endpoint{System: system, Tenant: tenant, ID: uuid.NewString(), URL: u.String(),
		Types: b.Types, Description: b.Description, CreatedBy: httpapi.PrincipalFrom(c).Subject})
	if err != nil {
		return apperr.Unavailable(err, time.Second)
	}
	out := webhookJSON(e)
	out.Secret = secret
	c.Response().Header().Set(echo.HeaderLocation, "/v1/systems/"+system+"/tenants/"+tenant+"/webhooks/"+e.ID)
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusCreated, out)
}

func (w *webhookRoutes) list(c echo.Context) error {
	system, tenant, err := tenantParams(c)
	if err != nil {
		return err
	}
	if err := noQuery(c); err != nil {
		return err
	}
	eps, err := w.store.List(c.Request().Context(), system, tenant)
	if err != nil {
		return apperr.Unavailable(err, time.Second)
	}
	out := objects.WebhookList{Items: make([]objects.Webhook, 0, len(eps))}
	for _, e := range eps {
		out.Items = append(out.Items, webhookJSON(e))
	}
	return c.JSON(http.StatusOK, out)
}

// endpoint reads the route's endpoint: 404 for an id that is not one of the tenant's.
func (w *webhookRoutes) endpoint(c echo.Context) (webhooks.Endpoint, error) {
	system, tenant, err := tenantParams(c)
	if err != nil {
		return webhooks.Endpoint{}, err
	}
	id := c.Param("id")
	if _, err := uuid.Parse(id); err != nil {
		return webhooks.Endpoint{}, apperr.NotFound("webhook")
	}
	e, err := w.store.Get(c.Request().Context(), system, tenant, id)
	return e, storeErr(err)
}

func storeErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, webhooks.ErrNotFound):
		return apperr.NotFound("webhook")
	case webhooks.ErrConcurrent(err):
		return apperr.Unavailable(err, time.Second)
	default:
		return apperr.Unavailable(err, time.Second)
	}
}

func (w *webhookRoutes) get(c echo.Context) error {
	e, err := w.endpoint(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, webhookJSON(e))
}

func (w *webhookRoutes) delete(c echo.Context) error {
	e, err := w.endpoint(c)
	if err != nil {
		return err
	}
	if err := storeErr(w.store.Delete(c.Request().Context(), e.System, e.Tenant, e.ID)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (w *webhookRoutes) deliveries(c echo.Context) error {
	e, err := w.endpoint(c)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(c.Request().URL.RawQuery)
	if err != nil {
		return apperr.Invalid("The query string is malformed")
	}
	limit := defaultDeliveries
	var p apperr.Fields
	for name, vs := range q {
		switch {
		case len(vs) != 1:
			p.Add(name, "must be given once")
		case name == "limit":
			n, err := strconv.Atoi(vs[0])
			if err != nil || n < 1 || n > maxDeliveries {
				p.Add("limit", "must be an integer from 1 to 200")
			}
			limit = n
		case name == "after":
		default:
			p.Add(name, "is not a parameter of this list")
		}
	}
	if err := p.Err("The query is not valid"); err != nil {
		return err
	}
	ds, next, err := w.store.Deliveries(c.Request().Context(), e.System, e.Tenant, e.ID, q.Get("after"), limit)
	if errors.Is(err, webhooks.ErrBadPage) {
		return apperr.InvalidField("after", "is malformed")
	}
	if err != nil {
		return apperr.Unavailable(err, time.Second)
	}
	out := objects.WebhookDeliveryList{Items: make([]objects.WebhookDelivery, 0, len(ds)), NextCursor: next}
	for _, d := range ds {
		out.Items = append(out.Items, objects.WebhookDelivery{EventID: d.EventID, Type: d.Type, Subject: d.Subject,
			Attempt: d.Attempt, Status: d.Status, ResponseStatus: d.ResponseStatus, Error: d.Error,
			At: objects.Timestamp(d.At), NextAttempt: optTime(d.NextAttempt)})
	}
	return c.JSON(http.StatusOK, out)
}

type replayBody struct {
	// After is a next_cursor of GET /events; absent: go on from where the endpoint stands.
	After *string `json:"after"`
}

func (w *webhookRoutes) replay(c echo.Context) error {
	e, err := w.endpoint(c)
	if err != nil {
		return err
	}
	var b replayBody
	if c.Request().ContentLength != 0 {
		if err := httpapi.DecodeJSON(c, &b); err != nil {
			return err
		}
	}
	var from *changefeed.Position
	if b.After != nil {
		p, err := queries.EventsCursorPosition(*b.After, e.System, e.Tenant, "after")
		if err != nil {
			return err
		}
		from = &p
	}
	e, err = w.store.Replay(c.Request().Context(), e.System, e.Tenant, e.ID, from)
	if err != nil {
		return storeErr(err)
	}
	return c.JSON(http.StatusOK, webhookJSON(e))
}

func (w *webhookRoutes) rotate(c echo.Context) error {
	e, err := w.endpoint(c)
	if err != nil {
		return err
	}
	e, secret, err := w.store.RotateSecret(c.Request().Context(), e.System, e.Tenant, e.ID)
	if err != nil {
		return storeErr(err)
	}
	out := webhookJSON(e)
	out.Secret = secret
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.JSON(http.StatusOK, out)
}

func noQuery(c echo.Context) error {
	if c.Request().URL.RawQuery != "" {
		return apperr.Invalid("This list takes no parameters")
	}
	return nil
}

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := objects.Timestamp(t)
	return &s
}

func webhookJSON(e webhooks.Endpoint) objects.Webhook {
	out := objects.Webhook{ID: e.ID, URL: e.URL, Types: e.Types, Description: e.Description, State: e.State,
		CreatedAt: objects.Timestamp(e.CreatedAt), CreatedBy: e.CreatedBy, FailedAttempts: e.Attempt,
		FailingSince: optTime(e.FailingSince), NextAttempt: optTime(e.NextAttempt), LastError: e.LastError,
		LastStatus: e.LastStatus, DisabledAt: optTime(e.DisabledAt), LastDeliveredAt: optTime(e.DeliveredAt)}
	if out.Types == nil {
		out.Types = []string{}
	}
	if e.PreviousUntil.After(time.Now()) {
		out.PreviousSecretUntil = optTime(e.PreviousUntil)
	}
	return out
}
