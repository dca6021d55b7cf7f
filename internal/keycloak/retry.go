package keycloak

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// beforeRetry decides whether another attempt is allowed and waits for it.
func (c *Client) beforeRetry(ctx context.Context, method, p string, attempt int, retryAfter time.Duration, status int, cause error) error {
	if attempt >= c.cfg.MaxAttempts {
		return fmt.Errorf("giving up after %d attempts: %w", attempt, cause)
	}
	wait := c.backoff(attempt)
	if retryAfter > 0 {
		if retryAfter > c.cfg.MaxRetryAfter {
			return fmt.Errorf("server asked to wait %s, longer than the %s allowed: %w", retryAfter, c.cfg.MaxRetryAfter, cause)
		}
		// Honour the server's wait; a little jitter keeps parallel workers from all
		// coming back at the same instant.
		wait = retryAfter + rand.N(c.cfg.MinBackoff+1)
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
		return fmt.Errorf("not retrying: the next attempt (in %s) would be past the deadline: %w", wait, cause)
	}
	reason := retryReason(cause, status)
	c.metrics.retried(reason)
	c.log.Info("keycloak request failed; retrying",
		zap.String("method", method), zap.String("path", p), zap.String("reason", reason),
		zap.Int("attempt", attempt), zap.Duration("wait", wait))
	if err := c.sleep(ctx, wait); err != nil {
		return fmt.Errorf("%w; last attempt: %w", err, cause)
	}
	return nil
}

// backoff is exponential in the attempt, capped, with "equal jitter": half of it fixed so
// that retries do back off, half random so that workers spread out.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.MaxBackoff
	if attempt < 31 {
		if e := c.cfg.MinBackoff << (attempt - 1); e > 0 && e < d {
			d = e
		}
	}
	return d/2 + rand.N(d/2+1)
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// parseRetryAfter reads Retry-After as seconds or as an HTTP date (RFC 9110 10.2.3).
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

func statusError(method, p string, rep *reply) *StatusError {
	return &StatusError{
		Method:     method,
		Path:       p,
		StatusCode: rep.status,
		Message:    keycloakMessage(rep.body),
		Code:       keycloakCode(rep.body),
		RetryAfter: parseRetryAfter(rep.header.Get("Retry-After"), time.Now()),
	}
}

// keycloakMessage extracts Keycloak's error text from an error body; anything that is not
// one of Keycloak's JSON error shapes (an HTML page from a proxy) is left out.
func keycloakMessage(body []byte) string {
	var e struct {
		ErrorMessage     string `json:"errorMessage"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
		Field            string `json:"field"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	msg := e.ErrorMessage
	if msg == "" {
		msg = e.ErrorDescription
	}
	if msg == "" {
		msg = e.Error
	}
	if e.Field != "" {
		msg = e.Field + ": " + msg
	}
	if r := []rune(msg); len(r) > 300 {
		msg = string(r[:300]) + "…"
	}
	return msg
}

// idFromLocation reads the new object's id from a 201's Location header,
// {url}/admin/realms/{realm}/{collection}/{id}.
func idFromLocation(h http.Header, collection string) (string, error) {
	loc := h.Get("Location")
	u, err := url.Parse(loc)
	if loc == "" || err != nil {
		return "", fmt.Errorf("keycloak: create %s: no usable Location header (%q)", collection, loc)
	}
	dir, id := path.Split(u.Path)
	if id == "" || !strings.HasSuffix(dir, "/"+collection+"/") {
		return "", fmt.Errorf("keycloak: create %s: unexpected Location %q", collection, loc)
	}
	return id, nil
}
