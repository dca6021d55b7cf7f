package keycloaktest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

const (
	testRealm  = "acme"
	testClient = "ssodir-sync"
	testSecret = "s3cret"
)

// raw is a minimal HTTP client for the double's own tests, so that they do not depend on
// the keycloak package they exist to test.
type raw struct {
	t     *testing.T
	s     *Server
	token string
}

func newRaw(t *testing.T, cfg Config) *raw {
	t.Helper()
	s := NewServer(t, cfg)
	s.AddRealm(testRealm, testClient, testSecret)
	r := &raw{t: t, s: s}
	r.token = r.fetchToken(testRealm)
	return r
}

func (r *raw) fetchToken(realm string) string {
	r.t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {testClient}, "client_secret": {testSecret}}
	resp, err := http.PostForm(r.s.URL()+"/realms/"+realm+"/protocol/openid-connect/token", form)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("token: status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		r.t.Fatal(err)
	}
	return tok.AccessToken
}

// do sends a request to the realm's Admin API and returns status, headers and body.
func (r *raw) do(method, path, body string) (int, http.Header, string) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, r.s.URL()+AdminPath(testRealm, path), rd)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func (r *raw) mustCreateUser(username, email string) string {
	r.t.Helper()
	id, err := r.s.CreateUser(testRealm, User{Username: username, Email: email, Enabled: true})
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

func TestRequestChecks(t *testing.T) {
	if _, ok := FindSpec(); !ok {
		t.Skip("the Keycloak Admin API description is not in ../shared/keycloak")
	}
	tests := []struct {
		name, method, path, body string
		want                     int
	}{
		{"a user with a field UserRepresentation does not have is rejected", "POST", "/users",
			`{"username":"jdoe","enabled":true,"nickname":"jd"}`, 400},
		{"a nested unknown field is rejected too", "POST", "/users",
			`{"username":"jdoe","credentials":[{"type":"password","value":"x","strength":3}]}`, 400},
		{"a value of the wrong JSON type is rejected", "POST", "/users", `{"username":"jdoe","enabled":"true"}`, 400},
		{"an attribute value that is not a list of strings is rejected", "POST", "/users",
			`{"username":"jdoe","attributes":{"dept":"eng"}}`, 400},
		{"a query parameter the operation does not declare is rejected", "GET", "/users?briefRepresentaton=false", "", 400},
		{"a group with an unknown field is rejected", "POST", "/groups", `{"name":"admins","colour":"red"}`, 400},
		{"a well-formed user is created", "POST", "/users",
			`{"username":"jdoe","email":"j@example.com","enabled":true,"attributes":{"ssodir_id":["u1"]}}`, 201},
		{"declared query parameters are accepted", "GET", "/users?first=0&max=10&briefRepresentation=false&exact=true&username=jdoe", "", 200},
	}
	r := newRaw(t, Config{})
	if !r.s.SpecLoaded() {
		t.Fatal("spec found but not loaded")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := r.do(tt.method, tt.path, tt.body)
			if status != tt.want {
				t.Fatalf("status %d, want %d (%s)", status, tt.want, body)
			}
		})
	}
	if n := len(r.s.Users(testRealm)); n != 1 {
		t.Fatalf("%d users stored, want only the well-formed one", n)
	}
}

func TestCreateAnswersLocationAndConflicts(t *testing.T) {
	r := newRaw(t, Config{})
	status, h, _ := r.do("POST", "/users", `{"username":"JDoe","email":"JDoe@Example.com","enabled":true}`)
	if status != 201 {
		t.Fatalf("create: %d", status)
	}
	loc := h.Get("Location")
	u, ok := r.s.UserByUsername(testRealm, "jdoe")
	if !ok || !strings.HasSuffix(loc, "/admin/realms/acme/users/"+u.ID) {
		t.Fatalf("Location %q does not name the new user %+v", loc, u)
	}
	if u.Username != "jdoe" || u.Email != "jdoe@example.com" {
		t.Fatalf("username and email not lower-cased: %+v", u)
	}
	tests := []struct{ name, body string }{
		{"the same username in another case is a conflict", `{"username":"JDOE","email":"other@example.com"}`},
		{"the same email in another case is a conflict", `{"username":"other","email":"jdoe@EXAMPLE.com"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, _, body := r.do("POST", "/users", tt.body); status != 409 {
				t.Fatalf("status %d, want 409 (%s)", status, body)
			}
		})
	}
}

func TestPagingDefaults(t *testing.T) {
	r := newRaw(t, Config{})
	gid, err := r.s.CreateGroup(testRealm, Group{Name: "all"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 130 {
		id := r.mustCreateUser(fmt.Sprintf("user%03d", i), "")
		if err := r.s.AddMember(testRealm, id, gid); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 15 {
		if _, err := r.s.CreateGroup(testRealm, Group{Name: fmt.Sprintf("g%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	count := func(path string) int {
		t.Helper()
		status, _, body := r.do("GET", path, "")
		if status != 200 {
			t.Fatalf("GET %s: %d %s", path, status, body)
		}
		var items []map[string]any
		if err := json.Unmarshal([]byte(body), &items); err != nil {
			t.Fatal(err)
		}
		return len(items)
	}
	tests := []struct {
		name, path string
		want       int
	}{
		{"users default to pages of 100", "/users", 100},
		{"users page with first and max", "/users?first=120&max=50", 10},
		{"group members default to pages of 100", "/groups/" + gid + "/members", 100},
		{"groups come all at once without max", "/groups", 16},
		{"groups page with first and max", "/groups?first=10&max=4", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := count(tt.path); got != tt.want {
				t.Fatalf("%d items, want %d", got, tt.want)
			}
		})
	}
}

func TestUserPutReplaces(t *testing.T) {
	r := newRaw(t, Config{})
	id, err := r.s.CreateUser(testRealm, User{Username: "jdoe", Email: "j@example.com", FirstName: "Jane",
		LastName: "Doe", Enabled: true, Attributes: map[string][]string{"dept": {"eng"}}, RequiredActions: []string{"VERIFY_EMAIL"}})
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.do("PUT", "/users/"+id, `{"firstName":"Janet"}`); status != 204 {
		t.Fatalf("PUT: %d %s", status, body)
	}
	u, _ := r.s.User(testRealm, id)
	if u.FirstName != "Janet" || u.Email != "" || u.LastName != "" || len(u.Attributes) != 0 {
		t.Fatalf("omitted profile fields must be cleared: %+v", u)
	}
	if !u.Enabled || u.Username != "jdoe" || len(u.RequiredActions) != 1 {
		t.Fatalf("omitted non-profile fields must be kept: %+v", u)
	}
}

func TestAttributeSearch(t *testing.T) {
	r := newRaw(t, Config{})
	for i, v := range []string{"abc", "abcd", "ABC"} {
		if _, err := r.s.CreateUser(testRealm, User{Username: fmt.Sprintf("user%d", i),
			Attributes: map[string][]string{"ssodir_id": {v}}}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, query string
		want        int
	}{
		{"q is a whole, case-insensitive match by default", "q=ssodir_id:abc", 2},
		{"q is a whole match with exact=true", "q=ssodir_id:abc&exact=true", 2},
		{"q is an infix match with exact=false", "q=ssodir_id:abc&exact=false", 3},
		{"q on another key finds nothing", "q=other:abc", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := r.do("GET", "/users?"+tt.query, "")
			var items []map[string]any
			if status != 200 || json.Unmarshal([]byte(body), &items) != nil {
				t.Fatalf("status %d body %s", status, body)
			}
			if len(items) != tt.want {
				t.Fatalf("%d users, want %d", len(items), tt.want)
			}
		})
	}
}

func TestTokens(t *testing.T) {
	r := newRaw(t, Config{TokenLifetime: time.Minute})
	if status, _, _ := r.do("GET", "/users", ""); status != 200 {
		t.Fatalf("fresh token: %d", status)
	}
	r.s.AdvanceClock(61 * time.Second)
	if status, _, _ := r.do("GET", "/users", ""); status != 401 {
		t.Fatalf("expired token: %d, want 401", status)
	}
	r.token = r.fetchToken(testRealm)
	if status, _, _ := r.do("GET", "/users", ""); status != 200 {
		t.Fatalf("new token: %d", status)
	}
	r.s.AddRealm("other", testClient, testSecret)
	r.token = r.fetchToken("other")
	if status, _, _ := r.do("GET", "/users", ""); status != 403 {
		t.Fatalf("token of another realm: %d, want 403", status)
	}
	resp, err := http.PostForm(r.s.URL()+"/realms/acme/protocol/openid-connect/token",
		url.Values{"grant_type": {"client_credentials"}, "client_id": {testClient}, "client_secret": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("wrong secret: %d, want 401", resp.StatusCode)
	}
}

func TestFaults(t *testing.T) {
	r := newRaw(t, Config{})
	r.s.Inject(Fault{Method: "GET", PathPrefix: AdminPath(testRealm, "/users"), Times: 2, Status: 429, RetryAfter: "3"})
	for i := range 2 {
		status, h, _ := r.do("GET", "/users", "")
		if status != 429 || h.Get("Retry-After") != "3" {
			t.Fatalf("request %d: %d Retry-After %q", i, status, h.Get("Retry-After"))
		}
	}
	if status, _, _ := r.do("GET", "/users", ""); status != 200 {
		t.Fatalf("after the fault: %d", status)
	}
	if status, _, _ := r.do("GET", "/groups", ""); status != 200 {
		t.Fatalf("other paths are not affected: %d", status)
	}
}

func TestSlowAndClearedFaults(t *testing.T) {
	r := newRaw(t, Config{})
	r.s.Inject(Fault{Method: "GET", PathPrefix: AdminPath(testRealm, "/users"), Times: 1, Delay: 300 * time.Millisecond})
	start := time.Now()
	if status, _, _ := r.do("GET", "/users", ""); status != 200 {
		t.Fatalf("a delayed request is answered normally: %d", status)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("answered after %s, before the delay", d)
	}
	r.s.Inject(Fault{PathPrefix: AdminPath(testRealm, ""), Times: 1000, Status: 503})
	if status, _, _ := r.do("GET", "/groups", ""); status != 503 {
		t.Fatalf("fault armed: %d", status)
	}
	r.s.ClearFaults(AdminPath(testRealm, ""))
	if status, _, _ := r.do("GET", "/groups", ""); status != 200 {
		t.Fatalf("after ClearFaults: %d", status)
	}
}

func TestUnmanagedAttributesCanBeDropped(t *testing.T) {
	r := newRaw(t, Config{})
	if err := r.s.SetUnmanagedAttributes(testRealm, false); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := r.do("POST", "/users", `{"username":"jdoe","attributes":{"ssodir_id":["u1"]}}`); status != 201 {
		t.Fatalf("create: %d", status)
	}
	u, _ := r.s.UserByUsername(testRealm, "jdoe")
	if len(u.Attributes) != 0 {
		t.Fatalf("attributes kept although the realm drops unmanaged ones: %v", u.Attributes)
	}
}

func TestDuplicateEmailsWhenTheRealmAllowsThem(t *testing.T) {
	r := newRaw(t, Config{})
	if status, _, _ := r.do("POST", "/users", `{"username":"a","email":"twins@example.com"}`); status != 201 {
		t.Fatalf("create a: %d", status)
	}
	if status, _, _ := r.do("POST", "/users", `{"username":"b","email":"Twins@example.com"}`); status != 409 {
		t.Fatalf("a shared email by default: %d, want 409", status)
	}
	if err := r.s.AllowDuplicateEmails(testRealm); err != nil {
		t.Fatal(err)
	}
	if status, _, body := r.do("POST", "/users", `{"username":"b","email":"Twins@example.com"}`); status != 201 {
		t.Fatalf("a shared email once allowed: %d %s", status, body)
	}
	status, _, body := r.do("GET", "/users?email=twins@example.com&exact=true", "")
	var items []map[string]any
	if status != 200 || json.Unmarshal([]byte(body), &items) != nil || len(items) != 2 {
		t.Fatalf("an exact email search: %d %s, want both users", status, body)
	}
	// Deleting one leaves the other findable by its email.
	a, _ := r.s.UserByUsername(testRealm, "a")
	if status, _, _ := r.do("DELETE", "/users/"+a.ID, ""); status != 204 {
		t.Fatalf("delete a: %d", status)
	}
	status, _, body = r.do("GET", "/users?email=twins@example.com&exact=true", "")
	if status != 200 || json.Unmarshal([]byte(body), &items) != nil || len(items) != 1 || items[0]["username"] != "b" {
		t.Fatalf("after deleting a: %d %s", status, body)
	}
}

func TestSubgroupsShowAsTheirParentsCount(t *testing.T) {
	r := newRaw(t, Config{})
	staff, err := r.s.CreateGroup(testRealm, Group{Name: "Staff"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.CreateSubGroup(testRealm, staff, "Backend"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.CreateSubGroup(testRealm, staff, "Backend"); err == nil {
		t.Fatal("a second sibling with one name was accepted")
	}
	// A subgroup may share a top-level group's name.
	if _, err := r.s.CreateGroup(testRealm, Group{Name: "Backend"}); err != nil {
		t.Fatal(err)
	}
	status, _, body := r.do("GET", "/groups?briefRepresentation=false", "")
	var items []struct {
		Name          string `json:"name"`
		Path          string `json:"path"`
		SubGroupCount int    `json:"subGroupCount"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &items) != nil || len(items) != 2 ||
		items[1].Name != "Staff" || items[1].SubGroupCount != 1 || items[0].SubGroupCount != 0 || items[0].Path != "/Backend" {
		t.Fatalf("top-level listing: %d %s", status, body)
	}
	if status, _, _ := r.do("DELETE", "/groups/"+staff, ""); status != 204 {
		t.Fatalf("delete Staff: %d", status)
	}
	if gs := r.s.Groups(testRealm); len(gs) != 1 || gs[0].Name != "Backend" {
		t.Fatalf("after deleting Staff its subgroup should be gone and the top-level Backend kept: %+v", gs)
	}
}

// The request log may be cleared while requests are in flight (the bench clears it between
// rounds): the requests are still answered, nothing panics, and a request answered after
// the clear never writes its status over a newer entry.
func TestRequestLogClearedWhileRequestsAreInFlight(t *testing.T) {
	r := newRaw(t, Config{})
	const inFlight = 8
	r.s.Inject(Fault{Method: "GET", PathPrefix: AdminPath(testRealm, "/groups"), Times: inFlight, Delay: 200 * time.Millisecond, Status: 503})
	statuses := make(chan int, inFlight)
	errs := make(chan error, inFlight)
	client := &http.Client{Timeout: 20 * time.Second}
	for range inFlight {
		go func() {
			req, _ := http.NewRequest("GET", r.s.URL()+AdminPath(testRealm, "/groups"), nil)
			req.Header.Set("Authorization", "Bearer "+r.token)
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.s.CountRequests("GET", AdminPath(testRealm, "/groups")) < inFlight {
		if time.Now().After(deadline) {
			t.Fatal("the delayed requests never reached the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.s.ResetRequests()
	// A newer request, answered at once, takes the first place in the cleared log.
	if status, _, _ := r.do("GET", "/users", ""); status != 200 {
		t.Fatalf("GET /users: %d", status)
	}
	for range inFlight {
		select {
		case err := <-errs:
			t.Fatalf("a request in flight while the log was cleared failed: %v", err)
		case s := <-statuses:
			if s != 503 {
				t.Fatalf("a request in flight while the log was cleared: status %d, want the injected 503", s)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a request in flight while the log was cleared was never answered")
		}
	}
	log := r.s.Requests()
	if len(log) != 1 || log[0].Path != AdminPath(testRealm, "/users") || log[0].Status != 200 {
		t.Fatalf("log after the clear: %+v, want only GET /users answered 200", log)
	}
}

// TestUsernamesAsKeycloakAcceptsThem: the double takes every username Keycloak's default
// user profile takes (an email, a plus, letters beyond ASCII, 255 characters) and refuses
// what it refuses, as Keycloak answers.
func TestUsernamesAsKeycloakAcceptsThem(t *testing.T) {
	r := newRaw(t, Config{})
	for _, tt := range []struct {
		name, username string
		want           int
		message        string
	}{
		{"a plus-addressed email", "Ann+EU@example.com", 201, ""},
		{"letters beyond ASCII", "Jörg", 201, ""},
		{"255 characters", strings.Repeat("a", 255), 201, ""},
		{"256 characters", strings.Repeat("b", 256), 400, "error-invalid-length"},
		{"a '#'", "a#b", 400, "error-username-invalid-character"},
		{"a '/'", "a/b", 400, "error-username-invalid-character"},
		{"a space inside", "a b", 400, "error-username-invalid-character"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"username": tt.username, "enabled": true})
			status, _, out := r.do("POST", "/users", string(body))
			if status != tt.want || !strings.Contains(string(out), tt.message) {
				t.Fatalf("status %d %s, want %d %s", status, out, tt.want, tt.message)
			}
			if _, ok := r.s.UserByUsername(testRealm, strings.ToLower(tt.username)); ok != (tt.want == 201) {
				t.Fatalf("stored: %v", ok)
			}
		})
	}
}
