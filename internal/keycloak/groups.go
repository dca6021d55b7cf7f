package keycloak

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// Group is Keycloak's GroupRepresentation, reduced to what ssodir uses. ssodir's groups
// are top-level groups; subgroups are read (a search returns matches nested in their
// parents) but never written.
type Group struct {
	ID          string              `json:"id,omitempty"`
	Name        string              `json:"name"`
	Description string              `json:"description,omitempty"`
	Path        string              `json:"path,omitempty"`
	ParentID    string              `json:"parentId,omitempty"`
	Attributes  map[string][]string `json:"attributes,omitempty"`
	SubGroups   []Group             `json:"subGroups,omitempty"`
	// SubGroupCount is how many direct subgroups a listed group has (Keycloak 23+ lists
	// top-level groups with this count rather than with their subgroups).
	SubGroupCount int `json:"subGroupCount,omitempty"`
}

// SsodirID is the group's ssodir_id attribute, empty for groups ssodir does not manage.
func (g Group) SsodirID() string { return firstValue(g.Attributes, AttrSsodirID) }

// SsodirVersion is the directory version the group reflects, 0 when it carries none.
func (g Group) SsodirVersion() int64 { return versionOf(g.Attributes) }

// groupWrite is the body of a group POST or PUT: name, description and attributes, all
// present, since a group PUT replaces them (description needs Keycloak 26).
type groupWrite struct {
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Attributes  map[string][]string `json:"attributes"`
}

func groupWriteOf(g Group) groupWrite {
	attrs := g.Attributes
	if attrs == nil {
		attrs = map[string][]string{}
	}
	return groupWrite{Name: g.Name, Description: g.Description, Attributes: attrs}
}

// ListGroups returns one page of the realm's top-level groups with their attributes
// (briefRepresentation=false; Keycloak's default leaves attributes out), ordered by name.
// max 0 asks for all of them.
func (c *Client) ListGroups(ctx context.Context, first, max int) ([]Group, error) {
	v := url.Values{"briefRepresentation": {"false"}}
	if first > 0 {
		v.Set("first", strconv.Itoa(first))
	}
	if max > 0 {
		v.Set("max", strconv.Itoa(max))
	}
	var out []Group
	if err := c.do(ctx, http.MethodGet, "/groups", v, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AllGroups pages through every top-level group, pageSize at a time.
func (c *Client) AllGroups(ctx context.Context, pageSize int) iter.Seq2[Group, error] {
	return func(yield func(Group, error) bool) {
		if pageSize <= 0 {
			pageSize = 100
		}
		for first := 0; ; {
			page, err := c.ListGroups(ctx, first, pageSize)
			if err != nil {
				yield(Group{}, err)
				return
			}
			for _, g := range page {
				if !yield(g, nil) {
					return
				}
			}
			if len(page) < pageSize {
				return
			}
			first += len(page)
		}
	}
}

// CountGroups counts the realm's groups (GET /groups/count).
func (c *Client) CountGroups(ctx context.Context) (int, error) {
	var out struct {
		Count int `json:"count"`
	}
	if err := c.do(ctx, http.MethodGet, "/groups/count", nil, nil, &out); err != nil {
		return 0, err
	}
	return out.Count, nil
}

// walkGroups visits groups and their nested subgroups.
func walkGroups(gs []Group, visit func(Group)) {
	for _, g := range gs {
		visit(g)
		walkGroups(g.SubGroups, visit)
	}
}

// FindGroupByName returns the top-level group with exactly that name, or an error
// matching ErrNotFound.
func (c *Client) FindGroupByName(ctx context.Context, name string) (*Group, error) {
	v := url.Values{"search": {name}, "exact": {"true"}, "briefRepresentation": {"false"}}
	var gs []Group
	if err := c.do(ctx, http.MethodGet, "/groups", v, nil, &gs); err != nil {
		return nil, err
	}
	var found *Group
	walkGroups(gs, func(g Group) {
		if found == nil && g.Name == name && g.ParentID == "" && (g.Path == "" || g.Path == "/"+name) {
			found = &g
		}
	})
	if found == nil {
		return nil, fmt.Errorf("keycloak: group %q: %w", name, ErrNotFound)
	}
	return found, nil
}

// FindGroupsByAttribute returns the groups (at any depth) whose attribute key has exactly
// value, using q=key:value.
func (c *Client) FindGroupsByAttribute(ctx context.Context, key, value string) ([]Group, error) {
	if err := checkSearchValue(key, value); err != nil {
		return nil, err
	}
	v := url.Values{"q": {formatSearchQuery(map[string]string{key: value})}, "briefRepresentation": {"false"}}
	var gs []Group
	if err := c.do(ctx, http.MethodGet, "/groups", v, nil, &gs); err != nil {
		return nil, err
	}
	var out []Group
	walkGroups(gs, func(g Group) {
		for _, have := range g.Attributes[key] {
			if have == value {
				g.SubGroups = nil
				out = append(out, g)
				return
			}
		}
	})
	return out, nil
}

// GetGroup returns the group with the Keycloak id.
func (c *Client) GetGroup(ctx context.Context, id string) (*Group, error) {
	var g Group
	if err := c.do(ctx, http.MethodGet, "/groups/"+url.PathEscape(id), nil, nil, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// CreateGroup creates a top-level group and returns its Keycloak id from the Location
// header. A 409 (the name is taken) matches ErrConflict. If the answer is lost, the group
// is looked up by name before anything is sent again (see create): it is taken as ours if
// it carries the same ssodir_id, or — for a group without one — if it exists at all.
func (c *Client) CreateGroup(ctx context.Context, g Group) (string, error) {
	w := groupWriteOf(g)
	lookup := func(ctx context.Context) (string, error) {
		found, err := c.FindGroupByName(ctx, w.Name)
		if err != nil {
			return "", err
		}
		if want := g.SsodirID(); want == "" || found.SsodirID() == want {
			return found.ID, nil
		}
		return "", fmt.Errorf("keycloak: group name %q is held by another group: %w", w.Name, ErrConflict)
	}
	return c.create(ctx, "/groups", "groups", w, lookup)
}

// UpdateGroup replaces name, description and attributes of the group g.ID (Keycloak's
// group PUT ignores subgroups).
func (c *Client) UpdateGroup(ctx context.Context, g Group) error {
	if g.ID == "" {
		return errors.New("keycloak: update group: no id")
	}
	return c.do(ctx, http.MethodPut, "/groups/"+url.PathEscape(g.ID), nil, groupWriteOf(g), nil)
}

// DeleteGroup deletes the group with its memberships (and subgroups). A group already
// gone matches ErrNotFound.
func (c *Client) DeleteGroup(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/groups/"+url.PathEscape(id), nil, nil, nil)
}

// GroupMembers returns one page of the group's members in brief representation (id,
// username, names, email, enabled; no attributes), ordered by username. max 0 leaves
// Keycloak's default of 100.
func (c *Client) GroupMembers(ctx context.Context, groupID string, first, max int) ([]User, error) {
	v := url.Values{"briefRepresentation": {"true"}}
	if first > 0 {
		v.Set("first", strconv.Itoa(first))
	}
	if max > 0 {
		v.Set("max", strconv.Itoa(max))
	}
	var out []User
	if err := c.do(ctx, http.MethodGet, "/groups/"+url.PathEscape(groupID)+"/members", v, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AllGroupMembers pages through every member of the group, pageSize at a time.
func (c *Client) AllGroupMembers(ctx context.Context, groupID string, pageSize int) iter.Seq2[User, error] {
	return func(yield func(User, error) bool) {
		if pageSize <= 0 {
			pageSize = 100
		}
		for first := 0; ; {
			page, err := c.GroupMembers(ctx, groupID, first, pageSize)
			if err != nil {
				yield(User{}, err)
				return
			}
			for _, u := range page {
				if !yield(u, nil) {
					return
				}
			}
			if len(page) < pageSize {
				return
			}
			first += len(page)
		}
	}
}

// Probe asks the realm itself whether it answers: a token (fetched when the client has
// none) and the cheapest Admin API read, the group count. keycloak-sync probes a realm this
// way before it blames the realm rather than one record for a failure.
func (c *Client) Probe(ctx context.Context) error {
	var out struct {
		Count int `json:"count"`
	}
	return c.do(ctx, http.MethodGet, "/groups/count", nil, nil, &out)
}
