package queries

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/changefeed"
)

// The change feed's parameters and bounds (API.md "Changes out").
const (
	paramAfter = "after"
	paramWait  = "wait"
	// MaxEventsWait is the longest `wait`, in seconds.
	MaxEventsWait = 20
	// eventsPoll is how often a waiting request reads the feed's head.
	eventsPoll = 200 * time.Millisecond
	// maxEventWaiters caps the feed reads waiting at once in the process; beyond it a
	// read answers at once, empty (the client polls again).
	maxEventWaiters = 1024
)

// EventsQuery selects a page of the change feed.
type EventsQuery struct {
	// After is the next_cursor of the previous page; empty: from the oldest change kept.
	After string
	Limit int
	// Wait is how long an empty answer is held open for a change to come.
	Wait time.Duration
}

// ParseEventsQuery reads the parameters of GET /events.
func ParseEventsQuery(rawQuery string) (EventsQuery, error) {
	v, err := ParseQuery(rawQuery, paramAfter, paramLimit, paramWait)
	if err != nil {
		return EventsQuery{}, err
	}
	q := EventsQuery{Limit: DefaultLimit}
	var p problems
	if s, ok := one(v, paramLimit); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit || strings.TrimLeft(s, "0123456789") != "" {
			p.Add(paramLimit, "must be an integer from 1 to 500")
		}
		q.Limit = n
	}
	if s, ok := one(v, paramWait); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > MaxEventsWait || strings.TrimLeft(s, "0123456789") != "" {
			p.Add(paramWait, "must be a whole number of seconds from 0 to 20")
		}
		q.Wait = time.Duration(n) * time.Second
	}
	if s, ok := one(v, paramAfter); ok {
		if s == "" {
			p.Add(paramAfter, "must not be empty")
		}
		q.After = s
	}
	return q, p.Err(invalidQuery)
}

// eventsPage is GET /events' answer. next_cursor is always set: a walk goes on from it
// whether or not this page held changes.
type eventsPage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"next_cursor"`
}

// eventsList is the cursor identity of a tenant's feed: a cursor of another tenant's
// feed, or of any other list, is refused.
func eventsList(system, tenant string) listID {
	return listID{System: system, Tenant: tenant, List: "events"}
}

var eventsCursorKey = []string{"p", "t"}

func (s *Service) eventsCursor(system, tenant string, pos changefeed.Position) (string, error) {
	return s.cursors.encode(eventsList(system, tenant), map[string]types.AttributeValue{
		"p": str(strconv.FormatInt(pos.After, 10)), "t": str(strconv.FormatInt(pos.Seen.UnixMilli(), 10)),
	})
}

func (s *Service) eventsPosition(system, tenant, cursor string) (changefeed.Position, error) {
	key, err := s.cursors.decode(cursor, eventsList(system, tenant), eventsCursorKey)
	if err != nil {
		if e, ok := apperr.As(err); ok && len(e.Fields) == 1 {
			return changefeed.Position{}, apperr.InvalidField(paramAfter, e.Fields[0].Message)
		}
		return changefeed.Position{}, err
	}
	p, err1 := strconv.ParseInt(key["p"].(*types.AttributeValueMemberS).Value, 10, 64)
	t, err2 := strconv.ParseInt(key["t"].(*types.AttributeValueMemberS).Value, 10, 64)
	if err1 != nil || err2 != nil || p < 0 {
		return changefeed.Position{}, apperr.InvalidField(paramAfter, "is malformed")
	}
	return changefeed.Position{After: p, Seen: time.UnixMilli(t)}, nil
}

// Events answers a page of the tenant's change feed (API.md "Changes out").
func (s *Service) Events(ctx context.Context, system, tenant string, q EventsQuery) (eventsPage, error) {
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	if _, err := s.tables(ctx, system, tenant); err != nil {
		return eventsPage{}, err
	}
	var from changefeed.Position
	if q.After != "" {
		var err error
		if from, err = s.eventsPosition(system, tenant, q.After); err != nil {
			return eventsPage{}, err
		}
	}
	page, err := s.readEvents(ctx, system, tenant, from, q.Limit)
	if err != nil {
		return eventsPage{}, err
	}
	if len(page.Events) == 0 && q.Wait > 0 && s.holdEventWaiter() {
		defer s.releaseEventWaiter()
		more, err := s.feed.Wait(ctx, system, tenant, page.Next.After, time.Now().Add(q.Wait), eventsPoll)
		if err != nil {
			return eventsPage{}, storageError(err)
		}
		if more {
			if page, err = s.readEvents(ctx, system, tenant, page.Next, q.Limit); err != nil {
				return eventsPage{}, err
			}
		}
	}
	next, err := s.eventsCursor(system, tenant, page.Next)
	if err != nil {
		return eventsPage{}, apperr.Internal(err)
	}
	return eventsPage{Items: page.Events, NextCursor: next}, nil
}

func (s *Service) readEvents(ctx context.Context, system, tenant string, from changefeed.Position, limit int) (changefeed.Page, error) {
	page, err := s.feed.Read(ctx, system, tenant, from, limit)
	switch {
	case errors.Is(err, changefeed.ErrExpired):
		return page, apperr.CursorExpired()
	case err != nil:
		return page, storageError(err)
	}
	return page, nil
}

func (s *Service) holdEventWaiter() bool {
	select {
	case s.eventWaiters <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Service) releaseEventWaiter() { <-s.eventWaiters }

func (h *Handlers) events(c echo.Context) error {
	q, err := ParseEventsQuery(c.Request().URL.RawQuery)
	if err != nil {
		return err
	}
	system, tenant := tenantOf(c)
	page, err := h.svc.Events(c.Request().Context(), system, tenant, q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, page)
}
