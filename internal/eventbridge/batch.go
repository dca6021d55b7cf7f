package eventbridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/ssodir/ssodir/internal/changefeed"
)

// PutEvents' limits (docs/events.md, "EventBridge").
const (
	// MaxEntries is the most entries one PutEvents call takes.
	MaxEntries = 10
	// MaxRequestBytes is the most one call's entries may weigh together, by EntrySize.
	MaxRequestBytes = 256 << 10
	// timeBytes is what an entry's Time counts for (AWS: 14 bytes when it is set).
	timeBytes = 14
)

// EntrySize is an entry's size as AWS counts it: Time 14 bytes when set; Source,
// DetailType, Detail and every resource by the bytes of their UTF-8 form.
func EntrySize(e types.PutEventsRequestEntry) int {
	n := len(aws.ToString(e.Source)) + len(aws.ToString(e.DetailType)) + len(aws.ToString(e.Detail))
	if e.Time != nil {
		n += timeBytes
	}
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}

// Source is a tenant's EventBridge source: ssodir.<system>.<tenant>.
func Source(system, tenant string) string { return "ssodir." + system + "." + tenant }

// entry is the PutEvents entry of one change: detail-type the CloudEvent's type, detail the
// CloudEvent. A CloudEvent that would make the entry over 256 KB alone goes trimmed
// (changefeed.Trim: data is {id, version, actor, truncated, href}); the whole change is in
// the feed, found by its id.
func entry(bus, system, tenant string, raw []byte) (types.PutEventsRequestEntry, error) {
	var head struct {
		Type string    `json:"type"`
		Time time.Time `json:"time"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return types.PutEventsRequestEntry{}, fmt.Errorf("eventbridge: decode a change: %w", err)
	}
	e := types.PutEventsRequestEntry{EventBusName: aws.String(bus), Source: aws.String(Source(system, tenant)),
		DetailType: aws.String(head.Type)}
	if !head.Time.IsZero() {
		e.Time = aws.Time(head.Time)
	}
	room := MaxRequestBytes - EntrySize(e)
	detail, err := changefeed.Trim(raw, room)
	if err != nil {
		return types.PutEventsRequestEntry{}, err
	}
	e.Detail = aws.String(string(detail))
	return e, nil
}

// next is how many of the pending entries go in the next call: a prefix (the cursor moves
// over whole calls) of at most MaxEntries entries and MaxRequestBytes, and at most one
// entry of each aggregate, so that a call's partial failure, whose failed entries are sent
// again, never lets an aggregate's later change overtake an earlier one.
func next(entries []types.PutEventsRequestEntry, aggregates []string) int {
	size, seen := 0, map[string]bool{}
	for i, e := range entries {
		if i == MaxEntries || seen[aggregates[i]] || (i > 0 && size+EntrySize(e) > MaxRequestBytes) {
			return i
		}
		seen[aggregates[i]] = true
		size += EntrySize(e)
	}
	return len(entries)
}

// errLeaseLost stops a tenant's publishing: another process holds its lease now.
var errLeaseLost = errors.New("eventbridge: the tenant's lease was lost")

// send puts entries until every one is accepted: the failed entries of a partial failure
// and the whole call on an error (throttling, a 5xx) are sent again with backoff. Before
// every call it checks the lease (held reports whether it still is, with a margin that
// covers a call), so that a process that lost it never sends beside the new holder.
func (p *Publisher) send(ctx context.Context, entries []types.PutEventsRequestEntry, held func() bool) error {
	backoff := p.cfg.MinBackoff
	for attempt := 1; len(entries) > 0; attempt++ {
		if !held() {
			return errLeaseLost
		}
		callCtx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout)
		out, err := p.cfg.API.PutEvents(callCtx, &eventbridge.PutEventsInput{Entries: entries})
		cancel()
		switch {
		case err != nil:
			p.metrics.callErrors.Add(1)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p.logRetry(attempt, "put events", err)
		case out.FailedEntryCount == 0 && len(out.Entries) == len(entries):
			p.metrics.published.Add(int64(len(entries)))
			return nil
		default:
			var failed []types.PutEventsRequestEntry
			for i, e := range entries {
				if i >= len(out.Entries) || aws.ToString(out.Entries[i].ErrorCode) != "" {
					failed = append(failed, e)
				}
			}
			p.metrics.published.Add(int64(len(entries) - len(failed)))
			p.metrics.failedEntries.Add(int64(len(failed)))
			entries = failed
			if len(entries) == 0 {
				return nil
			}
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, p.cfg.MaxBackoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil
}
