package keycloak

import "sync"

// Locks serialises the writes to one managed object (by ssodir_id) among the clients that
// share it: the event path's Syncer and a reconcile's Apply hold an object's lock from the
// read that decides a write to the write itself. Keycloak has no conditional write, so
// this is what keeps two writers in one process from interleaving "read version 3, write
// version 4" with "read version 3, write version 5". Writers in other processes are
// ordered by the stream leases, and Apply re-checks after it writes (see Apply).
type Locks struct {
	mu sync.Mutex
	m  map[string]*objectLock
}

type objectLock struct {
	sync.Mutex
	refs int
}

// NewLocks is an empty set of object locks.
func NewLocks() *Locks { return &Locks{m: map[string]*objectLock{}} }

// lock takes the lock of the object id and returns its release.
func (l *Locks) lock(id string) func() {
	l.mu.Lock()
	o := l.m[id]
	if o == nil {
		o = &objectLock{}
		l.m[id] = o
	}
	o.refs++
	l.mu.Unlock()
	o.Lock()
	return func() {
		o.Unlock()
		l.mu.Lock()
		if o.refs--; o.refs == 0 {
			delete(l.m, id)
		}
		l.mu.Unlock()
	}
}

func userLock(id string) string  { return "user:" + id }
func groupLock(id string) string { return "group:" + id }
