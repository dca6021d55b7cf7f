package scim

import (
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// A cursor page of an unfiltered list (RFC 9865) costs what it returns: it reads one
// page of the tenant's id lookups, from the cursor on (ExclusiveStartKey), and the
// resources on it, one item each. When the users fill the last page exactly, its
// nextCursor leads to an empty page. Its order is the ids', which never change, so a resource created or
// deleted meanwhile shifts nothing else. It leaves totalResults out: counting the tenant
// would read every lookup on every page.

// pageOfIDs is the page of lookups a cursor query asks for, and the next page's cursor
// ("" after the last).
func (s *server) pageOfIDs(cl *call, kind events.AggregateKind, q listQuery) ([]commands.Lookup, string, error) {
	after, err := decodeCursor(kind, q, *q.cursor)
	if err != nil || q.count == 0 {
		return nil, "", err
	}
	ls, more, err := s.store.PageIDs(cl.ctx, cl.tenant, kind, after, q.count)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if more && len(ls) > 0 {
		// The page ended on its count: another may follow (the last may be empty).
		next = encodeCursor(kind, q, ls[len(ls)-1].ID)
	}
	return ls, next, nil
}

func (s *server) usersByCursor(cl *call, q listQuery) error {
	pg, next, err := s.pageOfIDs(cl, events.KindUser, q)
	if err != nil {
		return err
	}
	users, err := s.store.LoadUsers(cl.ctx, cl.tenant, keysOf(pg))
	if err != nil {
		return err
	}
	out := make([]any, 0, len(pg))
	for _, p := range pg {
		if u, ok := users[p.Key]; ok && u.Live() && u.State.ID == p.ID {
			out = append(out, q.proj.apply(renderUser(u.State, cl.base)))
		}
	}
	return cl.writeList(q, -1, out, next)
}

func (s *server) groupsByCursor(cl *call, q listQuery) error {
	pg, next, err := s.pageOfIDs(cl, events.KindGroup, q)
	if err != nil {
		return err
	}
	out, err := s.renderGroups(cl, keysOf(pg), q.proj.wants("members"), q.proj)
	if err != nil {
		return err
	}
	return cl.writeList(q, -1, out, next)
}
