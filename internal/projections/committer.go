package projections

import (
	"context"
	"sync"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// Defaults of a Committer.
const (
	// maxGroup bounds the events one commit applies together: the projector's stream
	// consumer keeps up to 64 records of a shard in flight.
	maxGroup = 64
	// maxCommits is how many commits of one pair of tables run at once. A record that
	// arrives while fewer run is committed at once, so a quiet tenant pays no wait; under
	// load the records that arrive while these run form the next groups.
	maxCommits = 2
	// commitTimeout bounds one commit, which outlives the callers that gave up on it.
	commitTimeout = 30 * time.Second
	// perListedMember is what a commit's bound grows by for each member a record lists
	// (a group rename moves, a group delete writes feed items for, up to 10,000 and more).
	perListedMember = 60 * time.Millisecond
)

// Committer is group commit for the live projector: events handed to Apply concurrently
// (records of different aggregates, which the stream consumer delivers in parallel) are
// applied together with ApplyBatch, whose conditional writes go out a transaction per 25
// items and its activity items a BatchWriteItem per 25, instead of a PutItem each. Every
// caller gets the outcome of its own event: if a group fails as a whole, each of its
// events is applied again on its own with Apply, so that an event that cannot be written
// (an item over DynamoDB's size limit, say) fails alone and holds no other back. Both
// paths leave the tables as Apply of each event would, in any order, so grouping changes
// nothing a reader can see.
type Committer struct {
	p *Projector
	t Tables

	mu      sync.Mutex
	queue   []*pendingEvent
	running int
}

type pendingEvent struct {
	e    events.Envelope
	done chan error
	// viewed (may be nil) is called once, as soon as the event's aggregate view holds its
	// version; once guards it, since the group and the fallback may both get there.
	viewed func()
	once   sync.Once
}

func (pe *pendingEvent) seen() {
	if pe.viewed != nil {
		pe.once.Do(pe.viewed)
	}
}

// Committer applies events to t in groups.
func (p *Projector) Committer(t Tables) *Committer { return &Committer{p: p, t: t} }

// Apply projects e, together with whatever other events are being applied at the same
// moment, and returns once e is written, or ctx is done (the commit then still runs to
// its end: its writes are idempotent and "only if newer", so a redelivery may follow).
//
// viewed, if not nil, is called once as soon as the view of e's aggregate (its `config`
// item) holds e's version or a newer one: when the transaction that wrote it is done,
// which is after the group's memberships (a reader who sees a group's version finds the
// memberships it changed) and before its cascade and activity items, so that a reader
// waiting for that version (X-Min-Version) need not wait for the rest of the group. It is called
// from the commit's goroutine and must not block; it may be called although Apply then
// fails on a later write of e.
func (c *Committer) Apply(ctx context.Context, e events.Envelope, viewed func()) error {
	if err := c.t.validate(); err != nil {
		return err
	}
	pe := &pendingEvent{e: e, done: make(chan error, 1), viewed: viewed}
	c.mu.Lock()
	c.queue = append(c.queue, pe)
	if c.running < maxCommits {
		c.running++
		go c.commitQueued()
	}
	c.mu.Unlock()
	select {
	case err := <-pe.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// commitQueued commits groups from the queue until it is empty.
func (c *Committer) commitQueued() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running--
			c.mu.Unlock()
			return
		}
		n := min(len(c.queue), maxGroup)
		group := make([]*pendingEvent, n)
		copy(group, c.queue)
		c.queue = append(c.queue[:0], c.queue[n:]...)
		c.mu.Unlock()
		c.commit(group)
	}
}

func (c *Committer) commit(group []*pendingEvent) {
	timeout := commitTimeout
	for _, pe := range group {
		timeout += time.Duration(listedMembers(pe.e)) * perListedMember
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if len(group) > 1 {
		es := make([]events.Envelope, len(group))
		byView := map[string][]*pendingEvent{}
		for i, pe := range group {
			es[i] = pe.e
			if pe.viewed != nil {
				k := dynamo.AggregateID(pe.e.Kind, pe.e.Key) + "/" + dynamo.SKConfig
				byView[k] = append(byView[k], pe)
			}
		}
		viewed := func(key string, version int64) {
			for _, pe := range byView[key] {
				if pe.e.Version <= version {
					pe.seen()
				}
			}
		}
		if _, err := c.p.applyBatch(ctx, c.t, es, c.p.reducers, false, viewed); err == nil {
			for _, pe := range group {
				pe.seen() // an event whose view was not among the items written
				pe.done <- nil
			}
			return
		}
	}
	var wg sync.WaitGroup
	for _, pe := range group {
		wg.Go(func() { pe.done <- c.p.apply(ctx, c.t, pe.e, pe.seen) })
	}
	wg.Wait()
}

// listedMembers is how many members a record lists whose views or feed items it writes
// one by one: a group rename's, a group delete's, a members change's (up to 1,000).
func listedMembers(e events.Envelope) int {
	switch p := e.Payload.(type) {
	case *events.GroupRenamed:
		return len(p.Members)
	case *events.GroupDeleted:
		return len(p.Members)
	case *events.GroupMembersChanged:
		return len(p.Added) + len(p.Removed)
	}
	return 0
}
