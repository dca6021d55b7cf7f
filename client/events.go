package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Event is one change of a tenant's change feed, a CloudEvents 1.0 object (API.md
// "Changes out").
type Event struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject,omitempty"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            EventData `json:"data"`
}

// EventData is a change: the aggregate's immutable id and version after the change, who
// made it, the field-level change set and the state after it (a user or a group, never
// a password), as raw JSON to decode into User- or Group-shaped values.
type EventData struct {
	ID      string                     `json:"id"`
	Version int64                      `json:"version"`
	Actor   string                     `json:"actor"`
	Changes map[string]json.RawMessage `json:"changes"`
	State   json.RawMessage            `json:"state"`
}

// EventsPage is one answer of GET /events: NextCursor is always set, and a walk goes on
// from it whether or not the page held changes.
type EventsPage struct {
	Items      []Event `json:"items"`
	NextCursor string  `json:"next_cursor"`
}

// EventsOptions tune a walk of the change feed.
type EventsOptions struct {
	// After is a cursor to go on from (a NextCursor kept earlier); "": from the oldest
	// change the feed keeps.
	After string
	// Limit is the page size (1–500; 0: the server's default).
	Limit int
	// Wait is how long the server holds an empty page open for a change (whole seconds,
	// at most 20; 0: answer at once).
	Wait time.Duration
	// Follow keeps the walk going when the feed is read to its end, waiting for changes
	// (with Wait, or 20 s when Wait is 0) until ctx ends; without it the walk ends at the
	// first empty page.
	Follow bool
}

// ReadEvents reads one page of the change feed after cursor ("" for the first).
func (t *TenantClient) ReadEvents(ctx context.Context, cursor string, limit int, wait time.Duration) (*EventsPage, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("after", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if s := int(wait / time.Second); s > 0 {
		q.Set("wait", strconv.Itoa(min(s, 20)))
	}
	r, err := t.c.newRequest(t.c.query, http.MethodGet, t.path("/events"), nil, nil)
	if err != nil {
		return nil, err
	}
	r.query = q
	resp, err := t.c.do(ctx, r)
	if err != nil {
		return nil, err
	}
	var page EventsPage
	if err := decode(resp, r, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Events iterates over the tenant's change feed: every change once, each aggregate's in
// version order. Each change comes with a cursor to resume from (EventAt). An error ends
// the walk; client.HasCode(err, CodeCursorExpired) (410) means the cursor is older than the
// feed's retention: start again without one.
func (t *TenantClient) Events(ctx context.Context, o EventsOptions) iter.Seq2[EventAt, error] {
	return func(yield func(EventAt, error) bool) {
		cursor, wait := o.After, o.Wait
		if o.Follow && wait <= 0 {
			wait = 20 * time.Second
		}
		for {
			page, err := t.ReadEvents(ctx, cursor, o.Limit, wait)
			if err != nil {
				yield(EventAt{}, err)
				return
			}
			for i, ev := range page.Items {
				// Within a page, only the last change's cursor is the server's: the
				// others resume from the page's start, which gives the changes again.
				at := EventAt{Event: ev, Cursor: cursor}
				if i == len(page.Items)-1 {
					at.Cursor = page.NextCursor
				}
				if !yield(at, nil) {
					return
				}
			}
			cursor = page.NextCursor
			if len(page.Items) == 0 && (!o.Follow || ctx.Err() != nil) {
				return
			}
		}
	}
}

// EventAt is a change and a cursor to resume from: after it, or — for a change that is
// not the last of its page — before the page it came in (resuming there gives some
// changes again, never skips one).
type EventAt struct {
	Event  Event
	Cursor string
}
