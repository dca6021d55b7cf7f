package queries

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/identity"
)

// paramAsOf asks a member list for its answer at an instant (docs/history.md).
const paramAsOf = "as_of"

// asOfQuery reads the parameters of an as-of list: as_of (RFC 3339), limit and cursor.
// ok is false when the query has no as_of: the list is the current one.
func asOfQuery(rawQuery string) (at time.Time, p PageRequest, ok bool, err error) {
	v, perr := url.ParseQuery(rawQuery)
	if perr != nil || !v.Has(paramAsOf) {
		return time.Time{}, PageRequest{}, false, nil // the current list's parser answers
	}
	q, err := ParseQuery(rawQuery, paramAsOf, paramLimit, paramCursor)
	if err != nil {
		return time.Time{}, PageRequest{}, true, err
	}
	at, terr := time.Parse(time.RFC3339Nano, q.Get(paramAsOf))
	if terr != nil {
		return time.Time{}, PageRequest{}, true, apperr.InvalidField(paramAsOf, "must be an RFC 3339 date and time, e.g. 2026-03-31T23:59:59Z")
	}
	p, err = ParsePageRequest(q)
	return at, p, true, err
}

// asOfError turns the index's answers into problems.
func asOfError(err error) error {
	switch {
	case errors.Is(err, asof.ErrNotKept):
		return &apperr.Error{Kind: apperr.KindInvalid, Code: apperr.CodeHistoryNotKept,
			Message: "the kept history does not cover that instant (docs/history.md)"}
	case errors.Is(err, asof.ErrFuture):
		return apperr.InvalidField(paramAsOf, "must not be in the future")
	case errors.Is(err, asof.ErrBadCursor):
		return apperr.InvalidField(paramCursor, "is not a cursor of this list")
	}
	return err
}

// checkAsOf resolves the tenant's tables and refuses an instant the index cannot answer.
func (s *Service) checkAsOf(ctx context.Context, system, tenant string, at time.Time, p PageRequest) (tables, error) {
	if err := p.check(); err != nil {
		return tables{}, err
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return tables{}, err
	}
	if err := asof.NewReader(s.db).Check(ctx, t.users, at, s.now(), s.retention); err != nil {
		return tables{}, s.fail(t, storageOr(asOfError(err)))
	}
	return t, nil
}

// asOfReader reads the index with cursors signed by the service's cursor key and bound to
// the tenant, as the other lists' are.
func (s *Service) asOfReader(system, tenant string) *asof.Reader {
	return asof.NewReader(s.db).SignCursors(s.cursors.key, system+"/"+tenant)
}

// storageOr classifies what is not already a problem as a storage error.
func storageOr(err error) error {
	if _, ok := apperr.As(err); ok {
		return err
	}
	return storageError(err)
}

// GroupMembersAsOf is GET /groups/{name}/members?as_of=: the members of the group that
// held the name at that instant.
func (s *Service) GroupMembersAsOf(ctx context.Context, system, tenant, name string, at time.Time, p PageRequest) (asof.Page[asof.Member], error) {
	if !identity.ValidGroupName(name) {
		return asof.Page[asof.Member]{}, apperr.NotFound("group")
	}
	t, err := s.checkAsOf(ctx, system, tenant, at, p)
	if err != nil {
		return asof.Page[asof.Member]{}, err
	}
	page, err := s.asOfReader(system, tenant).Members(ctx, t.users, identity.GroupKey(name), asof.Millis(at), p.size(), p.Cursor)
	if errors.Is(err, asof.ErrNotFound) {
		return page, apperr.NotFound("group")
	}
	if err != nil {
		return page, s.fail(t, storageOr(asOfError(err)))
	}
	return page, nil
}

// UserGroupsAsOf is GET /users/{username}/groups?as_of=: the groups of the user who held
// the username at that instant.
func (s *Service) UserGroupsAsOf(ctx context.Context, system, tenant, username string, at time.Time, p PageRequest) (asof.Page[asof.Group], error) {
	username, ok := identity.NormalizeUsername(username)
	if !ok {
		return asof.Page[asof.Group]{}, apperr.NotFound("user")
	}
	t, err := s.checkAsOf(ctx, system, tenant, at, p)
	if err != nil {
		return asof.Page[asof.Group]{}, err
	}
	page, err := s.asOfReader(system, tenant).Groups(ctx, t.users, username, asof.Millis(at), p.size(), p.Cursor)
	if errors.Is(err, asof.ErrNotFound) {
		return page, apperr.NotFound("user")
	}
	if err != nil {
		return page, s.fail(t, storageOr(asOfError(err)))
	}
	return page, nil
}

// asOfRoute answers an as-of list when the request asks for one; handled is false for
// the current list.
func asOfRoute[T any](c echo.Context, answer func(context.Context, string, string, string, time.Time, PageRequest) (asof.Page[T], error), param string) (bool, error) {
	at, p, ok, err := asOfQuery(c.Request().URL.RawQuery)
	if !ok {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	system, tenant := tenantOf(c)
	page, err := answer(c.Request().Context(), system, tenant, c.Param(param), at, p)
	if err != nil {
		return true, err
	}
	return true, c.JSON(200, page)
}
