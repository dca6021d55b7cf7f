package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"time"
)

// CreateGroup creates a group: group_exists (409) when the name is taken in any case.
func (t *TenantClient) CreateGroup(ctx context.Context, in NewGroup, opts ...Option) (*Group, error) {
	var out Group
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/groups"), in, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetGroup reads one group by name, in any case (MinVersion waits for a version).
func (t *TenantClient) GetGroup(ctx context.Context, name string, opts ...Option) (*Group, error) {
	var out Group
	if _, err := t.c.call(ctx, t.c.query, http.MethodGet, t.path("/groups/"+seg(name)), nil, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateGroup changes the fields the patch sets.
func (t *TenantClient) UpdateGroup(ctx context.Context, name string, p GroupPatch, opts ...Option) (*Group, error) {
	var out Group
	if _, err := t.c.call(ctx, t.c.command, http.MethodPatch, t.path("/groups/"+seg(name)), p, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// RenameGroup gives a group a new name: the same group (same id, members and history) at
// the next version; the old name is free at once. A live group of the new name is a 409
// group_exists.
func (t *TenantClient) RenameGroup(ctx context.Context, name, newName string, opts ...Option) (*Group, error) {
	var out Group
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/groups/"+seg(name)+"/rename"),
		map[string]string{"name": newName}, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteGroup deletes a group and its memberships.
func (t *TenantClient) DeleteGroup(ctx context.Context, name string, opts ...Option) (Result, error) {
	resp, err := t.c.call(ctx, t.c.command, http.MethodDelete, t.path("/groups/"+seg(name)), nil, nil, opts)
	if err != nil {
		return Result{}, err
	}
	return result(resp), nil
}

// AddMember puts a user in a group (also fine when already a member); the Result's
// version is the group's, as is IfMatch's.
func (t *TenantClient) AddMember(ctx context.Context, group, username string, opts ...Option) (Result, error) {
	resp, err := t.c.call(ctx, t.c.command, http.MethodPut, t.path("/groups/"+seg(group)+"/members/"+seg(username)), nil, nil, opts)
	if err != nil {
		return Result{}, err
	}
	return result(resp), nil
}

// RemoveMember takes a user out of a group (also fine when not a member).
func (t *TenantClient) RemoveMember(ctx context.Context, group, username string, opts ...Option) (Result, error) {
	resp, err := t.c.call(ctx, t.c.command, http.MethodDelete, t.path("/groups/"+seg(group)+"/members/"+seg(username)), nil, nil, opts)
	if err != nil {
		return Result{}, err
	}
	return result(resp), nil
}

// MembersChange names the users ChangeMembers adds to and removes from a group: together
// at most MaxMembersChange, and within the 64 KiB request body (MembersChunks splits a
// longer list).
type MembersChange struct {
	Add    []string `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
	// Expires are the expiries of some of Add, by username: each membership added ends by
	// itself then (a user already in the group keeps its expiry).
	Expires map[string]time.Time `json:"-"`
}

// MaxMembersChange is how many usernames one ChangeMembers may name (API.md).
const MaxMembersChange = 1000

// ChangeMembers adds and removes many members in one command: one new group version for
// the whole change (none when nothing changes), all or nothing. Unknown users fail it
// with not_found (404), whose Error.Fields name each ("no user jdoe"). The answer is the
// group after the change; IfMatch is the group's version.
func (t *TenantClient) ChangeMembers(ctx context.Context, group string, ch MembersChange, opts ...Option) (*Group, error) {
	var out Group
	if _, err := t.c.call(ctx, t.c.command, http.MethodPost, t.path("/groups/"+seg(group)+"/members"), ch, &out, opts); err != nil {
		return nil, err
	}
	return &out, nil
}

// maxMembersBody keeps a MembersChange's JSON under the command API's 64 KiB body limit,
// with room to spare.
const maxMembersBody = 60 << 10

// MembersChunks splits adding add and removing remove into changes each within the
// limits of one ChangeMembers request (count and body size), additions first. Each
// chunk is a command of its own: all or nothing per chunk, not for the whole list.
func MembersChunks(add, remove []string) []MembersChange { return membersChunks(add, remove, 0) }

// membersChunks is MembersChunks with extra bytes per addition (its expiry's).
func membersChunks(add, remove []string, extra int) []MembersChange {
	const empty = len(`{"add":[],"remove":[]}`)
	var (
		out  []MembersChange
		cur  MembersChange
		size = empty
	)
	// list points into cur, which stays the same variable when a chunk is closed.
	push := func(list *[]string, name string, extra int) {
		n := len(name) + 3 + extra // its quotes and a comma (usernames need no escaping)
		if len(cur.Add)+len(cur.Remove) == MaxMembersChange || size+n > maxMembersBody {
			out = append(out, cur)
			cur, size = MembersChange{}, empty
		}
		size += n
		*list = append(*list, name)
	}
	for _, u := range add {
		push(&cur.Add, u, extra)
	}
	for _, u := range remove {
		push(&cur.Remove, u, 0)
	}
	if len(cur.Add)+len(cur.Remove) > 0 {
		out = append(out, cur)
	}
	return out
}

// ListGroups reads one page of groups by name; cursor is "" for the first.
func (t *TenantClient) ListGroups(ctx context.Context, limit int, cursor string) (*Page[Group], error) {
	return listPage[Group](ctx, t.c, t.path("/groups"), limitValues(limit), cursor)
}

// Groups iterates over every group, by name.
func (t *TenantClient) Groups(ctx context.Context, limit int) iter.Seq2[Group, error] {
	return walk[Group](ctx, t.c, t.path("/groups"), limitValues(limit))
}

// GroupMembers iterates over a group's members as users, by username.
func (t *TenantClient) GroupMembers(ctx context.Context, group string, limit int) iter.Seq2[User, error] {
	return walk[User](ctx, t.c, t.path("/groups/"+seg(group)+"/members"), limitValues(limit))
}

// ActivityFilter selects one activity feed: exactly one of Entity ("user:jdoe",
// "group:admins"; see UserEntity and GroupEntity), Actor, or Day ("2026-11-21", UTC).
type ActivityFilter struct {
	Entity string
	Actor  string
	Day    string
	Limit  int
}

// UserEntity and GroupEntity name an entity for ActivityFilter.
func UserEntity(username string) string { return "user:" + username }
func GroupEntity(name string) string    { return "group:" + name }

func (f ActivityFilter) values() url.Values {
	v := limitValues(f.Limit)
	for k, val := range map[string]string{"entity": f.Entity, "actor": f.Actor, "day": f.Day} {
		if val != "" {
			v.Set(k, val)
		}
	}
	return v
}

// ListActivity reads one page of an activity feed, newest first.
func (t *TenantClient) ListActivity(ctx context.Context, f ActivityFilter, cursor string) (*Page[Activity], error) {
	return listPage[Activity](ctx, t.c, t.path("/activity"), f.values(), cursor)
}

// Activity iterates over an activity feed, newest first.
func (t *TenantClient) Activity(ctx context.Context, f ActivityFilter) iter.Seq2[Activity, error] {
	return walk[Activity](ctx, t.c, t.path("/activity"), f.values())
}
