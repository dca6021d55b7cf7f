package keycloaktest

import (
	"crypto/subtle"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// route is one operation of the Admin API (or the token endpoint); tmpl is the path
// template exactly as the OpenAPI description spells it, so requests can be checked
// against the operation's schema.
type route struct {
	method  string
	tmpl    string
	handler func(*Server, *call) *apiError
}

// routeSegments holds each route's template split into path segments, once.
var routeSegments = func() [][]string {
	out := make([][]string, len(routes))
	for i, rt := range routes {
		out[i] = strings.Split(strings.Trim(rt.tmpl, "/"), "/")
	}
	return out
}()

var routes = []route{
	{http.MethodPost, "/realms/{realm}/protocol/openid-connect/token", nil},
	{http.MethodGet, "/admin/realms/{realm}", (*Server).getRealm},
	{http.MethodGet, "/admin/realms/{realm}/users", (*Server).listUsers},
	{http.MethodPost, "/admin/realms/{realm}/users", (*Server).createUserAPI},
	{http.MethodGet, "/admin/realms/{realm}/users/count", (*Server).countUsers},
	{http.MethodGet, "/admin/realms/{realm}/users/{user-id}", (*Server).getUser},
	{http.MethodPut, "/admin/realms/{realm}/users/{user-id}", (*Server).putUser},
	{http.MethodDelete, "/admin/realms/{realm}/users/{user-id}", (*Server).deleteUserAPI},
	{http.MethodPut, "/admin/realms/{realm}/users/{user-id}/reset-password", (*Server).resetPassword},
	{http.MethodGet, "/admin/realms/{realm}/users/{user-id}/groups", (*Server).userGroups},
	{http.MethodPut, "/admin/realms/{realm}/users/{user-id}/groups/{groupId}", (*Server).joinGroup},
	{http.MethodDelete, "/admin/realms/{realm}/users/{user-id}/groups/{groupId}", (*Server).leaveGroup},
	{http.MethodGet, "/admin/realms/{realm}/groups", (*Server).listGroups},
	{http.MethodPost, "/admin/realms/{realm}/groups", (*Server).createGroupAPI},
	{http.MethodGet, "/admin/realms/{realm}/groups/count", (*Server).countGroups},
	{http.MethodGet, "/admin/realms/{realm}/groups/{group-id}", (*Server).getGroup},
	{http.MethodPut, "/admin/realms/{realm}/groups/{group-id}", (*Server).putGroup},
	{http.MethodDelete, "/admin/realms/{realm}/groups/{group-id}", (*Server).deleteGroupAPI},
	{http.MethodGet, "/admin/realms/{realm}/groups/{group-id}/members", (*Server).groupMembers},
}

// call is one request being handled, with the server lock held.
type call struct {
	w      http.ResponseWriter
	r      *http.Request
	body   []byte
	params map[string]string
	query  url.Values
	realm  *realm
}

func match(ts, ps []string) (map[string]string, bool) {
	if len(ts) != len(ps) {
		return nil, false
	}
	params := map[string]string{}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") {
			if ps[i] == "" {
				return nil, false
			}
			params[strings.Trim(t, "{}")] = ps[i]
			continue
		}
		if t != ps[i] {
			return nil, false
		}
	}
	return params, true
}

// find picks the route for a request; literal segments win over parameters, as in
// JAX-RS (users/count is not the user "count").
func find(method, path string) (*route, map[string]string, int) {
	var best *route
	var bestParams map[string]string
	pathMatched := false
	ps := strings.Split(strings.Trim(path, "/"), "/")
	for i := range routes {
		rt := &routes[i]
		params, ok := match(routeSegments[i], ps)
		if !ok {
			continue
		}
		pathMatched = true
		if rt.method != method {
			continue
		}
		if best == nil || len(params) < len(bestParams) {
			best, bestParams = rt, params
		}
	}
	switch {
	case best != nil:
		return best, bestParams, 0
	case pathMatched:
		return nil, nil, http.StatusMethodNotAllowed
	default:
		return nil, nil, http.StatusNotFound
	}
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	rt, params, status := find(r.Method, r.URL.Path)
	if rt == nil {
		writeJSON(w, status, map[string]string{"error": "RESTEASY003210: Could not find resource for full path: " + r.URL.Path})
		return
	}
	if rt.handler == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.token(w, r, body, params["realm"])
		return
	}
	c := &call{w: w, r: r, body: body, params: params, query: r.URL.Query()}
	s.mu.Lock()
	err := s.authorize(c)
	s.mu.Unlock()
	if err != nil {
		writeJSON(w, err.status, err.body)
		return
	}
	// The schema checks read only the immutable description, so they run outside the lock.
	if s.spec != nil {
		names := make([]string, 0, len(c.query))
		for k := range c.query {
			names = append(names, k)
		}
		if err := s.spec.checkQuery(rt.method, rt.tmpl, names); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "error_description": err.Error()})
			return
		}
		if err := s.spec.checkBody(rt.method, rt.tmpl, body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unknown_error", "error_description": err.Error()})
			return
		}
	}
	// The handler answers into a buffer, so the lock is not held while the answer
	// travels to the client.
	rec := httptest.NewRecorder()
	c.w = rec
	s.mu.Lock()
	if err := rt.handler(s, c); err != nil {
		writeJSON(rec, err.status, err.body)
	}
	s.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// authorize checks the bearer token; the caller holds s.mu.
func (s *Server) authorize(c *call) *apiError {
	unauthorized := &apiError{http.StatusUnauthorized, map[string]any{"error": "HTTP 401 Unauthorized"}}
	raw, ok := strings.CutPrefix(c.r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return unauthorized
	}
	tok, ok := s.tokens[raw]
	if !ok || !s.now().Before(tok.expires) {
		return unauthorized
	}
	name := c.params["realm"]
	if tok.realm != name {
		// A realm's service account may only manage its own realm.
		return &apiError{http.StatusForbidden, map[string]any{"error": "HTTP 403 Forbidden"}}
	}
	rl, ok := s.realms[name]
	if !ok {
		return notFound("Realm not found.")
	}
	c.realm = rl
	return nil
}

// token is the realm's token endpoint with the client credentials grant; the caller holds
// s.mu. Client authentication is accepted in the Authorization header (client_secret_basic)
// or in the form (client_secret_post), as Keycloak's default client authenticator does.
func (s *Server) token(w http.ResponseWriter, r *http.Request, body []byte, realmName string) {
	rl, ok := s.realms[realmName]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "Realm does not exist"})
		return
	}
	form, err := url.ParseQuery(string(body))
	if err != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request"})
		return
	}
	id, secret := form.Get("client_id"), form.Get("client_secret")
	if u, p, ok := r.BasicAuth(); ok {
		// RFC 6749 2.3.1: the id and secret are form-encoded before going into the header.
		id, _ = url.QueryUnescape(u)
		secret, _ = url.QueryUnescape(p)
	}
	if id != rl.clientID || subtle.ConstantTimeCompare([]byte(secret), []byte(rl.clientSecret)) != 1 {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized_client", "error_description": "Invalid client or Invalid client credentials"})
		return
	}
	if form.Get("grant_type") != "client_credentials" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unsupported_grant_type", "error_description": "Unsupported grant_type"})
		return
	}
	t := newToken()
	s.tokens[t] = issuedToken{realm: realmName, expires: s.now().Add(s.tokenLifetime)}
	s.tokensIssued++
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":       t,
		"expires_in":         int(math.Ceil(s.tokenLifetime.Seconds())),
		"refresh_expires_in": 0,
		"token_type":         "Bearer",
		"not-before-policy":  0,
		"scope":              "profile email",
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// --- representations as Keycloak writes them ---

type userJSON struct {
	ID                         string              `json:"id"`
	Username                   string              `json:"username"`
	FirstName                  string              `json:"firstName,omitempty"`
	LastName                   string              `json:"lastName,omitempty"`
	Email                      string              `json:"email,omitempty"`
	EmailVerified              bool                `json:"emailVerified"`
	Attributes                 map[string][]string `json:"attributes,omitempty"`
	CreatedTimestamp           int64               `json:"createdTimestamp"`
	Enabled                    bool                `json:"enabled"`
	Totp                       bool                `json:"totp"`
	DisableableCredentialTypes []string            `json:"disableableCredentialTypes"`
	RequiredActions            []string            `json:"requiredActions"`
	NotBefore                  int                 `json:"notBefore"`
	Access                     map[string]bool     `json:"access,omitempty"`
}

func userRep(u *user, brief bool) userJSON {
	out := userJSON{
		ID: u.id, Username: u.username, FirstName: u.firstName, LastName: u.lastName, Email: u.email,
		EmailVerified: u.emailVerified, CreatedTimestamp: u.created, Enabled: u.enabled,
		DisableableCredentialTypes: []string{}, RequiredActions: []string{},
	}
	if brief {
		return out
	}
	if len(u.attrs) > 0 {
		out.Attributes = cloneAttrs(u.attrs)
	}
	if len(u.requiredActions) > 0 {
		out.RequiredActions = slices.Clone(u.requiredActions)
	}
	out.Access = map[string]bool{"manage": true, "manageGroupMembership": true, "view": true, "mapRoles": true, "impersonate": false}
	return out
}

type groupJSON struct {
	ID            string              `json:"id"`
	Name          string              `json:"name"`
	Description   string              `json:"description,omitempty"`
	Path          string              `json:"path"`
	SubGroupCount int                 `json:"subGroupCount"`
	SubGroups     []groupJSON         `json:"subGroups"`
	Attributes    map[string][]string `json:"attributes,omitempty"`
	RealmRoles    []string            `json:"realmRoles,omitempty"`
	ClientRoles   map[string][]string `json:"clientRoles,omitempty"`
	Access        map[string]bool     `json:"access,omitempty"`
}

func groupRep(g *group, brief bool) groupJSON {
	out := groupJSON{ID: g.id, Name: g.name, Description: g.description, Path: g.path, SubGroupCount: g.subgroups, SubGroups: []groupJSON{}}
	if brief {
		return out
	}
	out.Attributes = cloneAttrs(g.attrs)
	out.RealmRoles = []string{}
	out.ClientRoles = map[string][]string{}
	out.Access = map[string]bool{"view": true, "manage": true, "manageMembership": true, "viewMembers": true, "manageMembers": true}
	return out
}

// --- query parameters ---

func (c *call) boolParam(name string, def bool) bool {
	v := c.query.Get(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return def
	}
	return b
}

// page reads first and max. A missing max is defMax; defMax < 0 means "everything", which
// is what Keycloak does for the group lists that document no default.
func (c *call) page(defMax int) (first, max int, err *apiError) {
	first, max = 0, defMax
	if v := c.query.Get("first"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil {
			return 0, 0, errorMessage(http.StatusBadRequest, "invalid first")
		}
		first = n
	}
	if v := c.query.Get("max"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil {
			return 0, 0, errorMessage(http.StatusBadRequest, "invalid max")
		}
		max = n
	}
	if first < 0 {
		first = 0
	}
	return first, max, nil
}

func window[T any](all []T, first, max int) []T {
	if first >= len(all) {
		return all[:0]
	}
	end := len(all)
	if max >= 0 && first+max < end {
		end = first + max
	}
	return all[first:end]
}

// searchQuery parses Keycloak's q parameter, "key1:value1 key2:value2", with values
// optionally in double quotes.
var searchQueryRE = regexp.MustCompile(`(?:"([^"]*)"|([^\s:"]+)):(?:"([^"]*)"|(\S+))`)

func parseSearchQuery(q string) map[string]string {
	out := map[string]string{}
	for _, m := range searchQueryRE.FindAllStringSubmatch(q, -1) {
		out[m[1]+m[2]] = m[3] + m[4]
	}
	return out
}

func attrMatches(attrs map[string][]string, key, value string, exact bool) bool {
	for _, v := range attrs[key] {
		if exact && strings.EqualFold(v, value) {
			return true
		}
		if !exact && strings.Contains(strings.ToLower(v), strings.ToLower(value)) {
			return true
		}
	}
	return false
}

// --- users ---

// userFilter selects users as GET /users does: username, email, firstName and lastName are
// infix matches unless exact=true; q's attributes are exact (case-insensitive) unless
// exact=false, as in Keycloak 26; search is a prefix match on any name field.
type userFilter struct {
	username, email, firstName, lastName, search string
	attrs                                        map[string]string
	exact, attrExact                             bool
	enabled                                      *bool
}

func (c *call) userFilter() userFilter {
	f := userFilter{
		username:  strings.ToLower(c.query.Get("username")),
		email:     strings.ToLower(c.query.Get("email")),
		firstName: strings.ToLower(c.query.Get("firstName")),
		lastName:  strings.ToLower(c.query.Get("lastName")),
		search:    strings.ToLower(strings.TrimSpace(c.query.Get("search"))),
		exact:     c.boolParam("exact", false),
		attrExact: c.boolParam("exact", true),
	}
	if q := c.query.Get("q"); q != "" {
		f.attrs = parseSearchQuery(q)
	}
	if v := c.query.Get("enabled"); v != "" {
		b, err := strconv.ParseBool(v)
		if err == nil {
			f.enabled = &b
		}
	}
	return f
}

func fieldMatches(have, want string, exact bool) bool {
	if want == "" {
		return true
	}
	have = strings.ToLower(have)
	if exact {
		return have == want
	}
	return strings.Contains(have, want)
}

func (f userFilter) selectsAll() bool {
	return f.username == "" && f.email == "" && f.firstName == "" && f.lastName == "" &&
		(f.search == "" || f.search == "*") && len(f.attrs) == 0 && f.enabled == nil
}

func (f userFilter) matches(u *user) bool {
	if f.search != "" && f.search != "*" {
		s := strings.Trim(f.search, "*")
		if !strings.HasPrefix(u.username, s) && !strings.HasPrefix(u.email, s) &&
			!strings.HasPrefix(strings.ToLower(u.firstName), s) && !strings.HasPrefix(strings.ToLower(u.lastName), s) {
			return false
		}
	}
	if !fieldMatches(u.username, f.username, f.exact) || !fieldMatches(u.email, f.email, f.exact) ||
		!fieldMatches(u.firstName, f.firstName, f.exact) || !fieldMatches(u.lastName, f.lastName, f.exact) {
		return false
	}
	if f.enabled != nil && u.enabled != *f.enabled {
		return false
	}
	for k, v := range f.attrs {
		if !attrMatches(u.attrs, k, v, f.attrExact) {
			return false
		}
	}
	return true
}

// selectUsers returns the matching users in username order. An exact username or email
// search is answered from the index, so that lookups stay cheap in big realms.
func (r *realm) selectUsers(f userFilter) []*user {
	candidates := r.usersSorted()
	switch {
	case f.exact && f.username != "":
		candidates = nil
		if u, ok := r.byUsername[f.username]; ok {
			candidates = []*user{u}
		}
	case f.exact && f.email != "" && !r.duplicateEmails:
		candidates = nil
		if u, ok := r.byEmail[f.email]; ok {
			candidates = []*user{u}
		}
	}
	if f.selectsAll() {
		return candidates
	}
	out := make([]*user, 0)
	for _, u := range candidates {
		if f.matches(u) {
			out = append(out, u)
		}
	}
	return out
}

func (s *Server) listUsers(c *call) *apiError {
	first, max, err := c.page(100)
	if err != nil {
		return err
	}
	brief := c.boolParam("briefRepresentation", false)
	page := window(c.realm.selectUsers(c.userFilter()), first, max)
	out := make([]userJSON, len(page))
	for i, u := range page {
		out[i] = userRep(u, brief)
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) countUsers(c *call) *apiError {
	writeJSON(c.w, http.StatusOK, len(c.realm.selectUsers(c.userFilter())))
	return nil
}
