package scim

import (
	"sync"
	"time"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// Index paging (startIndex and count, as Okta pages) of an unfiltered list costs its page,
// like a cursor page: the page's id lookups are read from the previous page's last id on
// (ExclusiveStartKey), in the order of the ids, which never change, so a user created or
// deleted during a walk shifts nothing that the walk has not reached. startIndex is mapped
// onto that id by a bookmark each page leaves for the next (startIndex+count), with the
// walk's totalResults: kept in the process's memory and in DynamoDB (the store's page marks,
// one small write per page) for bookmarkTTL, so that a process without it in memory (another
// Lambda instance) reads one item instead of the walk so far. The total is read once per
// walk, on its first page, from the tenant's count of live users or groups (one
// BatchGetItem of a few small items, whatever the tenant's size), and carried by the
// bookmarks, so a walk's later pages report the total of its start. A tenant whose count
// has no base yet (one that had users before the count existed) counts its id lookups once
// (a COUNT Query), which writes the base. A page no bookmark leads to (a jump, or a mark
// past its TTL or not written) costs its page too, whatever its startIndex: the count of
// live users counts each of 4,096 blocks of the ids' order (dynamo's idblocks.go), so the
// jump reads those counts (one BatchGetItem of 18 small items), the id lookups from the
// start of the block the page starts in — the page, and at most a block before it:
// n/8,192 lookups on average for a tenant of n (about 12 for 100,000, whose blocks hold
// some 25) — and the page's resources. A tenant's first jump, when its blocks have no
// base yet, reads every id lookup once to write it. A jump's totalResults is the
// tenant's at the jump, and it leaves a bookmark for the next page as any page does.

// bookmarkTTL is how long a page's bookmark waits for the next page.
const bookmarkTTL = 15 * time.Minute

// maxBookmarks bounds the bookmarks a process keeps (a few hundred bytes each).
const maxBookmarks = 20_000

type bookmarkKey struct {
	scope string
	kind  events.AggregateKind
	index int
}

type bookmark struct {
	after string
	total int
	until time.Time
}

type bookmarks struct {
	mu    sync.Mutex
	marks map[bookmarkKey]bookmark
}

func (b *bookmarks) get(k bookmarkKey, now time.Time) (bookmark, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.marks[k]
	if !ok || !now.Before(m.until) {
		return bookmark{}, false
	}
	return m, true
}

func (b *bookmarks) put(k bookmarkKey, m bookmark, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.marks == nil {
		b.marks = map[bookmarkKey]bookmark{}
	}
	if len(b.marks) >= maxBookmarks {
		for key, old := range b.marks {
			if !now.Before(old.until) {
				delete(b.marks, key)
			}
		}
		// Still full: forget any, a walk that loses its bookmark reads its way back.
		for key := range b.marks {
			if len(b.marks) < maxBookmarks {
				break
			}
			delete(b.marks, key)
		}
	}
	b.marks[k] = m
}

// pageByIndex is the page of lookups an index query of an unfiltered list asks for, and
// the list's total.
func (s *server) pageByIndex(cl *call, kind events.AggregateKind, q listQuery) ([]commands.Lookup, int, error) {
	now := s.now()
	after, total := "", -1
	var (
		ls   []commands.Lookup
		more bool
		err  error
	)
	if q.startIndex > 1 {
		m, ok := s.marks.get(bookmarkKey{q.scope, kind, q.startIndex}, now)
		if !ok {
			m.after, m.total, ok, err = s.store.PageMark(cl.ctx, cl.tenant, kind, q.startIndex)
			if err != nil {
				return nil, 0, err
			}
		}
		if ok {
			after, total = m.after, m.total
		} else {
			// A jump: the block counts say where the page starts.
			ls, total, more, err = s.store.PageAt(cl.ctx, cl.tenant, kind, q.startIndex-1, q.count)
			if err != nil {
				return nil, 0, err
			}
			s.markNext(cl, kind, q, ls, more, total, now)
			return ls, total, nil
		}
	}
	if total < 0 {
		n, known, err := s.store.LiveCount(cl.ctx, cl.tenant, kind)
		if err == nil && !known {
			n, err = s.store.CountLive(cl.ctx, cl.tenant, kind)
		}
		if err != nil {
			return nil, 0, err
		}
		total = n
	}
	if q.count == 0 {
		return nil, total, nil
	}
	if ls, more, err = s.store.PageIDs(cl.ctx, cl.tenant, kind, after, q.count); err != nil {
		return nil, 0, err
	}
	s.markNext(cl, kind, q, ls, more, total, now)
	return ls, total, nil
}

// markNext leaves the bookmark of the page after ls, when one may follow.
func (s *server) markNext(cl *call, kind events.AggregateKind, q listQuery, ls []commands.Lookup, more bool, total int, now time.Time) {
	if !more || len(ls) == 0 {
		return
	}
	next, m := q.startIndex+len(ls), bookmark{after: ls[len(ls)-1].ID, total: total, until: now.Add(bookmarkTTL)}
	s.marks.put(bookmarkKey{q.scope, kind, next}, m, now)
	// A mark not written costs the walk's next page, if another process serves it, a
	// jump: not a reason to fail this page.
	_ = s.store.PutPageMark(cl.ctx, cl.tenant, kind, next, m.after, m.total, m.until)
}

func (s *server) usersByIndex(cl *call, q listQuery) error {
	pg, total, err := s.pageByIndex(cl, events.KindUser, q)
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
	return cl.writeList(q, total, out, "")
}

func (s *server) groupsByIndex(cl *call, q listQuery) error {
	pg, total, err := s.pageByIndex(cl, events.KindGroup, q)
	if err != nil {
		return err
	}
	out, err := s.renderGroups(cl, keysOf(pg), q.proj.wants("members"), q.proj)
	if err != nil {
		return err
	}
	return cl.writeList(q, total, out, "")
}
