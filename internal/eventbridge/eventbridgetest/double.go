// Package eventbridgetest is a strict test double of Amazon EventBridge's PutEvents: an
// HTTP server speaking its JSON protocol (AWS JSON 1.1, X-Amz-Target AWSEvents.PutEvents),
// reached through the SDK's endpoint override. It enforces PutEvents' limits — 1 to 10
// entries and 256 KB a call by AWS's entry-size rule — refusing a call over them as AWS
// does and recording it as a violation, throttles with a token bucket at a PutEvents rate
// (ThrottlingException), and fails entries at random (FailedEntryCount) when asked.
package eventbridgetest

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
	"unicode/utf8"
)

// PublishedRate is the lowest of AWS's published default PutEvents quotas (transactions a
// second; us-east-1, us-west-2 and eu-west-1 have 10,000, the smallest Regions 400). The
// double counts every entry as one transaction, the stricter reading.
const PublishedRate = 400

// Limits of one PutEvents call.
const (
	MaxEntries      = 10
	MaxRequestBytes = 256 << 10
)

// Options of a Server.
type Options struct {
	// Rate is the token bucket's refill, entries a second (0: PublishedRate); Burst its
	// size (0: one second's worth).
	Rate, Burst float64
	// FailRate is the share of entries refused in a partial failure (0–1).
	FailRate float64
	// Seed seeds the failures.
	Seed uint64
}

// Entry is one accepted entry, in the order the double accepted them.
type Entry struct {
	Bus, Source, DetailType, Detail string
	Time                            *float64
	Size                            int
}

// Server is the double.
type Server struct {
	*httptest.Server
	opts Options

	mu         sync.Mutex
	rng        *rand.Rand
	tokens     float64
	refilled   time.Time
	accepted   []Entry
	violations []string
	calls      int
	throttled  int
	failed     int
}

// New starts a double; Close it when done.
func New(opts Options) *Server {
	if opts.Rate <= 0 {
		opts.Rate = PublishedRate
	}
	if opts.Burst <= 0 {
		opts.Burst = opts.Rate
	}
	s := &Server{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 37)), tokens: opts.Burst, refilled: time.Now()}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

type request struct {
	Entries []struct {
		EventBusName string   `json:"EventBusName"`
		Source       string   `json:"Source"`
		DetailType   string   `json:"DetailType"`
		Detail       string   `json:"Detail"`
		Resources    []string `json:"Resources"`
		Time         *float64 `json:"Time"`
	} `json:"Entries"`
}

type resultEntry struct {
	EventID      string `json:"EventId,omitempty"`
	ErrorCode    string `json:"ErrorCode,omitempty"`
	ErrorMessage string `json:"ErrorMessage,omitempty"`
}

func fail(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" {
		s.violate("a call that is not PutEvents: %s %s %q", r.Method, r.URL.Path, r.Header.Get("X-Amz-Target"))
		fail(w, http.StatusBadRequest, "UnknownOperationException", "only PutEvents is served")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	var req request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		s.violate("an undecodable PutEvents body: %v", err)
		fail(w, http.StatusBadRequest, "SerializationException", err.Error())
		return
	}
	n := len(req.Entries)
	size := 0
	for _, e := range req.Entries {
		es := len(e.Source) + len(e.DetailType) + len(e.Detail)
		if e.Time != nil {
			es += 14
		}
		for _, res := range e.Resources {
			es += len(res)
		}
		size += es
		var obj map[string]any
		if e.Source == "" || e.DetailType == "" || !utf8.ValidString(e.Detail) || json.Unmarshal([]byte(e.Detail), &obj) != nil {
			s.violate("an entry without source, detail-type or a JSON object as detail")
			fail(w, http.StatusBadRequest, "ValidationException", "an entry needs Source, DetailType and a JSON object as Detail")
			return
		}
	}
	if n < 1 || n > MaxEntries {
		s.violate("a call of %d entries", n)
		fail(w, http.StatusBadRequest, "ValidationException", fmt.Sprintf("1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length less than or equal to %d", MaxEntries))
		return
	}
	if size > MaxRequestBytes {
		s.violate("a call of %d bytes", size)
		fail(w, http.StatusBadRequest, "ValidationException", "Total size of the entries in the request is over the limit.")
		return
	}
	s.mu.Lock()
	s.calls++
	now := time.Now()
	s.tokens = min(s.opts.Burst, s.tokens+now.Sub(s.refilled).Seconds()*s.opts.Rate)
	s.refilled = now
	if s.tokens < float64(n) {
		s.throttled++
		s.mu.Unlock()
		fail(w, http.StatusBadRequest, "ThrottlingException", "Rate exceeded")
		return
	}
	s.tokens -= float64(n)
	out := struct {
		FailedEntryCount int           `json:"FailedEntryCount"`
		Entries          []resultEntry `json:"Entries"`
	}{Entries: make([]resultEntry, n)}
	for i, e := range req.Entries {
		if s.opts.FailRate > 0 && s.rng.Float64() < s.opts.FailRate {
			out.FailedEntryCount++
			s.failed++
			out.Entries[i] = resultEntry{ErrorCode: "InternalFailure", ErrorMessage: "the double failed this entry"}
			continue
		}
		s.accepted = append(s.accepted, Entry{Bus: e.EventBusName, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail,
			Time: e.Time, Size: len(e.Source) + len(e.DetailType) + len(e.Detail)})
		out.Entries[i] = resultEntry{EventID: fmt.Sprintf("ev-%d", len(s.accepted))}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) violate(format string, args ...any) {
	s.mu.Lock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// Accepted are the entries accepted so far, in order.
func (s *Server) Accepted() []Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Entry(nil), s.accepted...)
}

// Violations are the calls refused for breaking PutEvents' rules.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Counts are the calls served, throttled, and the entries failed on purpose.
func (s *Server) Counts() (calls, throttled, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.throttled, s.failed
}
