// Package commandapi is the command API's HTTP surface (API.md, "Command API"): it decodes
// requests, runs the command handlers of internal/commands, and renders their results,
// including replays of Idempotency-Key requests.
package commandapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/auth"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/objects"
	"github.com/ssodir/ssodir/internal/scimtoken"
	"github.com/ssodir/ssodir/internal/webhooks"
)

// Store is the write model plus what rendering a replay needs.
type Store interface {
	commands.Store
	LookupIdempotency(ctx context.Context, key string) (*commands.IdempotencyRecord, error)
	LoadRecord(ctx context.Context, t commands.Tenant, kind events.AggregateKind, key string, version int64) (events.Envelope, error)
}

// Deps are what the routes need.
type Deps struct {
	Auth    *auth.Authenticator
	Store   Store
	Tenants commands.TenantStore
	Secrets commands.SecretBox
	Clock   commands.Clock
	// Fingerprints keys the fingerprints of Idempotency-Key requests.
	Fingerprints *commands.Fingerprinter
	// TenantGate refuses commands on tenants still provisioning; nil makes one (the SCIM
	// port shares it, so that a tenant this API provisioned is known active there too).
	TenantGate *commands.TenantGate
	// ScimTokens keeps the tenants' SCIM tokens; ScimTokenHasher mints them.
	ScimTokens      commands.ScimTokenStore
	ScimTokenHasher *scimtoken.Hasher
	// Log receives what a command handler cannot return (nil: nothing).
	Log *zap.Logger
	// Context bounds the provisionings that go on in the background, and the resumption
	// of those a stopped process left (nil: context.Background, and no resumption).
	Context context.Context
	// ProvisionWait is how long POST /tenants waits for the tables before answering 202
	// (0: 5s); ProvisionResume how often tenants left provisioning are looked for (0: 30s;
	// negative: never, as in Lambda mode, where a scheduled task looks).
	ProvisionWait, ProvisionResume time.Duration
	// RealmCheck reads a realm's settings with the Keycloak settings PUT /keycloak was
	// given and says whether the realm lets usernames change ("allowed", "refused" or
	// "unknown"); nil: PUT /keycloak does not ask.
	RealmCheck func(ctx context.Context, k commands.KeycloakSettings) string
	// Webhooks keeps the tenants' webhooks (nil: no webhook routes); WebhookPolicy is what
	// their URLs may reach.
	Webhooks      *webhooks.Store
	WebhookPolicy webhooks.Policy
}

type api struct {
	store        Store
	tenants      commands.TenantStore
	fingerprints *commands.Fingerprinter

	createUser     commands.CreateUserHandler
	updateUser     commands.UpdateUserHandler
	changePassword commands.ChangePasswordHandler
	setActive      commands.SetUserActiveHandler
	deleteUser     commands.DeleteUserHandler
	renameUser     commands.RenameUserHandler
	renameGroup    commands.RenameGroupHandler
	eraseUser      commands.EraseUserHandler
	createGroup    commands.CreateGroupHandler
	updateGroup    commands.UpdateGroupHandler
	deleteGroup    commands.DeleteGroupHandler
	addMember      commands.AddMemberHandler
	removeMember   commands.RemoveMemberHandler
	changeMembers  commands.ChangeMembersHandler
	provision      *provisioner
	updateKeycloak commands.UpdateKeycloakHandler
	scimTokens     commands.ScimTokenHandlers
	realmCheck     func(ctx context.Context, k commands.KeycloakSettings) string
}

// Register adds the command API's routes to e. Every dependency is required.
func Register(e *echo.Echo, d Deps) {
	if d.Fingerprints == nil {
		// Without a key, fingerprints of password-bearing bodies could be brute-forced.
		panic("commandapi: Deps.Fingerprints is required")
	}
	if d.ScimTokens == nil || d.ScimTokenHasher == nil {
		panic("commandapi: Deps.ScimTokens and Deps.ScimTokenHasher are required")
	}
	cd := commands.Deps{Store: d.Store, Now: d.Clock, NewID: uuid.NewString, Log: d.Log}
	a := &api{
		store: d.Store, tenants: d.Tenants, fingerprints: d.Fingerprints,
		createUser:     commands.NewCreateUserHandler(cd, d.Secrets),
		updateUser:     commands.NewUpdateUserHandler(cd),
		changePassword: commands.NewChangePasswordHandler(cd, d.Secrets),
		setActive:      commands.NewSetUserActiveHandler(cd),
		deleteUser:     commands.NewDeleteUserHandler(cd),
		renameUser:     commands.NewRenameUserHandler(cd),
		renameGroup:    commands.NewRenameGroupHandler(cd),
		eraseUser:      commands.NewEraseUserHandler(cd),
		createGroup:    commands.NewCreateGroupHandler(cd),
		updateGroup:    commands.NewUpdateGroupHandler(cd),
		deleteGroup:    commands.NewDeleteGroupHandler(cd),
		addMember:      commands.NewAddMemberHandler(cd),
		removeMember:   commands.NewRemoveMemberHandler(cd),
		changeMembers:  commands.NewChangeMembersHandler(cd),
		provision:      newProvisioner(d),
		updateKeycloak: commands.NewUpdateKeycloakHandler(d.Tenants, d.Secrets, d.Clock),
		scimTokens:     commands.NewScimTokenHandlers(d.ScimTokens, d.Tenants, d.ScimTokenHasher, d.Clock, uuid.NewString),
		realmCheck:     d.RealmCheck,
	}
	admin := httpapi.RequireScope(d.Auth, auth.ScopeTenantsAdmin)
	e.POST("/v1/systems/:system/tenants", a.postTenant, admin)
	e.PUT("/v1/systems/:system/tenants/:tenant/keycloak", a.putKeycloak, admin)
	e.POST("/v1/systems/:system/tenants/:tenant/scim-tokens", a.postScimToken, admin)
	e.GET("/v1/systems/:system/tenants/:tenant/scim-tokens", a.listScimTokens, admin)
	e.DELETE("/v1/systems/:system/tenants/:tenant/scim-tokens/:id", a.deleteScimToken, admin)
	registerWebhooks(e, d)

	// The scope check is route middleware, not group middleware: echo serves a group's
	// middleware through catch-all routes, which would answer a wrong method with 404
	// instead of 405.
	write := httpapi.RequireScope(d.Auth, auth.ScopeWrite)
	g := e.Group("/v1/systems/:system/tenants/:tenant")
	g.POST("/users", a.postUser, write)
	g.PATCH("/users/:username", a.patchUser, write)
	g.POST("/users/:username/deactivate", a.deactivate, write)
	g.POST("/users/:username/activate", a.activate, write)
	g.PUT("/users/:username/password", a.putPassword, write)
	g.DELETE("/users/:username", a.deleteUserRoute, write)
	g.POST("/users/:username/rename", a.postRenameUser, write)
	g.POST("/groups", a.postGroup, write)
	g.PATCH("/groups/:name", a.patchGroup, write)
	g.DELETE("/groups/:name", a.deleteGroupRoute, write)
	g.POST("/groups/:name/rename", a.postRenameGroup, write)
	g.PUT("/groups/:name/members/:username", a.putMember, write)
	g.DELETE("/groups/:name/members/:username", a.deleteMember, write)
	g.POST("/groups/:name/members", a.postMembers, write)
	// Erasing a person needs its own scope: directory:write does not imply it.
	g.POST("/users/:username/erase", a.postErase, httpapi.RequireScope(d.Auth, auth.ScopeErase))
}

// outcome is what a command produced, to render.
type outcome struct {
	kind    events.AggregateKind
	key     string
	version int64
	body    any
}

// request is one write request's parsed envelope.
type request struct {
	c            echo.Context
	fingerprints *commands.Fingerprinter
	tenant       commands.Tenant
	meta         commands.Meta
	status       int
	location     string
	raw          []byte
}

// begin reads the headers and the raw body every write shares.
func (a *api) begin(c echo.Context, status int) (*request, error) {
	t := commands.Tenant{System: c.Param("system"), ID: c.Param("tenant")}
	// A route with a tenant in its path needs a valid one, an empty one too (`tenants//users`).
	if slices.Contains(c.ParamNames(), "tenant") && (!identity.ValidID(t.System) || !identity.ValidID(t.ID)) {
		return nil, apperr.NotFound("tenant")
	}
	raw, err := readRaw(c)
	if err != nil {
		return nil, err
	}
	p := httpapi.PrincipalFrom(c)
	r := &request{c: c, fingerprints: a.fingerprints, tenant: t, status: status, raw: raw}
	r.meta = commands.Meta{Actor: p.Subject, CommandID: uuid.NewString(), CorrelationID: correlationID(c)}
	if r.meta.IfMatch, err = parseIfMatch(c.Request().Header.Get("If-Match")); err != nil {
		return nil, err
	}
	return r, nil
}

// withIdempotency reads the Idempotency-Key once the tenant scope is known.
func (r *request) withIdempotency(system, tenant string) error {
	key, ok, err := idempotencyKey(r.c)
	if !ok || err != nil {
		return err
	}
	r.meta.Idempotency = &commands.Idempotency{
		Key:      system + "/" + tenant + "/" + r.meta.Actor + "/" + key,
		Request:  r.fingerprints.Fingerprint(r.c.Request().Method, canonicalPath(r.c.Request().URL), r.raw),
		Status:   r.status,
		Location: r.location,
	}
	return nil
}

// canonicalPath is the request's path as its fingerprint knows it: decoded, then encoded
// the one way Go does, so that "/users/ann%40example.com" and "/users/ann@example.com" are
// the same request, as the routes see them (httpapi decodes every path parameter).
func canonicalPath(u *url.URL) string { return (&url.URL{Path: u.Path}).EscapedPath() }

// idempotencyKey is the request's Idempotency-Key; ok is false when it sent none.
func idempotencyKey(c echo.Context) (key string, ok bool, err error) {
	keys, ok := c.Request().Header["Idempotency-Key"]
	if !ok {
		return "", false, nil
	}
	if len(keys) != 1 || !validIdempotencyKey(keys[0]) {
		return "", true, apperr.InvalidField("Idempotency-Key", "must be 1–128 printable ASCII characters")
	}
	return keys[0], true, nil
}

func validIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > 128 {
		return false
	}
	for i := range len(k) {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// run executes a command once per Idempotency-Key and renders its outcome.
func (a *api) run(r *request, exec func(ctx context.Context) (outcome, error)) error {
	ctx := r.c.Request().Context()
	if err := r.withIdempotency(r.tenant.System, r.tenant.ID); err != nil {
		return err
	}
	// A key is not looked up before the command runs: the record is written in the
	// command's own transaction on the condition that the key is free, so a repeated
	// request fails there (ReplayError) or, when its command fails first, is recognised by
	// lostToSameKey. A first request, the common case, costs no extra read.
	if err := a.provision.ready(ctx, r.tenant); err != nil {
		return err
	}
	out, err := exec(ctx)
	var re *commands.ReplayError
	if errors.As(err, &re) {
		return a.replay(r, re.Record)
	}
	if err != nil {
		return a.lostToSameKey(r, err)
	}
	return a.render(r.c, r.status, r.location, r.meta.CommandID, out)
}

// lostToSameKey answers a command that failed: when a request with the same key took the
// key while this one was being decided (a client's retry racing its first try), this one
// gets that request's answer, as if it had come second; otherwise err.
func (a *api) lostToSameKey(r *request, err error) error {
	idem := r.meta.Idempotency
	if idem == nil || apperr.KindOf(err) == apperr.KindUnavailable {
		return err
	}
	rec, lookupErr := a.store.LookupIdempotency(r.c.Request().Context(), idem.Key)
	if lookupErr != nil || rec == nil {
		return err
	}
	if !idem.Request.Matches(rec.RequestHash) {
		return apperr.IdempotencyKeyReused()
	}
	return a.replay(r, *rec)
}

func (a *api) render(c echo.Context, status int, location, commandID string, out outcome) error {
	h := c.Response().Header()
	h.Set("ETag", strconv.Quote(strconv.FormatInt(out.version, 10)))
	if commandID != "" {
		h.Set("X-Command-Id", commandID)
	}
	if location != "" {
		h.Set(echo.HeaderLocation, location)
	}
	if out.body == nil || status == http.StatusNoContent {
		return c.NoContent(status)
	}
	return c.JSON(status, out.body)
}

// replay answers with what the first request with this key answered, rebuilt from the
// immutable record of the version it produced.
func (a *api) replay(r *request, rec commands.IdempotencyRecord) error {
	out := outcome{kind: rec.Kind, key: rec.Key, version: rec.Version}
	if rec.Status != http.StatusNoContent {
		body, err := a.recordedBody(r, rec)
		if err != nil {
			return err
		}
		out.body = body
	}
	return a.render(r.c, rec.Status, rec.Location, rec.CommandID, out)
}

// recordedBody is the object as the recorded version left it. When SSO_HISTORY_RETENTION
// has expired that record, the body the idempotency record kept answers; a record written
// before bodies were kept falls back to the current state if it is still that version.
// Otherwise the replay cannot be rebuilt and the client is told so (422, as for a key it
// cannot use) instead of being given another version's body.
func (a *api) recordedBody(r *request, rec commands.IdempotencyRecord) (any, error) {
	if rec.Kind == events.KindErasure {
		// An erase request's record names the erasure; its answer is rebuilt from that.
		return erasureAccepted(rec.Key), nil
	}
	ctx := r.c.Request().Context()
	env, err := a.store.LoadRecord(ctx, r.tenant, rec.Kind, rec.Key, rec.Version)
	if errors.Is(err, commands.ErrRecordGone) && len(rec.Body) > 0 {
		return json.RawMessage(rec.Body), nil
	}
	if errors.Is(err, commands.ErrRecordGone) {
		switch rec.Kind {
		case events.KindUser:
			if u, lerr := a.store.LoadUser(ctx, r.tenant, rec.Key); lerr == nil && u.Live() && u.State.Version == rec.Version {
				return objects.FromUser(u.State), nil
			}
		case events.KindGroup:
			if g, lerr := a.store.LoadGroup(ctx, r.tenant, rec.Key); lerr == nil && g.Live() && g.State.Version == rec.Version {
				return objects.FromGroup(g.State), nil
			}
		}
		return nil, &apperr.Error{Kind: apperr.KindUnprocessable, Code: apperr.CodeIdempotencyReused,
			Message: "the response to this Idempotency-Key has expired with the history; send the request with a new key"}
	}
	if err != nil {
		return nil, err
	}
	if u, ok := events.UserState(env.Payload); ok {
		return objects.FromUser(u), nil
	}
	if g, ok := events.GroupState(env.Payload); ok {
		return objects.FromGroup(g), nil
	}
	return nil, nil
}

func readRaw(c echo.Context) ([]byte, error) {
	body := c.Request().Body
	if body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, httpapi.MaxBodyBytes+1))
	if err != nil || len(data) > httpapi.MaxBodyBytes {
		return nil, &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodePayloadTooLarge, Message: "request body is larger than 64 KiB"}
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(data))
	return data, nil
}

// parseIfMatch accepts `"<version>"` (an entity tag), a bare number, or `*`.
func parseIfMatch(v string) (*int64, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "*" {
		return nil, nil
	}
	v = strings.TrimPrefix(v, "W/")
	if uq, err := strconv.Unquote(v); err == nil && strings.HasPrefix(v, `"`) {
		v = uq
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return nil, apperr.InvalidField("If-Match", `must be an entity tag "<version>"`)
	}
	return &n, nil
}

func correlationID(c echo.Context) string {
	for _, h := range []string{"X-Correlation-Id", echo.HeaderXRequestID} {
		v := c.Request().Header.Get(h)
		if v == "" {
			v = c.Response().Header().Get(h)
		}
		if v != "" && len(v) <= 128 && validIdempotencyKey(v) {
			return v
		}
	}
	return uuid.NewString()
}

func userLocation(t commands.Tenant, username string) string {
	return "/v1/systems/" + t.System + "/tenants/" + t.ID + "/users/" + url.PathEscape(username)
}

func groupLocation(t commands.Tenant, name string) string {
	return "/v1/systems/" + t.System + "/tenants/" + t.ID + "/groups/" + url.PathEscape(name)
}
