package erasure

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// DefaultFilterTTL is how long a process trusts that an id is not erased before it reads
// the ledger's item for it again. The erasure's second pass waits longer than this
// (DefaultSettle), so a record applied after that pass is filtered by every process
// (docs/erasure.md). That an id is erased is kept for as long as the process runs.
const DefaultFilterTTL = 5 * time.Second

// maxCachedIDs bounds the ids a filter keeps per tenant; beyond, it starts again.
const maxCachedIDs = 200000

// Filter keeps records of erased users from writing anything about them: a record read
// from the stream, or re-driven from the dead letters, after the user was erased. It
// reads, for the ids a record names, the ledger's item of each id's hash (ids.go):
// one BatchGetItem of at most the record's ids, never the ledger, and none for an id it
// has read within the TTL.
type Filter struct {
	ledger *Ledger
	ttl    time.Duration

	mu    sync.Mutex
	cache map[string]map[string]filterEntry // tenant → id hash → what the ledger said
	reads atomic.Int64
}

type filterEntry struct {
	erased bool
	at     time.Time
}

// NewFilter is a filter over ledger; ttl 0 means DefaultFilterTTL.
func NewFilter(ledger *Ledger, ttl time.Duration) *Filter {
	if ttl <= 0 {
		ttl = DefaultFilterTTL
	}
	return &Filter{ledger: ledger, ttl: ttl, cache: map[string]map[string]filterEntry{}}
}

// ItemsRead is how many ledger items the filter has read (ssodir-bench's reads per
// record).
func (f *Filter) ItemsRead() int64 { return f.reads.Load() }

// erased answers, of hashes, those erased in the tenant.
func (f *Filter) erased(ctx context.Context, system, tenant string, hashes []string) (map[string]bool, error) {
	k := tenantKey(system, tenant)
	out := map[string]bool{}
	var ask []string
	now := time.Now()
	f.mu.Lock()
	c := f.cache[k]
	for _, h := range hashes {
		e, ok := c[h]
		switch {
		case ok && e.erased:
			out[h] = true
		case ok && now.Sub(e.at) < f.ttl:
		default:
			ask = append(ask, h)
		}
	}
	f.mu.Unlock()
	if len(ask) == 0 {
		return out, nil
	}
	found, err := f.ledger.erasedAmong(ctx, system, tenant, ask)
	if err != nil {
		return nil, err
	}
	f.reads.Add(int64(len(ask)))
	f.mu.Lock()
	c = f.cache[k]
	if c == nil || len(c) > maxCachedIDs {
		c = map[string]filterEntry{}
		f.cache[k] = c
	}
	for _, h := range ask {
		c[h] = filterEntry{erased: found[h], at: now}
		if found[h] {
			out[h] = true
		}
	}
	f.mu.Unlock()
	return out, nil
}

// Forget drops what the filter knows of a tenant's ids, so that the next record reads the
// ledger (the process that erases calls it at once).
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
	case *events.GroupMemberExpirySet:
		members = []events.Member{{Username: p.Username, UserID: p.UserID}}
	case *events.GroupMembersChanged:
		members = append(append(members, p.Added...), p.Removed...)
	case *events.GroupRenamed:
		for _, m := range p.Members {
			members = append(members, events.Member{Username: m.Username, UserID: m.UserID})
		}
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
	var hashes []string
	if userID != "" {
		hashes = append(hashes, identity.ErasedIDHash(userID))
	}
	for _, m := range members {
		if m.UserID != "" {
			hashes = append(hashes, identity.ErasedIDHash(m.UserID))
		}
	}
	if len(hashes) == 0 {
		return false, nil
	}
	ids, err := f.erased(ctx, system, tenant, hashes)
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

// erasedAmong reads the ledger's items of hashes (BatchGetItem, 100 at a time): those
// that are there are erased ids.
func (l *Ledger) erasedAmong(ctx context.Context, system, tenant string, hashes []string) (map[string]bool, error) {
	out := map[string]bool{}
	for start := 0; start < len(hashes); start += 100 {
		keys := make([]map[string]types.AttributeValue, 0, 100)
		seen := map[string]bool{}
		for _, h := range hashes[start:min(start+100, len(hashes))] {
			if !seen[h] {
				seen[h] = true
				keys = append(keys, idKey(system, tenant, h))
			}
		}
		req := map[string]types.KeysAndAttributes{l.table: {Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("erasure_id")}}
		for attempt := 0; len(req) > 0 && len(req[l.table].Keys) > 0; attempt++ {
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(min(attempt, 10)) * 20 * time.Millisecond):
				}
			}
			res, err := l.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("read the erased ids of %s: %w", tenantKey(system, tenant), dynamo.Translate(err))
			}
			for _, it := range res.Responses[l.table] {
				out[attrS(it, "erasure_id")] = true
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}
