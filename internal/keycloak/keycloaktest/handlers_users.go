package keycloaktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// userInput is the part of a UserRepresentation body the double acts on. Pointers tell
// "absent" from "empty"; other fields of the schema are accepted and ignored, as Keycloak
// ignores read-only fields such as id or createdTimestamp.
type userInput struct {
	Username        *string             `json:"username"`
	Email           *string             `json:"email"`
	FirstName       *string             `json:"firstName"`
	LastName        *string             `json:"lastName"`
	Enabled         *bool               `json:"enabled"`
	EmailVerified   *bool               `json:"emailVerified"`
	Attributes      map[string][]string `json:"attributes"`
	RequiredActions []string            `json:"requiredActions"`
	Credentials     []credentialInput   `json:"credentials"`
	Groups          []string            `json:"groups"`
}

type credentialInput struct {
	Type      string `json:"type"`
	Value     string `json:"value"`
	Temporary *bool  `json:"temporary"`
}

func decodeBody(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return errorMessage(http.StatusBadRequest, "missing request body")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return &apiError{http.StatusBadRequest, map[string]any{"error": "unknown_error", "error_description": err.Error()}}
	}
	return nil
}

func (in userInput) fields() userFields {
	return userFields{
		username: in.Username, email: in.Email, firstName: in.FirstName, lastName: in.LastName,
		enabled: in.Enabled, emailVerified: in.EmailVerified, attrs: in.Attributes, requiredActions: in.RequiredActions,
	}
}

func (s *Server) createUserAPI(c *call) *apiError {
	var in userInput
	if err := decodeBody(c.body, &in); err != nil {
		return err
	}
	var groups []*group
	for _, path := range in.Groups {
		g := c.realm.findGroupByName(strings.ReplaceAll(strings.TrimPrefix(path, "/"), "~/", "/"))
		if g == nil {
			return errorMessage(http.StatusBadRequest, fmt.Sprintf("Group %s not found", path))
		}
		groups = append(groups, g)
	}
	for _, cr := range in.Credentials {
		if cr.Type != "password" || cr.Value == "" {
			return errorMessage(http.StatusBadRequest, "unsupported credential")
		}
	}
	u, err := c.realm.createUser(in.fields(), s.now().UnixMilli())
	if err != nil {
		return err
	}
	for _, g := range groups {
		u.groups[g.id] = true
		g.members[u.id] = true
	}
	for _, cr := range in.Credentials {
		setPassword(u, cr)
	}
	c.w.Header().Set("Location", s.URL()+AdminPath(c.realm.name, "/users/"+u.id))
	c.w.WriteHeader(http.StatusCreated)
	return nil
}

func (c *call) user() (*user, *apiError) {
	u, ok := c.realm.users[c.params["user-id"]]
	if !ok {
		return nil, notFound("User not found")
	}
	return u, nil
}

func (c *call) group(param string) (*group, *apiError) {
	g, ok := c.realm.groups[c.params[param]]
	if !ok {
		return nil, notFound("Could not find group by id")
	}
	return g, nil
}

func (s *Server) getUser(c *call) *apiError {
	u, err := c.user()
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, userRep(u, false))
	return nil
}

func (s *Server) putUser(c *call) *apiError {
	u, err := c.user()
	if err != nil {
		return err
	}
	var in userInput
	if err := decodeBody(c.body, &in); err != nil {
		return err
	}
	if err := c.realm.replaceUser(u, in.fields()); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deleteUserAPI(c *call) *apiError {
	u, err := c.user()
	if err != nil {
		return err
	}
	c.realm.deleteUser(u)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func setPassword(u *user, cr credentialInput) {
	if u.passwordSets > 0 {
		u.previous = append(u.previous, u.password)
	}
	u.password = cr.Value
	u.passwordTemporary = cr.Temporary == nil || *cr.Temporary
	u.passwordSets++
}

func (s *Server) resetPassword(c *call) *apiError {
	u, err := c.user()
	if err != nil {
		return err
	}
	var in credentialInput
	if err := decodeBody(c.body, &in); err != nil {
		return err
	}
	if in.Type != "" && in.Type != "password" {
		return errorMessage(http.StatusBadRequest, "Unsupported credential type")
	}
	if in.Value == "" {
		return &apiError{http.StatusBadRequest, map[string]any{"error": "Empty password", "error_description": "Empty password"}}
	}
	if err := c.realm.checkPasswordHistory(u, in.Value); err != nil {
		return err
	}
	// Keycloak treats an omitted "temporary" as true: the user must change it at next login.
	setPassword(u, in)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) userGroups(c *call) *apiError {
	u, err := c.user()
	if err != nil {
		return err
	}
	first, max, err := c.page(-1)
	if err != nil {
		return err
	}
	brief := c.boolParam("briefRepresentation", true)
	search := strings.ToLower(c.query.Get("search"))
	gs := make([]*group, 0, len(u.groups))
	for gid := range u.groups {
		g := c.realm.groups[gid]
		if search == "" || strings.Contains(strings.ToLower(g.name), search) {
			gs = append(gs, g)
		}
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	out := []groupJSON{}
	for _, g := range window(gs, first, max) {
		out = append(out, groupRep(g, brief))
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

func (s *Server) joinGroup(c *call) *apiError {
	u, err := c.user()
	if err != nil {
		return err
	}
	g, err := c.group("groupId")
	if err != nil {
		return err
	}
	u.groups[g.id] = true
	g.members[u.id] = true
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) leaveGroup(c *call) *apiError {
	u, err := c.user()
	if err != nil {
		return err
	}
	g, err := c.group("groupId")
	if err != nil {
		return err
	}
	// Leaving a group one is not in is not an error in Keycloak.
	delete(u.groups, g.id)
	delete(g.members, u.id)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

// --- groups ---
