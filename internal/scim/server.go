package scim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
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
	"github.com/ssodir/ssodir/internal/scimtoken"
)

// Store is the write model: the command handlers' store, plus the consistent reads this
// port answers from (so that a provider reads its own writes at once).
type Store interface {
	commands.Store
	FindByID(ctx context.Context, t commands.Tenant, kind events.AggregateKind, id string) (key string, ok bool, err error)
	FindByIDs(ctx context.Context, t commands.Tenant, kind events.AggregateKind, ids []string) (map[string]string, error)
	FindByExternalID(ctx context.Context, t commands.Tenant, kind events.AggregateKind, ext string) ([]commands.Lookup, error)
	ListIDs(ctx context.Context, t commands.Tenant, kind events.AggregateKind, after string, fn func(commands.Lookup) bool) error
	PageIDs(ctx context.Context, t commands.Tenant, kind events.AggregateKind, after string, n int) ([]commands.Lookup, bool, error)
	UserByEmail(ctx context.Context, t commands.Tenant, email string) (username string, ok bool, err error)
	LoadUsers(ctx context.Context, t commands.Tenant, usernames []string) (map[string]commands.UserAggregate, error)
	LoadGroups(ctx context.Context, t commands.Tenant, keys []string) (map[string]commands.GroupAggregate, error)
	GroupMembersUpTo(ctx context.Context, t commands.Tenant, key string, n int) ([]commands.Membership, bool, error)
	// LiveCount is the count of live users (or groups), when the tenant's count is known;
	// CountLive counts them by their lookups, and makes the count known.
	LiveCount(ctx context.Context, t commands.Tenant, kind events.AggregateKind) (n int, known bool, err error)
	CountLive(ctx context.Context, t commands.Tenant, kind events.AggregateKind) (int, error)
	// PageAt is the page at position skip (0 for the first) of n at most, found by the
	// counts of the blocks of the ids' order, and the total.
	PageAt(ctx context.Context, t commands.Tenant, kind events.AggregateKind, skip, n int) (page []commands.Lookup, total int, more bool, err error)
	// PutPageMark and PageMark keep index walks' bookmarks for other processes.
	PutPageMark(ctx context.Context, t commands.Tenant, kind events.AggregateKind, index int, after string, total int, until time.Time) error
	PageMark(ctx context.Context, t commands.Tenant, kind events.AggregateKind, index int) (after string, total int, ok bool, err error)
}

// Deps are what the SCIM port needs. Every field but Log is required.
type Deps struct {
	// Auth verifies OIDC JWTs (and the development token); ScimTokens verifies SCIM tokens.
	Auth       *auth.Authenticator
	ScimTokens auth.ScimTokens
	Store      Store
	Secrets    commands.Encrypter
	// Gate refuses commands on tenants still provisioning.
	Gate  *commands.TenantGate
	Clock commands.Clock
	Log   *zap.Logger
	// Limits, when not zero, replace MaxFilterScan and MaxInlineMembers (tests).
	Limits Limits
}

// Limits bound what one SCIM request may read and answer.
type Limits struct {
	FilterScan    int
	InlineMembers int
}

type server struct {
	auth   *auth.Authenticator
	tokens auth.ScimTokens
	store  Store
	gate   *commands.TenantGate
	limits Limits
	now    func() time.Time
	// marks map index pages onto the ids they start after (listindex.go).
	marks *bookmarks

	createUser     commands.CreateUserHandler
	updateUser     commands.UpdateUserHandler
	renameUser     commands.RenameUserHandler
	renameGroup    commands.RenameGroupHandler
	changePassword commands.ChangePasswordHandler
	setActive      commands.SetUserActiveHandler
	deleteUser     commands.DeleteUserHandler
	createGroup    commands.CreateGroupHandler
	updateGroup    commands.UpdateGroupHandler
	deleteGroup    commands.DeleteGroupHandler
	changeMembersH commands.ChangeMembersHandler
}

// BasePath is where a tenant's SCIM service is: /scim/v2/{system}/{tenant}.
const BasePath = "/scim/v2/:system/:tenant"

// Register adds the SCIM routes to e.
func Register(e *echo.Echo, d Deps) {
	if d.Auth == nil || d.ScimTokens.Store == nil || d.ScimTokens.Hasher == nil || d.Store == nil || d.Secrets == nil || d.Gate == nil || d.Clock == nil {
		panic("scim: every dependency but Log is required")
	}
	if d.Limits.FilterScan <= 0 {
		d.Limits.FilterScan = MaxFilterScan
	}
	if d.Limits.InlineMembers <= 0 {
		d.Limits.InlineMembers = MaxInlineMembers
	}
	cd := commands.Deps{Store: d.Store, Now: d.Clock, NewID: uuid.NewString, Log: d.Log}
	s := &server{
		auth: d.Auth, tokens: d.ScimTokens, store: d.Store, gate: d.Gate, limits: d.Limits,
		now: d.Clock, marks: &bookmarks{},
		createUser:     commands.NewCreateUserHandler(cd, d.Secrets),
		updateUser:     commands.NewUpdateUserHandler(cd),
		renameUser:     commands.NewRenameUserHandler(cd),
		renameGroup:    commands.NewRenameGroupHandler(cd),
		changePassword: commands.NewChangePasswordHandler(cd, d.Secrets),
		setActive:      commands.NewSetUserActiveHandler(cd),
		deleteUser:     commands.NewDeleteUserHandler(cd),
		createGroup:    commands.NewCreateGroupHandler(cd),
		updateGroup:    commands.NewUpdateGroupHandler(cd),
		deleteGroup:    commands.NewDeleteGroupHandler(cd),
		changeMembersH: commands.NewChangeMembersHandler(cd),
	}
	mw := []echo.MiddlewareFunc{httpapi.UseProblemWriter(writeError), s.authenticate}
	// Every method is routed here, so that a wrong one gets SCIM's 405, not echo's.
	route := func(path string, handlers map[string]func(*call) error) {
		e.Any(BasePath+path, s.dispatch(handlers), mw...)
	}
	route("/Users", map[string]func(*call) error{http.MethodGet: s.listUsers, http.MethodPost: s.postUser})
	route("/Users/:id", map[string]func(*call) error{http.MethodGet: s.getUser, http.MethodPut: s.putUser,
		http.MethodPatch: s.patchUser, http.MethodDelete: s.deleteUserRoute, http.MethodPost: s.searchUsers})
	route("/Groups", map[string]func(*call) error{http.MethodGet: s.listGroups, http.MethodPost: s.postGroup})
	route("/Groups/:id", map[string]func(*call) error{http.MethodGet: s.getGroup, http.MethodPut: s.putGroup,
		http.MethodPatch: s.patchGroup, http.MethodDelete: s.deleteGroupRoute, http.MethodPost: s.searchGroups})
	route("/ServiceProviderConfig", map[string]func(*call) error{http.MethodGet: s.serviceProviderConfig})
	route("/ResourceTypes", map[string]func(*call) error{http.MethodGet: s.resourceTypes})
	route("/ResourceTypes/:id", map[string]func(*call) error{http.MethodGet: s.resourceType})
	route("/Schemas", map[string]func(*call) error{http.MethodGet: s.schemas})
	route("/Schemas/:id", map[string]func(*call) error{http.MethodGet: s.schema})
	e.Any(BasePath, notFound, mw...)
	e.Any(BasePath+"/*", notFound, mw...)
}

func notFound(c echo.Context) error {
	return apperr.NotFound("SCIM endpoint")
}

// call is one SCIM request: its tenant, caller and base URL.
type call struct {
	c      echo.Context
	ctx    context.Context
	tenant commands.Tenant
	who    auth.Principal
	// base is the tenant's SCIM base URL, for locations: scheme, host and path.
	base string
}

func (s *server) dispatch(handlers map[string]func(*call) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		h, ok := handlers[c.Request().Method]
		if !ok {
			var allow []string
			for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				if _, ok := handlers[m]; ok {
					allow = append(allow, m)
				}
			}
			c.Response().Header().Set(echo.HeaderAllow, strings.Join(allow, ", "))
			return &apperr.Error{Kind: apperr.KindMethodNotAllowed, Code: apperr.CodeMethodNotAllowed,
				Message: "this endpoint does not accept " + c.Request().Method}
		}
		t := commands.Tenant{System: c.Param("system"), ID: c.Param("tenant")}
		scheme := c.Scheme()
		if p := c.Request().Header.Get(echo.HeaderXForwardedProto); p == "https" || p == "http" {
			scheme = p
		}
		cl := &call{c: c, ctx: c.Request().Context(), tenant: t, who: principalOf(c),
			base: scheme + "://" + c.Request().Host + "/scim/v2/" + t.System + "/" + t.ID}
		return h(cl)
	}
}

const principalKey = "scim.principal"

func principalOf(c echo.Context) auth.Principal {
	p, _ := c.Get(principalKey).(auth.Principal)
	return p
}

// authenticate accepts the tenant's SCIM tokens, and JWTs (or the development token)
// that grant directory:write and directory:read on the tenant.
func (s *server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		system, tenant := c.Param("system"), c.Param("tenant")
		if !identity.ValidID(system) || !identity.ValidID(tenant) {
			return apperr.NotFound("tenant")
		}
		token, err := httpapi.BearerToken(c)
		if err != nil {
			return err
		}
		var p auth.Principal
		if _, ok := scimtoken.ID(token); ok {
			// Checked before anything else is read: a request with a bad token costs the
			// read of its own row and learns nothing but 401.
			if p, err = s.tokens.Authenticate(c.Request().Context(), system, tenant, token); err != nil {
				return err
			}
		} else if scimtoken.Is(token) {
			return apperr.Unauthenticated("invalid SCIM token")
		} else {
			if p, err = s.auth.Authenticate(c.Request().Context(), token); err != nil {
				return err
			}
			if !p.HasScope(auth.ScopeWrite) || !p.HasScope(auth.ScopeRead) {
				return apperr.Forbidden("a SCIM client needs the scopes " + auth.ScopeWrite + " and " + auth.ScopeRead)
			}
		}
		if !p.AllowsTenant(system, tenant) {
			return apperr.Forbidden("the token does not grant access to this tenant")
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// meta is who sends the commands of a request; ifMatch is the version they insist on.
func (cl *call) meta(ifMatch *int64) commands.Meta {
	return commands.Meta{Actor: cl.who.Subject, CommandID: uuid.NewString(),
		CorrelationID: cl.c.Response().Header().Get(echo.HeaderXRequestID), IfMatch: ifMatch}
}

// ifMatch is the request's If-Match as a version, nil when it sent none (or `*`).
func (cl *call) ifMatch() (*int64, error) {
	v := strings.TrimSpace(cl.c.Request().Header.Get("If-Match"))
	if v == "" || v == "*" {
		return nil, nil
	}
	v = strings.TrimPrefix(v, "W/")
	if uq, err := strconv.Unquote(v); err == nil && strings.HasPrefix(v, `"`) {
		v = uq
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return nil, badRequest(typeInvalidValue, `If-Match must be an entity tag W/"<version>"`)
	}
	return &n, nil
}

// readDoc reads a request body: a JSON object, as application/scim+json,
// application/json, or without a Content-Type (Okta's own tests send a create without
// one); its attribute names are lower-cased.
func (cl *call) readDoc() (map[string]any, []byte, error) {
	if ct := cl.c.Request().Header.Get(echo.HeaderContentType); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || (mt != MediaType && mt != echo.MIMEApplicationJSON) {
			return nil, nil, &apperr.Error{Kind: apperr.KindUnsupportedMedia, Code: apperr.CodeUnsupportedMediaType,
				Message: "the body must be application/scim+json or application/json"}
		}
		for name, value := range params {
			if name != "charset" || !strings.EqualFold(value, "utf-8") {
				return nil, nil, &apperr.Error{Kind: apperr.KindUnsupportedMedia, Code: apperr.CodeUnsupportedMediaType,
					Message: "the body's only parameter may be charset=utf-8"}
			}
		}
	}
	var data []byte
	if body := cl.c.Request().Body; body != nil {
		var err error
		data, err = io.ReadAll(io.LimitReader(body, httpapi.MaxBodyBytes+1))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) || len(data) > httpapi.MaxBodyBytes {
			return nil, nil, &apperr.Error{Kind: apperr.KindTooLarge, Code: apperr.CodePayloadTooLarge,
				Message: fmt.Sprintf("the body is larger than %d bytes", httpapi.MaxBodyBytes)}
		}
		if err != nil {
			return nil, nil, badRequest(typeInvalidSyntax, "the body could not be read")
		}
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, nil, badRequest(typeInvalidSyntax, "the body is not JSON")
	}
	m, ok := lowerKeys(v).(map[string]any)
	if !ok {
		return nil, nil, badRequest(typeInvalidSyntax, "the body must be a JSON object")
	}
	return m, data, nil
}

// write answers with a resource (or a list) as application/scim+json.
func (cl *call) write(status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode SCIM answer: %w", err)
	}
	return cl.c.Blob(status, MediaType, b)
}

// writeResource answers with a resource, its ETag, and for a create its Location.
func (cl *call) writeResource(status int, res map[string]any, version int64, proj projection) error {
	h := cl.c.Response().Header()
	h.Set("ETag", etag(version))
	if cl.c.Request().Method == http.MethodGet && noneMatch(cl.c.Request().Header.Values("If-None-Match"), version) {
		// RFC 7644 3.14: the client's copy is current.
		return cl.c.NoContent(http.StatusNotModified)
	}
	if status == http.StatusCreated {
		if m, ok := res["meta"].(map[string]any); ok {
			h.Set(echo.HeaderLocation, m["location"].(string))
		}
	}
	return cl.write(status, proj.apply(res))
}

// noneMatch reports whether an If-None-Match header names the resource's version (or is
// "*"), weakly compared: a GET then answers 304.
func noneMatch(headers []string, version int64) bool {
	for _, h := range headers {
		for _, tag := range strings.Split(h, ",") {
			tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
			if tag == "*" || tag == strings.TrimPrefix(etag(version), "W/") {
				return true
			}
		}
	}
	return false
}

// noContent answers 204 (with the resource's ETag when version > 0).
func (cl *call) noContent(version int64) error {
	if version > 0 {
		cl.c.Response().Header().Set("ETag", etag(version))
	}
	return cl.c.NoContent(http.StatusNoContent)
}

// writeError answers an error in SCIM's Error schema (RFC 7644 section 3.12).
func writeError(c echo.Context, status int, e *apperr.Error) error {
	body := map[string]any{"schemas": []string{URNError}, "status": strconv.Itoa(status), "detail": detailOf(e)}
	if t := scimTypeOf(e); t != "" && (status == http.StatusBadRequest || status == http.StatusConflict) {
		body["scimType"] = t
	}
	b, _ := json.Marshal(body)
	return c.Blob(status, MediaType, b)
}

// scimNames are the SCIM names of the fields the commands validate.
var scimNames = map[string]string{
	"username": "userName", "email": "emails", "first_name": "name.givenName", "last_name": "name.familyName",
	"password": "password", "name": "displayName", "attributes." + identity.ExternalIDAttribute: "externalId",
}

// detailOf is an error's message with the fields at fault, by their SCIM names.
func detailOf(e *apperr.Error) string {
	if len(e.Fields) == 0 {
		return e.Message
	}
	parts := make([]string, 0, len(e.Fields))
	for _, f := range e.Fields {
		name, ok := scimNames[f.Field]
		if !ok {
			name = f.Field
			if rest, isAttr := strings.CutPrefix(f.Field, "attributes."); isAttr {
				name = rest
			}
		}
		parts = append(parts, name+": "+f.Message)
	}
	return e.Message + ": " + strings.Join(parts, "; ")
}
