package keycloak

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// canary is a user whose username, email and names must not reach an error or a log line.
const canary = "zcanary7q"

// namesCanary reports whether s names the canary user.
func namesCanary(s string) bool {
	return strings.Contains(s, canary) || strings.Contains(s, "Zedcanary") || strings.Contains(s, "Lastcanary")
}

// failingCheck is a write model that cannot be read.
type failingCheck struct{}

var errUnreadable = errors.New("the write model cannot be read")

func (failingCheck) User(context.Context, string) (DirectoryUser, bool, error) {
	return DirectoryUser{}, false, errUnreadable
}
func (failingCheck) Group(context.Context, string) (DirectoryGroup, bool, error) {
	return DirectoryGroup{}, false, errUnreadable
}
func (failingCheck) Member(context.Context, string, string) (string, string, bool, error) {
	return "", "", false, errUnreadable
}

// TestErrorsAndLogsNameNoUser: the Keycloak sync's errors reach its logs, its dead
// letters' reasons and its sync status, which name users by id only (STYLE.md). Apply's
// failed actions (Keycloak refusing, the write model unreadable, more failures than the
// error reports, so some are logged), a lookup that finds no one, and a request that
// times out with the username in its query: none names the user.
func TestErrorsAndLogsNameNoUser(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, func(c *ClientConfig) { c.RequestTimeout = time.Second })
	dir := &memDir{groups: []DirectoryGroup{{ID: "g-staff", Name: "staff"}}}
	for i := range maxReportedErrors + 2 {
		name := fmt.Sprintf("%s%02d", canary, i)
		dir.users = append(dir.users, DirectoryUser{ID: fmt.Sprintf("u-%02d", i), Username: name, Email: name + "@example.org",
			FirstName: "Zedcanary", LastName: "Lastcanary", Active: true, Groups: []string{"g-staff"}})
	}
	ctx := t.Context()
	p, err := NewPlan(ctx, dir, f.c, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var failures []error

	// Keycloak refuses every create.
	f.kc.Inject(keycloaktest.Fault{Method: "POST", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Times: 1000, Status: 500})
	res, err := Apply(ctx, p, f.c, ApplyOptions{Check: dir})
	if err == nil || res.Failed <= maxReportedErrors {
		t.Fatalf("apply with Keycloak refusing: %+v, %v; want more than %d failures", res, err, maxReportedErrors)
	}
	failures = append(failures, err)
	f.kc.ClearFaults("")

	// The write model cannot be read when an action re-checks it.
	p, err = NewPlan(ctx, dir, f.c, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, p, f.c, ApplyOptions{Check: failingCheck{}}); err == nil {
		t.Fatal("apply over an unreadable write model: no error")
	} else {
		failures = append(failures, err)
	}

	// Lookups that find no one.
	_, err = f.c.FindUserByUsername(ctx, canary)
	failures = append(failures, err)
	_, err = f.c.FindUserByEmail(ctx, canary+"@example.org")
	failures = append(failures, err)

	// A search that times out: the client's error quotes the request's URL.
	f.kc.Inject(keycloaktest.Fault{Method: "GET", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Times: 1000, Hang: true})
	_, err = f.c.FindUserByUsername(ctx, canary)
	failures = append(failures, err)
	f.kc.ClearFaults("")

	for i, err := range failures {
		if err == nil {
			t.Errorf("failure %d: no error: the test proves nothing", i)
		} else if namesCanary(err.Error()) {
			t.Errorf("failure %d names the user: %v", i, err)
		}
	}
	if f.logs.FilterMessage("keycloak action failed").Len() == 0 {
		t.Error("no failed action was logged: the test proves nothing of the log")
	}
	for _, e := range f.logs.All() {
		line := e.Message
		for k, v := range e.ContextMap() {
			line += fmt.Sprintf(" %s=%v", k, v)
		}
		if namesCanary(line) {
			t.Errorf("a log line names the user: %s", line)
		}
	}
}
