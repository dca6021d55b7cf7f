package scim

import (
	"fmt"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// MaxFilterScan bounds a filter the lookups cannot answer (one on name, active, title…):
// it reads the tenant's users (groups) in the order of their ids, loadChunk at a time,
// evaluates the filter on each and keeps only the page it answers, and gives up with 400
// tooMany (RFC 7644 3.4.2.2) past this many. A provider filters by userName, externalId,
// emails, id, displayName or members (answered through lookups), or pages without a filter.
const MaxFilterScan = 10_000

// MaxInlineMembers bounds the members one answer inlines, so that no answer passes
// Lambda's 6 MB: a group whose members would pass what is left of it is answered without
// its members attribute (RFC 7644 lets a service provider leave out an attribute it
// returns by default); GET /Groups/{id}/… with excludedAttributes, or PATCH, still work for
// it. Lists spend it in order over their groups.
const MaxInlineMembers = 5_000

// memberBudget is what is left of MaxInlineMembers for one answer.
type memberBudget struct{ left int }

func (s *server) newMemberBudget() *memberBudget {
	return &memberBudget{left: s.limits.InlineMembers}
}

// take reports whether n more members fit, and spends them if so.
func (b *memberBudget) take(n int) bool {
	if n > b.left {
		return false
	}
	b.left -= n
	return true
}

func tooManyToScan(kind events.AggregateKind, limit int) error {
	return badRequest(typeTooMany, fmt.Sprintf("this filter would read more than %d %ss; filter by an attribute the lookups answer (see the documentation) or page without a filter", limit, kind))
}

// scanWindow collects the page of a scanned list: by index (from startIndex, count of
// them, and every match counted for totalResults) or by cursor (count of them after the
// cursor, then the next cursor, and no total).
type scanWindow struct {
	kind  events.AggregateKind
	q     listQuery
	after string
	// total counts the matches; out holds the page's, rendered.
	total int
	out   []any
	last  string
	next  string
}

func newScanWindow(kind events.AggregateKind, q listQuery) (*scanWindow, error) {
	w := &scanWindow{kind: kind, q: q}
	if q.cursor != nil {
		after, err := decodeCursor(kind, q, *q.cursor)
		if err != nil {
			return nil, err
		}
		w.after = after
	}
	return w, nil
}

// add records a match, rendered by render only if the page holds it; it reports whether
// the scan may stop (a cursor page that knows its next cursor).
func (w *scanWindow) add(id string, render func() (any, error)) (stop bool, err error) {
	idx := w.total
	w.total++
	if w.q.cursor != nil {
		if len(w.out) == w.q.count {
			if w.q.count > 0 {
				w.next = encodeCursor(w.kind, w.q, w.last)
			}
			return true, nil
		}
	} else if idx < w.q.startIndex-1 || idx >= w.q.startIndex-1+w.q.count {
		return false, nil
	}
	r, err := render()
	if err != nil {
		return true, err
	}
	w.out = append(w.out, r)
	w.last = id
	return false, nil
}

// scan walks the lookups of kind after the window's cursor, loadChunk at a time, calling
// visit with each chunk until it stops, and fails with tooMany past MaxFilterScan.
func (s *server) scan(cl *call, w *scanWindow, visit func([]commands.Lookup) (stop bool, err error)) error {
	var chunk []commands.Lookup
	scanned := 0
	var err error
	stopped := false
	flush := func() bool {
		if len(chunk) == 0 {
			return true
		}
		var stop bool
		stop, err = visit(chunk)
		chunk = chunk[:0]
		stopped = stop
		return err == nil && !stop
	}
	lerr := s.store.ListIDs(cl.ctx, cl.tenant, w.kind, w.after, func(l commands.Lookup) bool {
		if scanned++; scanned > s.limits.FilterScan {
			err = tooManyToScan(w.kind, s.limits.FilterScan)
			return false
		}
		chunk = append(chunk, l)
		if len(chunk) == loadChunk {
			return flush()
		}
		return true
	})
	if lerr != nil {
		return lerr
	}
	if err == nil && !stopped {
		flush()
	}
	return err
}

func (w *scanWindow) write(cl *call) error {
	total := w.total
	if w.q.cursor != nil {
		total = -1
	}
	return cl.writeList(w.q, total, w.out, w.next)
}

// scanUsers answers a user filter the lookups cannot answer.
func (s *server) scanUsers(cl *call, q listQuery) error {
	w, err := newScanWindow(events.KindUser, q)
	if err != nil {
		return err
	}
	err = s.scan(cl, w, func(chunk []commands.Lookup) (bool, error) {
		users, err := s.loadUsers(cl, keysOf(chunk))
		if err != nil {
			return true, err
		}
		for _, l := range chunk {
			u, ok := users[l.Key]
			if !ok || !u.Live() || u.State.ID != l.ID {
				continue
			}
			res := renderUser(u.State, cl.base)
			if !matches(q.filter, lowerKeys(res).(map[string]any)) {
				continue
			}
			if stop, err := w.add(l.ID, func() (any, error) { return q.proj.apply(res), nil }); stop || err != nil {
				return true, err
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	return w.write(cl)
}

// scanGroups answers a group filter the lookups cannot answer.
func (s *server) scanGroups(cl *call, q listQuery) error {
	w, err := newScanWindow(events.KindGroup, q)
	if err != nil {
		return err
	}
	withMembers := q.proj.wants("members")
	filterMembers := mentions(q.filter, "members")
	budget := s.newMemberBudget()
	err = s.scan(cl, w, func(chunk []commands.Lookup) (bool, error) {
		groups, err := s.store.LoadGroups(cl.ctx, cl.tenant, keysOf(chunk))
		if err != nil {
			return true, err
		}
		for _, l := range chunk {
			g, ok := groups[l.Key]
			if !ok || !g.Live() || g.State.ID != l.ID {
				continue
			}
			var ms []member
			if filterMembers {
				if ms, err = s.members(cl, g.State.Key); err != nil {
					return true, err
				}
			}
			if !matches(q.filter, lowerKeys(renderGroup(g.State, ms, filterMembers, cl.base)).(map[string]any)) {
				continue
			}
			stop, err := w.add(l.ID, func() (any, error) {
				with := withMembers
				if with && !filterMembers {
					var err error
					if ms, with, err = s.inlineMembers(cl, g.State.Key, budget); err != nil {
						return nil, err
					}
				} else {
					with = with && budget.take(len(ms))
				}
				return q.proj.apply(renderGroup(g.State, ms, with, cl.base)), nil
			})
			if stop || err != nil {
				return true, err
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	return w.write(cl)
}
