package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// CreateUser creates a user: username_taken or email_taken (409) when either is in use.
func (t *TenantClient) CreateUser(ctx context.Context, in NewUser, opts ...Option) (*User, error) {
	var out User
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/users"), in, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetUser reads one user from the query API (MinVersion waits for a version).
func (t *TenantClient) GetUser(ctx context.Context, username string, opts ...Option) (*User, error) {
	var out User
	if _, err := t.c.call(ctx, t.c.query, http.MethodGet, t.path("/users/"+seg(username)), nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateUser changes the fields the patch sets.
func (t *TenantClient) UpdateUser(ctx context.Context, username string, p UserPatch, opts ...Option) (*User, error) {
	var out User
	if _, err := t.c.call(ctx, t.c.command, http.MethodPatch, t.path("/users/"+seg(username)), p, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// ActivateUser and DeactivateUser set is_active; doing it again changes nothing.
func (t *TenantClient) ActivateUser(ctx context.Context, username string, opts ...Option) (*User, error) {
	return t.userAction(ctx, username, "/activate", opts)
}

func (t *TenantClient) DeactivateUser(ctx context.Context, username string, opts ...Option) (*User, error) {
	return t.userAction(ctx, username, "/deactivate", opts)
}

func (t *TenantClient) userAction(ctx context.Context, username, action string, opts []Option) (*User, error) {
	var out User
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/users/"+seg(username)+action), nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// RenameUser gives a user a new username: the same person (same id) at the next version;
// the old name is free at once. A live user of the new name is a 409 username_taken.
func (t *TenantClient) RenameUser(ctx context.Context, username, newUsername string, opts ...Option) (*User, error) {
	var out User
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/users/"+seg(username)+"/rename"),
		map[string]string{"username": newUsername}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetPassword sets a user's password (8–128 characters).
func (t *TenantClient) SetPassword(ctx context.Context, username, password string, opts ...Option) (Result, error) {
	resp, err := t.c.call(ctx, t.c.command, http.MethodPut, t.path("/users/"+seg(username)+"/password"),
		map[string]string{"password": password}, nil, opts)
	if err != nil {
		return Result{}, err
	}
	return result(resp), nil
}

// DeleteUser deletes a user and its memberships.
func (t *TenantClient) DeleteUser(ctx context.Context, username string, opts ...Option) (Result, error) {
	resp, err := t.c.call(ctx, t.c.command, http.MethodDelete, t.path("/users/"+seg(username)), nil, nil, opts)
	if err != nil {
		return Result{}, err
	}
	return result(resp), nil
}

// UserOrder is the order of an unfiltered user list.
type UserOrder string

const (
	// UpdatedDesc lists the most recently updated first (the default).
	UpdatedDesc UserOrder = ""
	// UpdatedAsc lists the oldest first.
	UpdatedAsc UserOrder = "updated_asc"
)

// UserFilter selects a user list; at most one of Email, UsernamePrefix, LastNamePrefix
// and FirstNamePrefix. Limit is the page size (1–500, the API's 50 when 0).
type UserFilter struct {
	Email string
	// UsernamePrefix lists the users whose username starts with it, by username.
	UsernamePrefix  string
	LastNamePrefix  string
	FirstNamePrefix string
	Order           UserOrder
	Limit           int
}

func (f UserFilter) values() url.Values {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("email", f.Email)
	set("username_prefix", f.UsernamePrefix)
	set("last_name_prefix", f.LastNamePrefix)
	set("first_name_prefix", f.FirstNamePrefix)
	set("order", string(f.Order))
	if f.Limit > 0 {
		v.Set("limit", strconv.Itoa(f.Limit))
	}
	return v
}

// ListUsers reads one page of users; cursor is "" for the first.
func (t *TenantClient) ListUsers(ctx context.Context, f UserFilter, cursor string) (*Page[User], error) {
	return listPage[User](ctx, t.c, t.path("/users"), f.values(), cursor)
}

// Users iterates over every user the filter selects, following the cursors.
func (t *TenantClient) Users(ctx context.Context, f UserFilter) iter.Seq2[User, error] {
	return walk[User](ctx, t.c, t.path("/users"), f.values())
}

// UserGroups iterates over the groups a user belongs to, by name.
func (t *TenantClient) UserGroups(ctx context.Context, username string, limit int) iter.Seq2[Group, error] {
	return walk[Group](ctx, t.c, t.path("/users/"+seg(username)+"/groups"), limitValues(limit))
}

func limitValues(limit int) url.Values {
	v := url.Values{}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	return v
}

// listPage reads one page of a list.
func listPage[T any](ctx context.Context, c *Client, p string, q url.Values, cursor string) (*Page[T], error) {
	v := url.Values{}
	for k, vals := range q {
		v[k] = vals
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	r, err := c.newRequest(c.query, http.MethodGet, p, nil, nil)
	if err != nil {
		return nil, err
	}
	r.query = v
	resp, err := c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	var page Page[T]
	if err := decode(resp, r, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// walk follows a list's cursors; an error ends it.
func walk[T any](ctx context.Context, c *Client, p string, q url.Values) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		cursor := ""
		for {
			page, err := listPage[T](ctx, c, p, q, cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range page.Items {
				if !yield(it, nil) {
					return
				}
			}
			if page.NextCursor == nil || *page.NextCursor == "" {
				return
			}
			cursor = *page.NextCursor
		}
	}
}
