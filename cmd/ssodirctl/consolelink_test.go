package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/servicetest"
)

// console-link prints a link with a one-time code that the query API exchanges once for the
// development token; the link itself holds no token.
func TestConsoleLink(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c := newCtl(t, s)
	link := strings.TrimSpace(c.ok("console-link"))
	prefix := strings.TrimRight(s.QueryURL, "/") + "/console/#/signin?"
	if !strings.HasPrefix(link, prefix) || strings.Contains(link, servicetest.Token) {
		t.Fatalf("link %q: want %s… without the token", link, prefix)
	}
	q, err := url.ParseQuery(strings.TrimPrefix(link, prefix))
	if err != nil || q.Get("code") == "" || q.Get("tenant") != "acme/eu" {
		t.Fatalf("link %q: query %v (%v)", link, q, err)
	}
	redeem := func() int {
		resp, err := http.Post(s.QueryURL+"/console/dev-codes/redeem", "application/json", strings.NewReader(`{"code":"`+q.Get("code")+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := redeem(); got != http.StatusOK {
		t.Fatalf("first exchange: %d", got)
	}
	if got := redeem(); got != http.StatusBadRequest {
		t.Fatalf("second exchange: %d, want 400", got)
	}

	c.env["SSODIR_TENANT"] = ""
	if link := c.ok("console-link"); strings.Contains(link, "tenant=") {
		t.Errorf("without a tenant the link names one: %q", link)
	}
	c.env["SSODIR_TOKEN"] = "not-the-token"
	c.fails(exitFailure, "console-link")
}
