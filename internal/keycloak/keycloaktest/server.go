// Package keycloaktest is an in-process stand-in for a Keycloak server, for tests of code
// that talks to the Keycloak Admin REST API.
//
// It keeps real state per realm (users, groups, memberships, passwords) and answers the
// way Keycloak 26 does for the part of the API ssodir uses: a client-credentials token
// endpoint whose tokens expire, 201 with a Location header on create, 409 on a duplicate
// username or email (case-insensitively) or group name, 404 for unknown objects, offset
// paging with first/max and Keycloak's default page sizes, exact and attribute (q=key:value)
// search, briefRepresentation, and full-replace PUTs.
//
// It is deliberately stricter than Keycloak where Keycloak is lenient or where its versions
// differ, so that a client working against the double works against every 26.x server:
//   - A PUT replaces the object: email, first and last name, attributes and a group's
//     description are cleared when the body omits them (Keycloak 24+ does this for users).
//   - When the Admin API description (SpecFile, see FindSpec) is available, a body with a
//     field its schema does not have, or a value of the wrong JSON type, is answered 400,
//     and so is a query parameter the operation does not declare.
//
// Faults are injected with Inject (429 with Retry-After, 5xx, or a request that hangs until
// the client gives up, optionally after applying its effect), and state can be inspected
// and changed behind the client's back with the accessors in state.go.
package keycloaktest

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Config shapes a Server. The zero value is a server with Keycloak's defaults.
type Config struct {
	// TokenLifetime is how long an access token is accepted; Keycloak's default is five
	// minutes. It is announced to clients as expires_in, rounded up to whole seconds.
	TokenLifetime time.Duration
	// SpecPath is the Admin API description to check requests against; empty means FindSpec.
	SpecPath string
	// NoSpec turns the schema checks off even when the description is available.
	NoSpec bool
}

// Server is a running double. Its methods are safe for concurrent use.
type Server struct {
	srv  *httptest.Server
	spec *apiSpec
	done chan struct{}
	stop sync.Once

	mu            sync.Mutex
	clockOffset   time.Duration
	tokenLifetime time.Duration
	realms        map[string]*realm
	tokens        map[string]issuedToken
	tokensIssued  int
	faults        []*activeFault
	// requests is the log; each entry is its own allocation, so that a request answered
	// after ResetRequests records its status on its own entry, never on a newer one.
	requests []*Request
}

type issuedToken struct {
	realm   string
	expires time.Time
}

// Request is one request the server received, in arrival order.
type Request struct {
	Method string
	Path   string
	Query  string
	// Status is the status answered; 0 when the request was held until the client gave up.
	Status int
}

// Admin reports whether the request went to the Admin API (rather than the token endpoint).
func (r Request) Admin() bool { return strings.HasPrefix(r.Path, "/admin/") }

// NewServer starts a double; it is closed when the test ends. It has no realms until
// AddRealm is called.
func NewServer(tb testing.TB, cfg Config) *Server {
	tb.Helper()
	s := &Server{
		done:          make(chan struct{}),
		tokenLifetime: cfg.TokenLifetime,
		realms:        map[string]*realm{},
		tokens:        map[string]issuedToken{},
	}
	if s.tokenLifetime <= 0 {
		s.tokenLifetime = 5 * time.Minute
	}
	if !cfg.NoSpec {
		path := cfg.SpecPath
		if path == "" {
			path, _ = FindSpec()
		}
		if path != "" {
			spec, err := loadSpec(path)
			if err != nil {
				tb.Fatalf("keycloaktest: %v", err)
			}
			s.spec = spec
		}
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	tb.Cleanup(s.Close)
	return s
}

// URL is the server's base URL, as configured for a Keycloak client (no /auth suffix).
func (s *Server) URL() string { return s.srv.URL }

// SpecLoaded reports whether requests are checked against the Admin API description.
func (s *Server) SpecLoaded() bool { return s.spec != nil }

// Close stops the server. Requests held by a hang fault are released first, so Close
// never waits on them.
func (s *Server) Close() {
	s.stop.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// AddRealm creates a realm with one confidential client that may use the client
// credentials grant and has full rights on the realm's Admin API.
func (s *Server) AddRealm(name, clientID, clientSecret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.realms[name] = newRealm(name, clientID, clientSecret)
}

// AdminPath is the Admin API path of realm followed by rest, e.g. AdminPath("acme", "/users");
// handy as a Fault's PathPrefix.
func AdminPath(realm, rest string) string { return "/admin/realms/" + realm + rest }

// AdvanceClock moves the server's clock forward, so that tokens issued before expire
// without the test having to sleep. The client's own clock is not affected: it still
// believes its token valid, which is how a client meets a 401 in practice.
func (s *Server) AdvanceClock(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clockOffset += d
}

// RevokeTokens makes every token issued so far invalid, as a realm key rotation or a
// session logout would.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// TokensIssued counts the access tokens the token endpoint has handed out.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokensIssued
}

// Requests is a copy of the request log.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = *r
	}
	return out
}

// AdminRequests is the part of the request log that went to the Admin API.
func (s *Server) AdminRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Admin() {
			out = append(out, r)
		}
	}
	return out
}

// CountRequests counts logged requests with the method (any when empty) whose path starts
// with pathPrefix.
func (s *Server) CountRequests(method, pathPrefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if (method == "" || r.Method == method) && strings.HasPrefix(r.Path, pathPrefix) {
			n++
		}
	}
	return n
}

// ResetRequests empties the request log.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// Fault makes the next Times requests that match Method and PathPrefix fail.
type Fault struct {
	// Method matches the request method; empty matches any.
	Method string
	// PathPrefix matches the start of the URL path, e.g. AdminPath("acme", "/users").
	PathPrefix string
	// Query, when set, must be part of the raw query, e.g. "max=500" (a reconcile's pages).
	Query string
	// Times is how many matching requests fail; zero means one.
	Times int
	// Status is answered instead of handling the request (429, 500, 503 ...); 503 when
	// neither Status nor Hang is set.
	Status int
	// RetryAfter, when set, is sent as the Retry-After header: seconds or an HTTP date.
	RetryAfter string
	// Hang holds the request without answering until the client gives up (or the
	// server closes), like a server or proxy that stopped responding.
	Hang bool
	// Apply, with Hang, handles the request first, so its effect persists although the
	// client never sees the answer: a create that timed out but happened.
	Apply bool
	// Delay holds the request this long and then answers it normally (or with Status,
	// when set): a slow realm.
	Delay time.Duration
}

type activeFault struct {
	Fault
	left int
}

// Inject arms a fault. Faults are matched in the order they were injected.
func (s *Server) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := f.Times
	if n <= 0 {
		n = 1
	}
	if f.Status == 0 && !f.Hang && f.Delay == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	s.faults = append(s.faults, &activeFault{Fault: f, left: n})
}

// ClearFaults disarms every fault whose PathPrefix starts with pathPrefix ("" for all):
// the realm answers again.
func (s *Server) ClearFaults(pathPrefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.faults[:0]
	for _, f := range s.faults {
		if !strings.HasPrefix(f.PathPrefix, pathPrefix) {
			kept = append(kept, f)
		}
	}
	s.faults = kept
}

func (s *Server) takeFault(r *http.Request) *Fault {
	for i, f := range s.faults {
		if (f.Method == "" || f.Method == r.Method) && strings.HasPrefix(r.URL.Path, f.PathPrefix) &&
			strings.Contains(r.URL.RawQuery, f.Query) {
			f.left--
			if f.left == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			fault := f.Fault
			return &fault
		}
	}
	return nil
}

func (s *Server) now() time.Time { return time.Now().Add(s.clockOffset) }

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		return
	}
	s.mu.Lock()
	logged := &Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery}
	s.requests = append(s.requests, logged)
	fault := s.takeFault(r)
	s.mu.Unlock()

	if fault != nil && fault.Hang {
		if fault.Apply {
			s.handle(httptest.NewRecorder(), r, body)
		}
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	if fault != nil && fault.Delay > 0 {
		t := time.NewTimer(fault.Delay)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.done:
			t.Stop()
			return
		case <-t.C:
		}
		if fault.Status == 0 {
			fault = nil
		}
	}
	sw := &statusWriter{ResponseWriter: w}
	if fault != nil {
		if fault.RetryAfter != "" {
			w.Header().Set("Retry-After", fault.RetryAfter)
		}
		writeJSON(sw, fault.Status, map[string]string{"error": "injected fault"})
	} else {
		s.handle(sw, r, body)
	}
	s.mu.Lock()
	logged.Status = sw.status
	s.mu.Unlock()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func newToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
