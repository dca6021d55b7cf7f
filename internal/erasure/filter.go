package erasure

import (
	"context"
	"sync"
	"time"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// DefaultFilterTTL is how long a process reuses a tenant's erased ids before it reads the
// ledger again. The erasure's second pass waits longer than this (DefaultSettle), so a
// record applied after that pass is filtered by every process (docs/erasure.md).
const DefaultFilterTTL = 5 * time.Second

// Filter keeps records of erased users from writing anything about them: a record read
// from the stream, or re-driven from the dead letters, after the user was erased. It
// reads the ledger's hashed ids, at most once per TTL per tenant.
type Filter struct {
	ledger *Ledger
	ttl    time.Duration

	mu    sync.Mutex
	cache map[string]filterEntry
}

type filterEntry struct {
	ids map[string]bool
	at  time.Time
}

// NewFilter is a filter over ledger; ttl 0 means DefaultFilterTTL.
func NewFilter(ledger *Ledger, ttl time.Duration) *Filter {
	if ttl <= 0 {
		ttl = DefaultFilterTTL
	}
	return &Filter{ledger: ledger, ttl: ttl, cache: map[string]filterEntry{}}
}

func (f *Filter) erased(ctx context.Context, system, tenant string) (map[string]bool, error) {
	k := tenantKey(system, tenant)
	f.mu.Lock()
	c, ok := f.cache[k]
	f.mu.Unlock()
	if ok && time.Since(c.at) < f.ttl {
		return c.ids, nil
	}
	at := time.Now()
	ids, err := f.ledger.ErasedIDHashes(ctx, system, tenant)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.cache[k] = filterEntry{ids: ids, at: at}
	f.mu.Unlock()
	return ids, nil
}

// Forget drops a tenant's cached ids, so that the next record reads the ledger (the
// process that erases calls it at once).
func (f *Filter) Forget(system, tenant string) {
	f.mu.Lock()
	delete(f.cache, tenantKey(system, tenant))
	f.mu.Unlock()
}

// Apply makes e safe to project: skip is true for an event of an erased user (other than
// the user.erased record itself, which carries the erasure out), and an event naming an
// erased member is rewritten to name an erased member, as the erasure rewrote its record.
func (f *Filter) Apply(ctx context.Context, system, tenant string, e *events.Envelope) (skip bool, err error) {
	if e.Type == events.UserErasedType {
		return false, nil
	}
	var (
		userID  string
		members []events.Member
	)
	switch p := e.Payload.(type) {
	case *events.GroupMemberAdded:
		members = []events.Member{{Username: p.Username, UserID: p.UserID}}
	case *events.GroupMemberRemoved:
		members = []events.Member{{Username: p.Username, UserID: p.UserID}}
	case *events.GroupMembersChanged:
		members = append(append(members, p.Added...), p.Removed...)
	default:
		u, ok := events.UserState(e.Payload)
		if !ok {
			return false, nil
		}
		userID = u.ID
		if userID == "" {
			if d, ok := e.Payload.(*events.UserDeleted); ok {
				userID = d.PreviousID
			}
		}
	}
	ids, err := f.erased(ctx, system, tenant)
	if err != nil || len(ids) == 0 {
		return false, err
	}
	if userID != "" {
		return ids[identity.ErasedIDHash(userID)], nil
	}
	for _, m := range members {
		if m.UserID != "" && ids[identity.ErasedIDHash(m.UserID)] {
			subj := NewSubject(m.Username, m.UserID)
			subj.IDOnly = true // by the id: the name may be a later user's
			RewriteEnvelope(e, subj)
		}
	}
	return false, nil
}
