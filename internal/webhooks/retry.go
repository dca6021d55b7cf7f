package webhooks

import "time"

// retries are the waits after the first failed attempts at a change: about 5 s, 30 s and
// 2 min, then growing to at most an hour (API.md "Changes out").
var retries = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour}

// MaxBackoff is the longest wait between two attempts.
const MaxBackoff = time.Hour

// GiveUpAfter is how long an endpoint fails before it is disabled: at least a day of
// retries (about 28 attempts).
const GiveUpAfter = 24 * time.Hour

// Backoff is the wait after the attempt-th consecutive failed attempt (from 1).
func Backoff(attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	if attempt > len(retries) {
		return MaxBackoff
	}
	return retries[attempt-1]
}
