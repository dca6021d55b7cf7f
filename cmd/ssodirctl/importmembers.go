package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/ssodir/ssodir/client"
)

// importMembers sends an import's memberships as members changes (POST
// /groups/{name}/members), group by group, while the users are still being created: a
// group has at most one change in flight, so its changes never race one another for the
// group's version, and each takes every membership of the lines that finished while the
// one before it ran, up to the limits of one request. A thousand lines of one group cost a
// handful of commands instead of a thousand that queue behind one group version.
type importMembers struct {
	t   *client.TenantClient
	sum *summary

	mu     sync.Mutex
	groups map[string]*memberQueue // by lower-cased name
	wg     sync.WaitGroup
	err    error
}

type memberQueue struct {
	name    string
	pending []pendingMember
	sending bool
	// version is the group's version after its last change, for the read back.
	version int64
}

type pendingMember struct {
	line     int
	username string
}

func newImportMembers(t *client.TenantClient, sum *summary) *importMembers {
	return &importMembers{t: t, sum: sum, groups: map[string]*memberQueue{}}
}

// add queues the membership of line's user in group and starts the group's sender if it
// is idle. ctx bounds the sending.
func (m *importMembers) add(ctx context.Context, group string, line int, username string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := strings.ToLower(group)
	q, ok := m.groups[key]
	if !ok {
		q = &memberQueue{name: group}
		m.groups[key] = q
	}
	q.pending = append(q.pending, pendingMember{line: line, username: username})
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
		names := make([]string, len(q.pending))
		for i, p := range q.pending {
			names[i] = p.username
		}
		n := len(client.MembersChunks(names, nil)[0].Add)
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
		g, err := m.t.ChangeMembers(ctx, q.name, client.MembersChange{Add: names},
			client.IdempotencyKey(importKey("members", 0, []string{strings.ToLower(q.name), strings.Join(names, ",")})))
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

// wait waits for every group's changes and returns the first failure, and the groups'
// versions after them.
func (m *importMembers) wait() (map[string]int64, error) {
	m.wg.Wait()
	versions := map[string]int64{}
	for _, q := range m.groups {
		if q.version > 0 {
			versions[q.name] = q.version
		}
	}
	return versions, m.err
}
