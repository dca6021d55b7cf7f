package keycloaktest

import (
	"net/http"
	"slices"
	"sort"
	"strings"
)

func (s *Server) listGroups(c *call) *apiError {
	first, max, err := c.page(-1)
	if err != nil {
		return err
	}
	brief := c.boolParam("briefRepresentation", true)
	search := c.query.Get("search")
	exact := c.boolParam("exact", false)
	var attrs map[string]string
	if q := c.query.Get("q"); q != "" {
		attrs = parseSearchQuery(q)
	}
	gs := make([]*group, 0, len(c.realm.groups))
	for _, g := range c.realm.groups {
		switch {
		case g.parent != "":
			continue // the listing holds top-level groups
		case search != "" && exact && g.name != search:
			continue
		case search != "" && !exact && !strings.Contains(strings.ToLower(g.name), strings.ToLower(search)):
			continue
		}
		ok := true
		for k, v := range attrs {
			if !slices.Contains(g.attrs[k], v) {
				ok = false
			}
		}
		if ok {
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

func (s *Server) countGroups(c *call) *apiError {
	writeJSON(c.w, http.StatusOK, map[string]int{"count": len(c.realm.groups)})
	return nil
}

type groupInput struct {
	Name        *string             `json:"name"`
	Description *string             `json:"description"`
	Attributes  map[string][]string `json:"attributes"`
	ID          string              `json:"id"`
}

func (s *Server) createGroupAPI(c *call) *apiError {
	var in groupInput
	if err := decodeBody(c.body, &in); err != nil {
		return err
	}
	if in.ID != "" {
		// Keycloak would move an existing group to the top level here; ssodir never does.
		return errorMessage(http.StatusBadRequest, "the test double does not move groups")
	}
	g, err := c.realm.createGroup(groupFields{name: in.Name, description: in.Description, attrs: in.Attributes})
	if err != nil {
		return err
	}
	c.w.Header().Set("Location", s.URL()+AdminPath(c.realm.name, "/groups/"+g.id))
	c.w.WriteHeader(http.StatusCreated)
	return nil
}

func (s *Server) getGroup(c *call) *apiError {
	g, err := c.group("group-id")
	if err != nil {
		return err
	}
	writeJSON(c.w, http.StatusOK, groupRep(g, false))
	return nil
}

func (s *Server) putGroup(c *call) *apiError {
	g, err := c.group("group-id")
	if err != nil {
		return err
	}
	var in groupInput
	if err := decodeBody(c.body, &in); err != nil {
		return err
	}
	// As Keycloak's GroupResource.updateGroup: the body must name the group (a rename is
	// this PUT with the new name, the group's id kept) and may not name another id.
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		return errorMessage(http.StatusBadRequest, "Group name is missing")
	}
	if in.ID != "" && in.ID != g.id {
		return errorMessage(http.StatusBadRequest, "Invalid group id")
	}
	if err := c.realm.replaceGroup(g, groupFields{name: in.Name, description: in.Description, attrs: in.Attributes}); err != nil {
		return err
	}
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) deleteGroupAPI(c *call) *apiError {
	g, err := c.group("group-id")
	if err != nil {
		return err
	}
	c.realm.deleteGroup(g)
	c.w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) groupMembers(c *call) *apiError {
	g, err := c.group("group-id")
	if err != nil {
		return err
	}
	first, max, err := c.page(100)
	if err != nil {
		return err
	}
	brief := c.boolParam("briefRepresentation", false)
	page := window(c.realm.membersSorted(g), first, max)
	out := make([]userJSON, len(page))
	for i, u := range page {
		out[i] = userRep(u, brief)
	}
	writeJSON(c.w, http.StatusOK, out)
	return nil
}

// getRealm is the realm representation (GET /admin/realms/{realm}): the settings the double
// models, or only the name for a service account without view-realm.
func (s *Server) getRealm(c *call) *apiError {
	r := c.realm
	if r.noViewRealm {
		writeJSON(c.w, http.StatusOK, map[string]any{"realm": r.name})
		return nil
	}
	writeJSON(c.w, http.StatusOK, map[string]any{"id": r.name, "realm": r.name, "enabled": true,
		"editUsernameAllowed": r.editUsername, "duplicateEmailsAllowed": r.duplicateEmails,
		"registrationEmailAsUsername": false, "loginWithEmailAllowed": true})
	return nil
}
