package keycloak

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

const (
	realm    = "acme"
	clientID = "ssodir-sync"
	secret   = "client-s3cret"
)

// sleeps records the waits a client asked for instead of sleeping them, so that retry
// tests assert the waits (Retry-After honoured) without taking that long.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

type fixture struct {
	kc     *keycloaktest.Server
	c      *Client
	sleeps *sleeps
	logs   *observer.ObservedLogs
}

// newFixture starts a double with one realm and a client for it with fast backoffs.
// tweak, when not nil, adjusts the client configuration.
func newFixture(t *testing.T, kcfg keycloaktest.Config, tweak func(*ClientConfig)) *fixture {
	t.Helper()
	kc := keycloaktest.NewServer(t, kcfg)
	kc.AddRealm(realm, clientID, secret)
	core, logs := observer.New(zapcore.DebugLevel)
	cfg := ClientConfig{
		BaseURL: kc.URL(), Realm: realm, ClientID: clientID, ClientSecret: secret,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, RequestTimeout: 5 * time.Second,
		Logger: zap.New(core),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c := New(cfg, nil)
	sl := &sleeps{}
	c.sleep = sl.sleep
	return &fixture{kc: kc, c: c, sleeps: sl, logs: logs}
}

func (f *fixture) count(method, rest string) int {
	return f.kc.CountRequests(method, keycloaktest.AdminPath(realm, rest))
}

func managedUser(username, ssodirID string) User {
	return User{Username: username, Email: username + "@example.com", FirstName: "F", LastName: "L", Enabled: true,
		Attributes: map[string][]string{AttrSsodirID: {ssodirID}}}
}

func TestCreateUserReadsLocation(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	id, err := f.c.CreateUser(t.Context(), managedUser("JDoe", "u1"))
	if err != nil {
		t.Fatal(err)
	}
	u, ok := f.kc.UserByUsername(realm, "jdoe")
	if !ok || u.ID != id {
		t.Fatalf("CreateUser returned %q, the realm has %+v", id, u)
	}
	if got := u.Attributes[AttrSsodirID]; len(got) != 1 || got[0] != "u1" {
		t.Fatalf("ssodir_id not stored: %v", u.Attributes)
	}
}

func TestCreateConflicts(t *testing.T) {
	tests := []struct {
		name string
		user User
	}{
		{"a taken username is a conflict", User{Username: "JDOE", Email: "other@example.com"}},
		{"a taken email is a conflict", User{Username: "other", Email: "JDoe@Example.com"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, keycloaktest.Config{}, nil)
			if _, err := f.c.CreateUser(t.Context(), managedUser("jdoe", "u1")); err != nil {
				t.Fatal(err)
			}
			_, err := f.c.CreateUser(t.Context(), tt.user)
			if !errors.Is(err, ErrConflict) || StatusCode(err) != http.StatusConflict {
				t.Fatalf("err = %v, want a 409 matching ErrConflict", err)
			}
			if n := len(f.kc.Users(realm)); n != 1 {
				t.Fatalf("%d users, want 1", n)
			}
		})
	}
	t.Run("a taken group name is a conflict", func(t *testing.T) {
		f := newFixture(t, keycloaktest.Config{}, nil)
		if _, err := f.c.CreateGroup(t.Context(), Group{Name: "admins"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.c.CreateGroup(t.Context(), Group{Name: "admins"}); !errors.Is(err, ErrConflict) {
			t.Fatalf("err = %v, want ErrConflict", err)
		}
	})
}

func TestPagingOver250Users(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	for i := range 250 {
		if _, err := f.kc.CreateUser(realm, keycloaktest.User{Username: fmt.Sprintf("user%03d", i), Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for u, err := range f.c.AllUsers(t.Context(), UserQuery{}, 100) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, u.Username)
	}
	if len(names) != 250 || names[0] != "user000" || names[249] != "user249" {
		t.Fatalf("got %d users from %v to %v, want user000..user249", len(names), names[0], names[len(names)-1])
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("users out of order or repeated at %d: %s, %s", i, names[i-1], names[i])
		}
	}
	reqs := f.kc.AdminRequests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 pages: %+v", len(reqs), reqs)
	}
	for i, r := range reqs {
		q, err := url.ParseQuery(r.Query)
		if err != nil {
			t.Fatal(err)
		}
		first := q.Get("first")
		if first == "" {
			first = "0"
		}
		if first != fmt.Sprint(i*100) || q.Get("max") != "100" {
			t.Fatalf("page %d asked %q, want first=%d and max=100", i, r.Query, i*100)
		}
	}
	n, err := f.c.CountUsers(t.Context(), UserQuery{})
	if err != nil || n != 250 {
		t.Fatalf("CountUsers = %d, %v; want 250", n, err)
	}
	page, err := f.c.ListUsers(t.Context(), UserQuery{})
	if err != nil || len(page) != 100 {
		t.Fatalf("a page without max has %d users (%v); Keycloak's default is 100", len(page), err)
	}
}

func TestUpdateUserSendsTheWholeRepresentation(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	id, err := f.kc.CreateUser(realm, keycloaktest.User{
		Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", LastName: "Doe", Enabled: true,
		Attributes: map[string][]string{"dept": {"eng"}, "locale": {"de"}}, RequiredActions: []string{"VERIFY_EMAIL"},
	})
	if err != nil {
		t.Fatal(err)
	}
	u, err := f.c.GetUser(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	u.FirstName = "Janet"
	if err := f.c.UpdateUser(t.Context(), *u); err != nil {
		t.Fatal(err)
	}
	got, _ := f.kc.User(realm, id)
	if got.FirstName != "Janet" || got.LastName != "Doe" || got.Email != "jdoe@example.com" ||
		len(got.Attributes) != 2 || len(got.RequiredActions) != 1 || !got.Enabled {
		t.Fatalf("a changed first name must leave everything else as it was: %+v", got)
	}
	u.Attributes = map[string][]string{"dept": {"ops"}}
	u.LastName = ""
	if err := f.c.UpdateUser(t.Context(), *u); err != nil {
		t.Fatal(err)
	}
	got, _ = f.kc.User(realm, id)
	if got.LastName != "" || len(got.Attributes) != 1 || got.Attributes["dept"][0] != "ops" {
		t.Fatalf("what the representation drops must be dropped: %+v", got)
	}
}

func TestTokens(t *testing.T) {
	t.Run("a token is replaced before it expires", func(t *testing.T) {
		f := newFixture(t, keycloaktest.Config{TokenLifetime: 2 * time.Second}, func(c *ClientConfig) {
			c.TokenExpiryDelta = time.Second
		})
		if _, err := f.c.CountUsers(t.Context(), UserQuery{}); err != nil {
			t.Fatal(err)
		}
		// Past expiry minus the delta, before the expiry itself: the old token would
		// still be accepted, so only a proactive refresh fetches a second one.
		time.Sleep(1100 * time.Millisecond)
		if _, err := f.c.CountUsers(t.Context(), UserQuery{}); err != nil {
			t.Fatal(err)
		}
		if n := f.kc.TokensIssued(); n != 2 {
			t.Fatalf("%d tokens issued, want 2", n)
		}
		for _, r := range f.kc.Requests() {
			if r.Status == http.StatusUnauthorized {
				t.Fatalf("a request met a 401: %+v", r)
			}
		}
	})
	t.Run("a token the server stopped accepting is replaced transparently", func(t *testing.T) {
		f := newFixture(t, keycloaktest.Config{TokenLifetime: time.Minute}, nil)
		if _, err := f.c.CountUsers(t.Context(), UserQuery{}); err != nil {
			t.Fatal(err)
		}
		f.kc.AdvanceClock(time.Hour)
		if _, err := f.c.CountUsers(t.Context(), UserQuery{}); err != nil {
			t.Fatalf("expired token not refreshed: %v", err)
		}
		if n := f.kc.TokensIssued(); n != 2 {
			t.Fatalf("%d tokens issued, want 2", n)
		}
	})
}

func TestUnauthorizedIsRetriedOnce(t *testing.T) {
	tests := []struct {
		name      string
		failures  int
		wantErr   bool
		wantCalls int
	}{
		{"one 401 is answered with a fresh token and one more try", 1, false, 2},
		{"a second 401 is returned, not retried again", 2, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, keycloaktest.Config{}, nil)
			f.kc.Inject(keycloaktest.Fault{Method: "GET", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Times: tt.failures, Status: 401})
			_, err := f.c.ListUsers(t.Context(), UserQuery{})
			if (err != nil) != tt.wantErr || (tt.wantErr && !errors.Is(err, ErrUnauthorized)) {
				t.Fatalf("err = %v, want error %v matching ErrUnauthorized", err, tt.wantErr)
			}
			if n := f.count("GET", "/users"); n != tt.wantCalls {
				t.Fatalf("%d requests, want %d", n, tt.wantCalls)
			}
			if n := f.kc.TokensIssued(); n != 2 {
				t.Fatalf("%d tokens, want a fresh one after the 401", n)
			}
		})
	}
}

func TestRetries(t *testing.T) {
	date := time.Now().Add(4 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name      string
		fault     keycloaktest.Fault
		wantErr   int // status of the returned error, 0 for success
		wantCalls int
		wantWaits int
		minWait   time.Duration
	}{
		{"429 waits as long as Retry-After says in seconds", keycloaktest.Fault{Status: 429, RetryAfter: "2"}, 0, 2, 1, 2 * time.Second},
		{"429 waits until the HTTP date in Retry-After", keycloaktest.Fault{Status: 429, RetryAfter: date}, 0, 2, 1, 2 * time.Second},
		{"503 is retried with backoff", keycloaktest.Fault{Status: 503, Times: 2}, 0, 3, 2, 0},
		{"502 is retried", keycloaktest.Fault{Status: 502}, 0, 2, 1, 0},
		{"504 is retried", keycloaktest.Fault{Status: 504}, 0, 2, 1, 0},
		{"503 on every attempt gives up after MaxAttempts", keycloaktest.Fault{Status: 503, Times: 10}, 503, 5, 4, 0},
		{"500 is not retried", keycloaktest.Fault{Status: 500}, 500, 1, 0, 0},
		{"a Retry-After beyond the allowed wait is not waited for", keycloaktest.Fault{Status: 429, RetryAfter: "3600"}, 429, 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, keycloaktest.Config{}, nil)
			tt.fault.Method, tt.fault.PathPrefix = "GET", keycloaktest.AdminPath(realm, "/users")
			f.kc.Inject(tt.fault)
			_, err := f.c.ListUsers(t.Context(), UserQuery{})
			if got := StatusCode(err); got != tt.wantErr || (tt.wantErr == 0 && err != nil) {
				t.Fatalf("err = %v, want status %d", err, tt.wantErr)
			}
			if n := f.count("GET", "/users"); n != tt.wantCalls {
				t.Fatalf("%d requests, want %d", n, tt.wantCalls)
			}
			waits := f.sleeps.all()
			if len(waits) != tt.wantWaits {
				t.Fatalf("waits %v, want %d", waits, tt.wantWaits)
			}
			// An HTTP date has whole seconds, so allow one second less than asked.
			if tt.minWait > 0 && waits[0] < tt.minWait-time.Second {
				t.Fatalf("waited %v, want at least about %v", waits[0], tt.minWait)
			}
		})
	}
}

func TestRetriesStopAtTheDeadline(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	f.kc.Inject(keycloaktest.Fault{Method: "GET", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Status: 503, RetryAfter: "30"})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := f.c.ListUsers(ctx, UserQuery{})
	if StatusCode(err) != 503 {
		t.Fatalf("err = %v, want the 503", err)
	}
	if w := f.sleeps.all(); len(w) != 0 {
		t.Fatalf("waited %v although the wait ends past the deadline", w)
	}
}

func TestLostCreateAnswers(t *testing.T) {
	tests := []struct {
		name      string
		apply     bool
		wantPosts int
	}{
		{"a create that timed out but happened is found, not sent again", true, 1},
		{"a create that timed out and did not happen is sent again", false, 2},
	}
	for _, tt := range tests {
		t.Run("user: "+tt.name, func(t *testing.T) {
			f := newFixture(t, keycloaktest.Config{}, func(c *ClientConfig) { c.RequestTimeout = 500 * time.Millisecond })
			f.kc.Inject(keycloaktest.Fault{Method: "POST", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Hang: true, Apply: tt.apply})
			id, err := f.c.CreateUser(t.Context(), managedUser("jdoe", "u1"))
			if err != nil {
				t.Fatal(err)
			}
			users := f.kc.Users(realm)
			if len(users) != 1 || users[0].ID != id {
				t.Fatalf("realm has %+v, want exactly the one user %s", users, id)
			}
			if n := f.count("POST", "/users"); n != tt.wantPosts {
				t.Fatalf("%d POSTs, want %d", n, tt.wantPosts)
			}
		})
		t.Run("group: "+tt.name, func(t *testing.T) {
			f := newFixture(t, keycloaktest.Config{}, func(c *ClientConfig) { c.RequestTimeout = 500 * time.Millisecond })
			f.kc.Inject(keycloaktest.Fault{Method: "POST", PathPrefix: keycloaktest.AdminPath(realm, "/groups"), Hang: true, Apply: tt.apply})
			id, err := f.c.CreateGroup(t.Context(), Group{Name: "admins", Attributes: map[string][]string{AttrSsodirID: {"g1"}}})
			if err != nil {
				t.Fatal(err)
			}
			groups := f.kc.Groups(realm)
			if len(groups) != 1 || groups[0].ID != id {
				t.Fatalf("realm has %+v, want exactly the one group %s", groups, id)
			}
			if n := f.count("POST", "/groups"); n != tt.wantPosts {
				t.Fatalf("%d POSTs, want %d", n, tt.wantPosts)
			}
		})
	}
	t.Run("a lost create whose name was taken by someone else meanwhile is a conflict", func(t *testing.T) {
		f := newFixture(t, keycloaktest.Config{}, func(c *ClientConfig) { c.RequestTimeout = 500 * time.Millisecond })
		if _, err := f.kc.CreateUser(realm, keycloaktest.User{Username: "jdoe"}); err != nil {
			t.Fatal(err)
		}
		f.kc.Inject(keycloaktest.Fault{Method: "POST", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Hang: true})
		_, err := f.c.CreateUser(t.Context(), managedUser("jdoe", "u1"))
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("err = %v, want ErrConflict", err)
		}
		if n := f.count("POST", "/users"); n != 1 {
			t.Fatalf("%d POSTs, want 1: the lookup found the name taken", n)
		}
	})
	t.Run("a 429 on create is sent again without a lookup", func(t *testing.T) {
		f := newFixture(t, keycloaktest.Config{}, nil)
		f.kc.Inject(keycloaktest.Fault{Method: "POST", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Status: 429, RetryAfter: "1"})
		if _, err := f.c.CreateUser(t.Context(), managedUser("jdoe", "u1")); err != nil {
			t.Fatal(err)
		}
		if n := f.count("GET", "/users"); n != 0 {
			t.Fatalf("%d lookups, want none: a 429 says the server did nothing", n)
		}
	})
}

func TestSetPassword(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	id, err := f.c.CreateUser(t.Context(), managedUser("jdoe", "u1"))
	if err != nil {
		t.Fatal(err)
	}
	const pw = "correct horse battery staple"
	f.kc.Inject(keycloaktest.Fault{Method: "PUT", PathPrefix: keycloaktest.AdminPath(realm, "/users/"+id+"/reset-password"), Status: 503})
	if err := f.c.SetPassword(t.Context(), id, pw); err != nil {
		t.Fatal(err)
	}
	got, ok := f.kc.LastPassword(realm, id)
	if !ok || got.Value != pw || got.Temporary || got.Sets != 1 {
		t.Fatalf("password = %+v, want %q, permanent, set once", got, pw)
	}
	err = f.c.SetPassword(t.Context(), "no-such-user", pw)
	if !errors.Is(err, ErrNotFound) || strings.Contains(err.Error(), pw) {
		t.Fatalf("err = %v, want ErrNotFound without the password", err)
	}
	for _, e := range f.logs.All() {
		line := fmt.Sprint(e.Message, e.ContextMap())
		if strings.Contains(line, pw) || strings.Contains(line, secret) {
			t.Fatalf("a log entry holds a secret: %s", line)
		}
	}
	if len(f.logs.All()) == 0 {
		t.Fatal("no log entries: the retry was not logged, so the check above proves nothing")
	}
}

func TestGroupsAndMemberships(t *testing.T) {
	ctx := t.Context()
	f := newFixture(t, keycloaktest.Config{}, nil)
	gid, err := f.c.CreateGroup(ctx, Group{Name: "admins", Description: "Admins", Attributes: map[string][]string{AttrSsodirID: {"g1"}}})
	if err != nil {
		t.Fatal(err)
	}
	uid, err := f.c.CreateUser(ctx, managedUser("jdoe", "u1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.AddUserToGroup(ctx, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := f.c.AddUserToGroup(ctx, uid, gid); err != nil {
		t.Fatalf("joining twice must be fine: %v", err)
	}
	groups, err := f.c.UserGroups(ctx, uid, 0, 0)
	if err != nil || len(groups) != 1 || groups[0].SsodirID() != "g1" {
		t.Fatalf("UserGroups = %+v, %v", groups, err)
	}
	members, err := f.c.GroupMembers(ctx, gid, 0, 0)
	if err != nil || len(members) != 1 || members[0].ID != uid {
		t.Fatalf("GroupMembers = %+v, %v", members, err)
	}
	listed, err := f.c.ListGroups(ctx, 0, 0)
	if err != nil || len(listed) != 1 || listed[0].SsodirID() != "g1" || listed[0].Description != "Admins" {
		t.Fatalf("ListGroups must return attributes and description: %+v, %v", listed, err)
	}
	byName, err := f.c.FindGroupByName(ctx, "admins")
	if err != nil || byName.ID != gid {
		t.Fatalf("FindGroupByName = %+v, %v", byName, err)
	}
	byAttr, err := f.c.FindGroupsByAttribute(ctx, AttrSsodirID, "g1")
	if err != nil || len(byAttr) != 1 || byAttr[0].ID != gid {
		t.Fatalf("FindGroupsByAttribute = %+v, %v", byAttr, err)
	}
	g := listed[0]
	g.Description = "People who administer"
	if err := f.c.UpdateGroup(ctx, g); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.kc.GroupByName(realm, "admins"); got.Description != "People who administer" || got.Attributes[AttrSsodirID][0] != "g1" {
		t.Fatalf("group after update: %+v", got)
	}
	if n, err := f.c.CountGroups(ctx); err != nil || n != 1 {
		t.Fatalf("CountGroups = %d, %v", n, err)
	}
	if err := f.c.RemoveUserFromGroup(ctx, uid, gid); err != nil {
		t.Fatal(err)
	}
	if u, _ := f.kc.User(realm, uid); len(u.Groups) != 0 {
		t.Fatalf("still a member: %+v", u)
	}
	if err := f.c.DeleteGroup(ctx, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.GetGroup(ctx, gid); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetGroup after delete: %v, want ErrNotFound", err)
	}
	if err := f.c.DeleteUser(ctx, uid); err != nil {
		t.Fatal(err)
	}
	if err := f.c.DeleteUser(ctx, uid); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting twice: %v, want ErrNotFound", err)
	}
}

func TestClientConfig(t *testing.T) {
	cfg := ClientConfig{BaseURL: "https://kc.example.com", Realm: "acme", ClientID: "sync", ClientSecret: "hunter2"}
	for _, s := range []string{cfg.String(), fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg)} {
		if strings.Contains(s, "hunter2") {
			t.Fatalf("the secret is printed: %s", s)
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	err := ClientConfig{BaseURL: "kc.example.com"}.Validate()
	for _, want := range []string{"url", "realm", "client id", "client secret"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Validate() = %v, want it to name the %s", err, want)
		}
	}
	c := New(ClientConfig{}, nil)
	if _, err := c.ListUsers(t.Context(), UserQuery{}); err == nil {
		t.Fatal("a client with an invalid config must refuse to work")
	}
}

func TestWrongClientSecret(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, func(c *ClientConfig) { c.ClientSecret = "not-the-secret-4711" })
	_, err := f.c.ListUsers(t.Context(), UserQuery{})
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if strings.Contains(err.Error(), "not-the-secret-4711") {
		t.Fatalf("the secret is in the error: %v", err)
	}
	if n := f.kc.CountRequests("", "/admin/"); n != 0 {
		t.Fatalf("%d Admin API requests without a token", n)
	}
}
