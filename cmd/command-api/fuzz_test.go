package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/config"
)

// fuzzTenants is the path every fuzzed request starts with; the fuzzer chooses the rest.
const fuzzTenants = "/v1/systems/fz/tenants"

// FuzzCommandAPI sends arbitrary requests through the real command API (in process, on
// DynamoDB Local) and fails on any 5xx, a panic, or an error that is not problem+json.
// Its seed corpus covers every route; it runs as a normal test with the seeds only.
func FuzzCommandAPI(f *testing.F) {
	env := testEnv(f)
	cfg, err := config.LoadCommandAPI(config.Map(env))
	if err != nil {
		f.Fatal(err)
	}
	e, err := newServer(f.Context(), cfg, zap.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	token := env["SSO_BOOTSTRAP_TOKEN"]
	serve := func(method, path, headers string, body []byte) (*httptest.ResponseRecorder, bool) {
		req, ok := fuzzRequest(fuzzTenants+path, method, headers, body, token)
		if !ok {
			return nil, false
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec, true
	}
	// A tenant with a user in a group, so that the routes on existing objects are reached.
	for _, setup := range []struct{ method, path, body string }{
		{"POST", "", `{"tenant_id":"t1"}`},
		{"POST", "/t1/users", `{"username":"jdoe","email":"jdoe@example.com"}`},
		{"POST", "/t1/groups", `{"name":"Admins"}`},
		{"PUT", "/t1/groups/admins/members/jdoe", ``},
	} {
		if rec, _ := serve(setup.method, setup.path, "Content-Type: application/json", []byte(setup.body)); rec.Code >= 300 {
			f.Fatalf("setup %s %s: %d %s", setup.method, setup.path, rec.Code, rec.Body)
		}
	}

	const ctJSON = "Content-Type: application/json"
	kc := `{"url":"https://kc.example.com","realm":"r","client_id":"c","client_secret":"s","on_delete":"disable"}`
	for _, s := range []struct{ method, path, headers, body string }{
		{"POST", "", ctJSON, `{"tenant_id":"t2","keycloak":` + kc + `}`},
		{"POST", "", ctJSON, `{"tenant_id":"t1"}`},
		{"POST", "", ctJSON, `{"tenant_id":"Bad Id","keycloak":{"url":"x"}}`},
		{"PUT", "/t1/keycloak", ctJSON, kc},
		{"PUT", "/t1/keycloak", ctJSON, `{"url":"https://u:p@kc/?q#f","realm":"a/b","client_id":"","client_secret":""}`},
		{"POST", "/t1/users", ctJSON + "\nIdempotency-Key: k1", `{"username":"Neo","email":"NEO@example.com","first_name":"N","last_name":"A","is_active":false,"attributes":{"a":["b"]},"password":"12345678"}`},
		{"POST", "/t1/users", ctJSON, `{"username":"x","attributes":{"k":null}}`},
		{"POST", "/t1/users", ctJSON, `{"username":"x","nickname":"y"}`},
		{"POST", "/t1/users", ctJSON, `{"username":"x",`},
		{"POST", "/t1/users", "Content-Type: text/plain", `username=x`},
		{"POST", "/t1/users", ctJSON + "\nContent-Encoding: gzip", `{"username":"\u0000"}`},
		{"PATCH", "/t1/users/jdoe", ctJSON + "\nIf-Match: \"1\"", `{"email":null,"first_name":"J","last_name":null,"attributes":null}`},
		{"PATCH", "/t1/users/jdoe", ctJSON + "\nIf-Match: W/\"99999999999999999999\"", `{"email":"jdoe@example.com"}`},
		{"PATCH", "/t1/users/JDOE", ctJSON, `{"attributes":{"` + strings.Repeat("k", 300) + `":["v"]}}`},
		{"POST", "/t1/users/jdoe/deactivate", "", ``},
		{"POST", "/t1/users/jdoe/activate", "If-Match: *", ``},
		{"POST", "/t1/users/jdoe/activate", ctJSON, `{}`},
		{"PUT", "/t1/users/jdoe/password", ctJSON + "\nIdempotency-Key: ключ", `{"password":"a new password"}`},
		{"PUT", "/t1/users/jdoe/password", ctJSON, `{"password":"` + strings.Repeat("é", 129) + `"}`},
		{"DELETE", "/t1/users/jdoe", "If-Match: \"abc\"", ``},
		{"DELETE", "/t1/users/no%2Fbody", "", ``},
		{"POST", "/t1/groups", ctJSON, `{"name":"Team Ä","description":"multi\nline","attributes":{}}`},
		{"POST", "/t1/groups", ctJSON, `{"name":"` + strings.Repeat("g", 129) + `"}`},
		{"PATCH", "/t1/groups/team%20%C3%A4", ctJSON, `{"description":"d","attributes":{"x":["1","2"]}}`},
		{"PATCH", "/t1/groups/%2e%2e", ctJSON, `{"description":"d"}`},
		{"DELETE", "/t1/groups/admins", "If-Match: \"2\"", ``},
		{"PUT", "/t1/groups/admins/members/jdoe", "Idempotency-Key: member", ``},
		{"DELETE", "/t1/groups/Admins/members/JDoe", "", ``},
		{"POST", "/t1/groups/Admins/members", ctJSON + "\nIf-Match: \"2\"", `{"add":["JDoe","jdoe"],"remove":[]}`},
		{"POST", "/t1/groups/admins/members", ctJSON + "\nIdempotency-Key: bulk", `{"add":["nobody"],"remove":["jdoe","no body"]}`},
		{"POST", "/t1/groups/admins/members", ctJSON, `{"add":null,"remove":[7]}`},
		{"POST", "/t1/webhooks", ctJSON, `{"url":"https://93.184.215.14/h","types":["user.created"],"description":"d"}`},
		{"POST", "/t1/webhooks", ctJSON, `{"url":"http://127.0.0.1/","types":["nope","nope"],"description":7}`},
		{"GET", "/t1/webhooks", "", ``},
		{"GET", "/t1/webhooks/00000000-0000-0000-0000-000000000000/deliveries?limit=0&after=%25", "", ``},
		{"POST", "/t1/webhooks/x/replay", ctJSON, `{"after":"abc"}`},
		{"POST", "/t1/webhooks/00000000-0000-0000-0000-000000000000/rotate-secret", "", ``},
		{"DELETE", "/t1/webhooks/zzz", "", ``},
		{"GET", "/t1/users", "", ``},
		{"OPTIONS", "/t1/users", "Origin: https://ui.example.com", ``},
		{"POST", "/t9/users", ctJSON, `{"username":"ghost"}`},
		{"PUT", "//users//password", ctJSON, `{}`},
		{"POST", "/t1/users", ctJSON + "\nAuthorization: Bearer nope", `{"username":"x"}`},
		{"POST", "/t1/users", ctJSON + "\nAuthorization:", `{"username":"x"}`},
		{"POST", "/t1/users", ctJSON + "\nTransfer-Encoding: chunked", "5\r\n{\"use\r\n0\r\n\r\n"},
	} {
		f.Add(s.method, s.path, s.headers, []byte(s.body))
	}

	f.Fuzz(func(t *testing.T, method, path, headers string, body []byte) {
		rec, ok := serve(method, path, headers, body)
		if !ok {
			t.Skip("not a request an HTTP server would pass on")
		}
		if rec.Code >= 500 {
			t.Fatalf("%s %s%s with %q and %q: %d %s", method, fuzzTenants, path, headers, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var p struct {
				Code   string `json:"code"`
				Status int    `json:"status"`
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("%d answered as %q: %s", rec.Code, ct, rec.Body)
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code == "" || p.Status != rec.Code {
				t.Fatalf("%d answered with %s (%v)", rec.Code, rec.Body, err)
			}
		}
	})
}

// fuzzRequest parses the request as a server would, from its wire form; ok is false for
// input that no HTTP server would hand to a handler. The bootstrap token is added unless
// the headers name an Authorization of their own.
func fuzzRequest(path, method, headers string, body []byte, token string) (*http.Request, bool) {
	var raw bytes.Buffer
	fmt.Fprintf(&raw, "%s %s HTTP/1.1\r\nHost: command-api\r\n", method, path)
	auth := false
	for line := range strings.SplitSeq(headers, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || !validHeader(name, value) {
			return nil, false
		}
		auth = auth || strings.EqualFold(strings.TrimSpace(name), "Authorization")
		raw.WriteString(line + "\r\n")
	}
	if !auth {
		raw.WriteString("Authorization: Bearer " + token + "\r\n")
	}
	if !strings.Contains(strings.ToLower(headers), "transfer-encoding") {
		fmt.Fprintf(&raw, "Content-Length: %d\r\n", len(body))
	}
	raw.WriteString("\r\n")
	raw.Write(body)
	req, err := http.ReadRequest(bufio.NewReader(&raw))
	if err != nil {
		return nil, false
	}
	req.RemoteAddr = "127.0.0.1:1234"
	return req, true
}

// validHeader is what net/http's server accepts: a token name, and a value without control
// characters other than tab.
func validHeader(name, value string) bool {
	if name == "" {
		return false
	}
	for _, c := range []byte(name) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	for _, c := range []byte(value) {
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
