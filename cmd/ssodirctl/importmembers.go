package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/ssodir/ssodir/client"
)

// importMembers sends an import's memberships as members changes (POST
// /groups/{name}/members), group by group, while the users are still being created: a
// group has at most one change in flight, so its changes never race one another for the
// group's version. A change goes out once memberBatch memberships of the group are waiting
// (up to the limits of one request), once the oldest has waited memberWait, or once every
// line is done: a thousand lines of one group cost a few commands instead of a thousand
// that queue behind one group version, and each command's own cost (its transaction, its
// reads of the group) is shared by hundreds of members.
type importMembers struct {
	t   *client.TenantClient
	sum *summary
	// expires, when not nil, is when every membership the import adds ends by itself
	// (--expires-at; a user already a member keeps its expiry).
	expires *time.Time

	mu     sync.Mutex
	groups map[string]*memberQueue // by lower-cased name
	// done is closed when every line is done: what waits goes out at once.
	done   chan struct{}
	closed bool
	wg     sync.WaitGroup
	err    error
}

// memberBatch and memberWait decide when a group's waiting memberships go out.
const (
	memberBatch = 500
	memberWait  = 2 * time.Second
)

type memberQueue struct {
	name    string
	pending []pendingMember
	sending bool
	// full is signalled when memberBatch memberships wait.
	full chan struct{}
	// version is the group's version after its last change, for the read back.
	version int64
}

type pendingMember struct {
	line     int
	username string
	at       time.Time
}

func newImportMembers(t *client.TenantClient, sum *summary, expires *time.Time) *importMembers {
	return &importMembers{t: t, sum: sum, expires: expires, groups: map[string]*memberQueue{}, done: make(chan struct{})}
}

// chunks are the members changes that add names, with their expiry when there is one.
func (m *importMembers) chunks(names []string) []client.MembersChange {
	if m.expires != nil {
		return client.MembersChunksUntil(names, *m.expires)
	}
	return client.MembersChunks(names, nil)
}

// add queues the membership of line's user in group and starts the group's sender if it
// is idle. ctx bounds the sending.
func (m *importMembers) add(ctx context.Context, group string, line int, username string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := strings.ToLower(group)
	q, ok := m.groups[key]
	if !ok {
		q = &memberQueue{name: group, full: make(chan struct{}, 1)}
		m.groups[key] = q
	}
	q.pending = append(q.pending, pendingMember{line: line, username: username, at: time.Now()})
	if len(q.pending) >= memberBatch {
		select {
		case q.full <- struct{}{}:
		default:
		}
	}
	if !q.sending {
		q.sending = true
		m.wg.Add(1)
		go m.send(ctx, q)
	}
}

// send sends q's pending memberships until none are left.
func (m *importMembers) send(ctx context.Context, q *memberQueue) {
	defer m.wg.Done()
	for {
		m.mu.Lock()
		if len(q.pending) == 0 || m.err != nil {
			q.sending = false
			m.mu.Unlock()
			return
		}
		if wait := memberWait - time.Since(q.pending[0].at); len(q.pending) < memberBatch && wait > 0 && !m.closed {
			m.mu.Unlock()
			select {
			case <-q.full:
			case <-m.done:
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		names := make([]string, len(q.pending))
		for i, p := range q.pending {
			names[i] = p.username
		}
		n := len(m.chunks(names)[0].Add)
		batch := q.pending[:n:n]
		q.pending = q.pending[n:]
		m.mu.Unlock()
		if err := m.change(ctx, q, batch); err != nil {
			m.mu.Lock()
			if m.err == nil {
				m.err = fmt.Errorf("memberships of %s: %w", q.name, err)
			}
			m.mu.Unlock()
		}
	}
}

// change adds batch to q's group in one command. Users the command API does not know (a
// user deleted meanwhile) fail the whole change with each of them named: they become
// conflicts and the rest is sent again.
func (m *importMembers) change(ctx context.Context, q *memberQueue, batch []pendingMember) error {
	for len(batch) > 0 {
		names := make([]string, len(batch))
		for i, p := range batch {
			names[i] = p.username
		}
		key := []string{strings.ToLower(q.name), strings.Join(names, ",")}
		if m.expires != nil {
			key = append(key, m.expires.UTC().Format(time.RFC3339Nano))
		}
		g, err := m.t.ChangeMembers(ctx, q.name, m.chunks(names)[0], client.IdempotencyKey(importKey("members", 0, key)))
		if err == nil {
			m.mu.Lock()
			q.version = g.Version
			m.mu.Unlock()
			m.sum.mu.Lock()
			m.sum.Memberships += len(batch)
			m.sum.mu.Unlock()
			return nil
		}
		e, perLine := lineError(err)
		if !perLine {
			return err
		}
		unknown := map[string]bool{}
		for _, f := range e.Errors {
			if u, ok := strings.CutPrefix(f.Message, "no user "); ok {
				unknown[u] = true
			}
		}
		var rest, gone []pendingMember
		for _, p := range batch {
			if unknown[p.username] {
				gone = append(gone, p)
			} else {
				rest = append(rest, p)
			}
		}
		if len(gone) == 0 {
			// Not the users: the group (deleted meanwhile, say) fails every line.
			gone, rest = batch, nil
		}
		for _, p := range gone {
			why := "the user is gone"
			if !unknown[p.username] {
				why = reason(e)
			}
			m.sum.add(outcome{line: p.line, name: p.username, status: "conflict", reason: "membership of " + q.name + ": " + why})
		}
		batch = rest
	}
	return nil
}

// wait sends what waits at once, waits for every group's changes, and returns the first
// failure and the groups' versions after them.
func (m *importMembers) wait() (map[string]int64, error) {
	m.mu.Lock()
	if !m.closed {
		m.closed = true
		close(m.done)
	}
	m.mu.Unlock()
	m.wg.Wait()
	versions := map[string]int64{}
	for _, q := range m.groups {
		if q.version > 0 {
			versions[q.name] = q.version
		}
	}
	return versions, m.err
}

// addExpiryFlag adds import users' --expires-at.
func addExpiryFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "expires-at", "", "RFC 3339 instant at which every membership the import adds ends by itself "+
		"(users already members keep theirs)")
}

// importExpiry is --expires-at: nil when not given; a usage error when it is not an RFC
// 3339 instant after now (the API refuses an expiry in the past).
func importExpiry(flag string, now time.Time) (*time.Time, error) {
	if flag == "" {
		return nil, nil
	}
	at, err := time.Parse(time.RFC3339Nano, flag)
	if err != nil {
		return nil, usagef("--expires-at: %q is not an RFC 3339 instant (such as 2030-03-31T17:00:00Z)", flag)
	}
	if !at.After(now) {
		return nil, usagef("--expires-at: %s is not in the future", flag)
	}
	return &at, nil
}
