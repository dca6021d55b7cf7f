package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"time"

	"github.com/ssodir/ssodir/internal/objects"
)

// AccessRow is one membership interval of the access report (docs/history.md): the
// query API's own type.
type AccessRow = objects.AccessRow

// UserPeriod is a period of a user's life: Status is active, inactive, deleted or unknown;
// To is nil while it lasts.
type UserPeriod = objects.UserPeriod

// Report formats.
const (
	ReportJSON = "json"
	ReportCSV  = "csv"
)

// AccessReport opens GET /access-report for [from, to) in format (ReportJSON or
// ReportCSV): the caller reads the answer's body as it streams and closes it. A refusal
// is an *Error (history_not_kept, validation_failed); a 503 before the answer is retried
// as other reads. A report cut short by the server fails the body's Read (never a
// shorter report that ends cleanly).
func (t *TenantClient) AccessReport(ctx context.Context, from, to time.Time, format string) (io.ReadCloser, error) {
	q := url.Values{"from": {from.UTC().Format(time.RFC3339Nano)}, "to": {to.UTC().Format(time.RFC3339Nano)}}
	if format != "" {
		q.Set("format", format)
	}
	c := t.c
	r := &request{base: c.query, method: http.MethodGet, path: t.path("/access-report"), query: q}
	for attempt := 1; ; attempt++ {
		hr, err := c.open(ctx, r)
		var wait time.Duration
		cause := err
		switch {
		case err != nil:
			if ctx.Err() != nil || attempt >= c.cfg.MaxAttempts {
				return nil, err
			}
			wait = c.backoff(attempt)
		case hr.StatusCode >= 200 && hr.StatusCode < 300:
			return hr.Body, nil
		default:
			body, _ := io.ReadAll(io.LimitReader(hr.Body, 1<<20))
			hr.Body.Close()
			perr := problem(r, &response{status: hr.StatusCode, header: hr.Header, body: body})
			if hr.StatusCode != http.StatusServiceUnavailable || attempt >= c.cfg.MaxAttempts ||
				(perr.RetryAfter > 0 && perr.RetryAfter > c.cfg.MaxRetryAfter) {
				return nil, perr
			}
			wait = max(c.backoff(attempt), perr.RetryAfter)
			cause = perr
		}
		if err := c.pause(ctx, r, attempt, wait, cause); err != nil {
			return nil, err
		}
	}
}

// AccessRows iterates over the JSON access report of [from, to) as it streams, holding
// one row at a time.
func (t *TenantClient) AccessRows(ctx context.Context, from, to time.Time) iter.Seq2[AccessRow, error] {
	return func(yield func(AccessRow, error) bool) {
		body, err := t.AccessReport(ctx, from, to, ReportJSON)
		if err != nil {
			yield(AccessRow{}, err)
			return
		}
		defer body.Close()
		dec := json.NewDecoder(body)
		fail := func(err error) { yield(AccessRow{}, fmt.Errorf("access report: %w", err)) }
		// {"from": …, "to": …, "items": [ row, … ]}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			fail(errors.Join(err, errors.New("not a report")))
			return
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				fail(err)
				return
			}
			if k != "items" {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					fail(err)
					return
				}
				continue
			}
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				fail(errors.Join(err, errors.New("items is not a list")))
				return
			}
			for dec.More() {
				var row AccessRow
				if err := dec.Decode(&row); err != nil {
					fail(err)
					return
				}
				if !yield(row, nil) {
					return
				}
			}
			if _, err := dec.Token(); err != nil {
				fail(err)
				return
			}
		}
		if _, err := dec.Token(); err != nil {
			fail(err)
		}
	}
}
