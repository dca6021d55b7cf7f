package projections

import (
	"context"
	"sync"
	"time"
)

// activityBatcher writes the activity items of concurrent Apply calls together, up to 25
// per BatchWriteItem: a call queues its item and waits for the batch that carries it. A
// call that finds fewer than maxFlushers batches in flight sends one itself, with
// whatever is queued by then, so nothing waits for a timer: alone, an item goes out at
// once; under load, items queue while the batches ahead of them are written, and the
// next batch takes them all. The live projector's activity writes then cost a
// twenty-fifth of a request each instead of a PutItem.
type activityBatcher struct {
	mu       sync.Mutex
	queue    map[string][]*queuedActivity // by table
	flushing int
	put      func(ctx context.Context, table string, items []Item) error
}

type queuedActivity struct {
	key  string
	item Item
	done chan error
}

// maxFlushers bounds the batches in flight: DynamoDB Local's writes saturate at about 8
// concurrent callers, and the upserts of the same records are writing too.
const maxFlushers = 4

// flushTimeout bounds one batch, which is sent without the context of any one caller (a
// caller that gives up must not fail the others' items).
const flushTimeout = 30 * time.Second

func newActivityBatcher(put func(ctx context.Context, table string, items []Item) error) *activityBatcher {
	return &activityBatcher{queue: map[string][]*queuedActivity{}, put: put}
}

// write puts item into table and returns when it is written, or when ctx ends.
func (b *activityBatcher) write(ctx context.Context, table string, item Item) error {
	q := &queuedActivity{key: itemKey(item, "pk"), item: item, done: make(chan error, 1)}
	b.mu.Lock()
	b.queue[table] = append(b.queue[table], q)
	flush := b.flushing < maxFlushers
	if flush {
		b.flushing++
	}
	b.mu.Unlock()
	if flush {
		go b.flush()
	}
	select {
	case err := <-q.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flush sends batches until the queue is empty.
func (b *activityBatcher) flush() {
	for {
		table, batch := b.next()
		if batch == nil {
			return
		}
		// BatchWriteItem refuses two requests for one key: a record delivered twice at once
		// is written once, and both callers learn the outcome.
		byKey := map[string]Item{}
		for _, q := range batch {
			byKey[q.key] = q.item
		}
		items := make([]Item, 0, len(byKey))
		for _, it := range byKey {
			items = append(items, it)
		}
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		err := b.put(ctx, table, items)
		cancel()
		for _, q := range batch {
			q.done <- err
		}
	}
}

// next takes up to maxBatchItems queued items of one table, or ends this flusher's turn
// when nothing is queued.
func (b *activityBatcher) next() (string, []*queuedActivity) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for table, queued := range b.queue {
		n := min(len(queued), maxBatchItems)
		batch := queued[:n:n]
		if rest := queued[n:]; len(rest) > 0 {
			b.queue[table] = rest
		} else {
			delete(b.queue, table)
		}
		return table, batch
	}
	b.flushing--
	return "", nil
}
