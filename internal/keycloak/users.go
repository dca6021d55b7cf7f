package keycloak

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/ssodir/ssodir/internal/identity"
)

// AttrSsodirID is the attribute that marks a Keycloak user or group as managed by ssodir;
// its value is the directory's immutable id for the object.
const AttrSsodirID = "ssodir_id"

// AttrSsodirVersion is the directory version a managed user or group reflects. Every
// writer compares it before writing, so that a state older than the one Keycloak holds is
// never written over it (a redelivered event, a stale reconcile, a lease handover).
const AttrSsodirVersion = "ssodir_version"

// User is Keycloak's UserRepresentation, reduced to the fields ssodir reads or writes.
//
// Keycloak's PUT replaces: since Keycloak 24 a user PUT clears the profile fields it does
// not name (email, firstName, lastName and every attribute), and keeps the others it does
// not name (enabled, emailVerified, requiredActions, credentials). UpdateUser therefore
// always sends the whole of this struct; to change a user, read it, change the copy and
// send it back, so that attributes and required actions set by others survive.
type User struct {
	ID               string              `json:"id,omitempty"`
	Username         string              `json:"username,omitempty"`
	Email            string              `json:"email,omitempty"`
	FirstName        string              `json:"firstName,omitempty"`
	LastName         string              `json:"lastName,omitempty"`
	Enabled          bool                `json:"enabled"`
	EmailVerified    bool                `json:"emailVerified"`
	Attributes       map[string][]string `json:"attributes,omitempty"`
	RequiredActions  []string            `json:"requiredActions,omitempty"`
	CreatedTimestamp int64               `json:"createdTimestamp,omitempty"`
	// Groups are group paths ("/admins") to put a new user in as part of its create;
	// Keycloak reads them only on create, and the client sends them only then.
	Groups []string `json:"groups,omitempty"`
}

// SsodirID is the user's ssodir_id attribute, empty for users ssodir does not manage.
func (u User) SsodirID() string { return firstValue(u.Attributes, AttrSsodirID) }

// SsodirVersion is the directory version the user reflects, 0 when it carries none.
func (u User) SsodirVersion() int64 { return versionOf(u.Attributes) }

func firstValue(attrs map[string][]string, key string) string {
	if v := attrs[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// userWrite is the body of a user POST or PUT: exactly the fields ssodir owns or carries
// back, all of them present so that a full-replace PUT clears what it should.
type userWrite struct {
	Username        string              `json:"username"`
	Email           string              `json:"email"`
	FirstName       string              `json:"firstName"`
	LastName        string              `json:"lastName"`
	Enabled         bool                `json:"enabled"`
	EmailVerified   bool                `json:"emailVerified"`
	Attributes      map[string][]string `json:"attributes"`
	RequiredActions []string            `json:"requiredActions,omitempty"`
	Groups          []string            `json:"groups,omitempty"`
}

// writeOf is the body that sends u; groups go only with a create.
func writeOf(u User, create bool) userWrite {
	attrs := u.Attributes
	if attrs == nil {
		// null would leave attributes alone on some Keycloak versions; {} clears them on all.
		attrs = map[string][]string{}
	}
	w := userWrite{
		Username: strings.ToLower(u.Username), Email: strings.ToLower(u.Email),
		FirstName: u.FirstName, LastName: u.LastName, Enabled: u.Enabled, EmailVerified: u.EmailVerified,
		Attributes: attrs, RequiredActions: u.RequiredActions,
	}
	if create {
		w.Groups = u.Groups
	}
	return w
}

// UserQuery selects users for ListUsers, CountUsers and AllUsers.
type UserQuery struct {
	// Username and Email match a part of the field, or the whole of it with Exact.
	// Keycloak compares them lower-cased.
	Username string
	Email    string
	// Search matches the start of username, email, first or last name.
	Search string
	Exact  bool
	// Attributes are matched as q=key:value; Keycloak 26 compares values case-insensitively
	// and whole, unless Exact is false and sent (it is sent only when true).
	Attributes map[string]string
	Enabled    *bool
	// First and Max page the result; Max 0 leaves Keycloak's default of 100.
	First int
	Max   int
	// Brief asks for the brief representation (no attributes).
	Brief bool
}

func (q UserQuery) filter() url.Values {
	v := url.Values{}
	if q.Username != "" {
		v.Set("username", q.Username)
	}
	if q.Email != "" {
		v.Set("email", q.Email)
	}
	if q.Search != "" {
		v.Set("search", q.Search)
	}
	if q.Exact {
		v.Set("exact", "true")
	}
	if len(q.Attributes) > 0 {
		v.Set("q", formatSearchQuery(q.Attributes))
	}
	if q.Enabled != nil {
		v.Set("enabled", strconv.FormatBool(*q.Enabled))
	}
	return v
}

// formatSearchQuery writes Keycloak's q parameter: "key:value" pairs separated by spaces,
// a value in double quotes when it holds a space or a colon.
func formatSearchQuery(attrs map[string]string) string {
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		v := attrs[k]
		if strings.ContainsAny(v, " \t:") {
			v = `"` + v + `"`
		}
		parts[i] = k + ":" + v
	}
	return strings.Join(parts, " ")
}

// checkSearchValue rejects values Keycloak's q syntax cannot carry.
func checkSearchValue(key, value string) error {
	if value == "" || strings.ContainsAny(value, "\"\n") || strings.ContainsAny(key, " \t\":") {
		return fmt.Errorf("keycloak: cannot search for %s: the value is empty or holds a quote or a line break", key)
	}
	return nil
}

// ListUsers returns one page of users (GET /users), ordered by username.
func (c *Client) ListUsers(ctx context.Context, q UserQuery) ([]User, error) {
	v := q.filter()
	if q.First > 0 {
		v.Set("first", strconv.Itoa(q.First))
	}
	if q.Max > 0 {
		v.Set("max", strconv.Itoa(q.Max))
	}
	v.Set("briefRepresentation", strconv.FormatBool(q.Brief))
	var out []User
	if err := c.do(ctx, http.MethodGet, "/users", v, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// CountUsers counts the users that match q's filters (GET /users/count).
func (c *Client) CountUsers(ctx context.Context, q UserQuery) (int, error) {
	var n int
	if err := c.do(ctx, http.MethodGet, "/users/count", q.filter(), nil, &n); err != nil {
		return 0, err
	}
	return n, nil
}

// AllUsers pages through every user matching q, pageSize at a time, with explicit
// first/max. Offset paging over a realm that changes meanwhile can skip or repeat a user;
// callers that need a consistent picture (reconcile) de-duplicate by id and accept that a
// skipped user is seen on the next run.
func (c *Client) AllUsers(ctx context.Context, q UserQuery, pageSize int) iter.Seq2[User, error] {
	return func(yield func(User, error) bool) {
		if pageSize <= 0 {
			pageSize = 100
		}
		q.First, q.Max = 0, pageSize
		for {
			page, err := c.ListUsers(ctx, q)
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
			q.First += len(page)
		}
	}
}

// FindUserByUsername returns the user with exactly that username (in any case), or an
// error matching ErrNotFound.
func (c *Client) FindUserByUsername(ctx context.Context, username string) (*User, error) {
	username = strings.ToLower(username)
	users, err := c.ListUsers(ctx, UserQuery{Username: username, Exact: true, Max: 10})
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		if strings.EqualFold(u.Username, username) {
			return &u, nil
		}
	}
	return nil, fmt.Errorf("keycloak: user %s: %w", identity.LogKey("user:"+username), ErrNotFound)
}

// FindUserByEmail returns the user with exactly that email (in any case), or an error
// matching ErrNotFound.
func (c *Client) FindUserByEmail(ctx context.Context, email string) (*User, error) {
	email = strings.ToLower(email)
	users, err := c.ListUsers(ctx, UserQuery{Email: email, Exact: true, Max: 10})
	if err != nil {
		return nil, err
	}
	for _, u := range users {
		if strings.EqualFold(u.Email, email) {
			return &u, nil
		}
	}
	return nil, fmt.Errorf("keycloak: user with email %s: %w", identity.LogKey("email:"+email), ErrNotFound)
}

// FindUsersByAttribute returns the users whose attribute key has exactly value. Keycloak's
// q search compares case-insensitively, so the result is checked again here.
func (c *Client) FindUsersByAttribute(ctx context.Context, key, value string) ([]User, error) {
	if err := checkSearchValue(key, value); err != nil {
		return nil, err
	}
	var out []User
	for u, err := range c.AllUsers(ctx, UserQuery{Attributes: map[string]string{key: value}, Exact: true}, 100) {
		if err != nil {
			return nil, err
		}
		for _, v := range u.Attributes[key] {
			if v == value {
				out = append(out, u)
				break
			}
		}
	}
	return out, nil
}

// GetUser returns the user with the Keycloak id.
func (c *Client) GetUser(ctx context.Context, id string) (*User, error) {
	var u User
	if err := c.do(ctx, http.MethodGet, "/users/"+url.PathEscape(id), nil, nil, &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// CreateUser creates the user, in the groups u.Groups names by path, and returns its
// Keycloak id, read from the Location header. A 409 (username or email taken) matches
// ErrConflict; a group path that does not exist fails the whole create. If the answer is lost, the user is
// looked up by username before anything is sent again (see create): it is taken as ours if
// it carries the same ssodir_id, or — for a user without one — the same email.
func (c *Client) CreateUser(ctx context.Context, u User) (string, error) {
	w := writeOf(u, true)
	lookup := func(ctx context.Context) (string, error) {
		found, err := c.FindUserByUsername(ctx, w.Username)
		if err != nil {
			return "", err
		}
		want := u.SsodirID()
		if (want != "" && found.SsodirID() == want) || (want == "" && strings.EqualFold(found.Email, w.Email)) {
			return found.ID, nil
		}
		return "", fmt.Errorf("keycloak: username %s is held by another user: %w", identity.LogKey("user:"+w.Username), ErrConflict)
	}
	return c.create(ctx, "/users", "users", w, lookup)
}

// UpdateUser replaces the user u.ID with u (full-replace PUT, see User).
func (c *Client) UpdateUser(ctx context.Context, u User) error {
	if u.ID == "" {
		return errors.New("keycloak: update user: no id")
	}
	return c.do(ctx, http.MethodPut, "/users/"+url.PathEscape(u.ID), nil, writeOf(u, false), nil)
}

// DeleteUser deletes the user. Deleting a user that is already gone matches ErrNotFound,
// which callers that want "gone" treat as success: a retried DELETE whose first answer was
// lost lands there.
func (c *Client) DeleteUser(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/users/"+url.PathEscape(id), nil, nil, nil)
}

// passwordCredential is the CredentialRepresentation of reset-password.
type passwordCredential struct {
	Type      string `json:"type"`
	Value     string `json:"value"`
	Temporary bool   `json:"temporary"`
}

// SetPassword sets the user's password (PUT /users/{id}/reset-password), as a permanent
// one: the directory is where users manage it. The plaintext goes only into the request
// body; it is never logged nor put in an error. Keycloak's password policy may refuse it
// with a 400 whose message names the rule, not the password.
func (c *Client) SetPassword(ctx context.Context, userID, plaintext string) error {
	if plaintext == "" {
		return errors.New("keycloak: set password: empty password")
	}
	cred := passwordCredential{Type: "password", Value: plaintext, Temporary: false}
	return c.do(ctx, http.MethodPut, "/users/"+url.PathEscape(userID)+"/reset-password", nil, cred, nil)
}

// UserGroups returns one page of the user's groups (GET /users/{id}/groups), with their
// attributes; max 0 means all.
func (c *Client) UserGroups(ctx context.Context, userID string, first, max int) ([]Group, error) {
	v := url.Values{"briefRepresentation": {"false"}}
	if first > 0 {
		v.Set("first", strconv.Itoa(first))
	}
	if max > 0 {
		v.Set("max", strconv.Itoa(max))
	}
	var out []Group
	if err := c.do(ctx, http.MethodGet, "/users/"+url.PathEscape(userID)+"/groups", v, nil, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// AddUserToGroup makes the user a member of the group; being one already is fine.
func (c *Client) AddUserToGroup(ctx context.Context, userID, groupID string) error {
	return c.do(ctx, http.MethodPut, "/users/"+url.PathEscape(userID)+"/groups/"+url.PathEscape(groupID), nil, nil, nil)
}

// RemoveUserFromGroup ends the membership; not being a member is fine, an unknown user or
// group matches ErrNotFound.
func (c *Client) RemoveUserFromGroup(ctx context.Context, userID, groupID string) error {
	return c.do(ctx, http.MethodDelete, "/users/"+url.PathEscape(userID)+"/groups/"+url.PathEscape(groupID), nil, nil, nil)
}
