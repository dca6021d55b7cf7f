package main

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

// encodeAll percent-encodes every byte of s, letters too: a parameter that arrives so is
// found only if the service decodes it, and decodes it exactly once.
func encodeAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

var routeParamRE = regexp.MustCompile(`:[a-z_]+`)

// fill puts the values of params into a route template, each encoded by enc.
func fill(route string, params map[string]string, enc func(string) string) string {
	return routeParamRE.ReplaceAllStringFunc(route, func(p string) string {
		v, ok := params[p[1:]]
		if !ok {
			panic("no value for " + p + " in " + route)
		}
		return enc(v)
	})
}

// TestPathParametersAreDecoded walks every route of the query API that takes a path
// parameter, with usernames and group names as identity providers send them (an email
// address, a plus, a space, a letter beyond ASCII), each parameter sent fully percent-encoded and as
// url.PathEscape (the Go client) sends it: every route finds what its parameters name.
func TestPathParametersAreDecoded(t *testing.T) {
	a := startApp(t, options{})
	const tenant = "path-params"
	f := a.tenant(t, tenant)
	type person struct{ username, group string }
	people := []person{
		{"ann@example.com", "Sales EU"},
		{"ann+eu@example.com", "Ventes Île-de-France"},
		{"jörg", "Sales-Marketing"},
	}
	for _, p := range people {
		apply(t, f, f.CreateUser(events.User{Username: p.username}), f.CreateGroup(p.group, ""), f.AddMember(p.group, p.username))
	}
	erasureID := uuid.NewString()
	db := dynamotest.Current(t).DynamoDB()
	if err := dynamo.EnsureSharedTables(t.Context(), db, a.names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	put, err := dynamo.ErasureLedgerPut(a.names.Erasures(), system, tenant, commands.Erasure{ID: erasureID, RequestedAt: time.Now(), Actor: "test", Reason: "test", Places: []string{"views"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item}); err != nil {
		t.Fatal(err)
	}

	const prefix = "/v1/systems/:system/tenants/:tenant"
	walked := map[string]bool{}
	get := func(t *testing.T, route string, params map[string]string, check func(body string) bool) {
		t.Helper()
		for _, enc := range []func(string) string{encodeAll, url.PathEscape} {
			path := fill(route, params, enc)
			r := a.get(t, bootstrap, path)
			if r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
			if !check(string(r.body)) {
				t.Errorf("GET %s answers %s", path, r.body)
			}
		}
		walked[route] = true
	}
	names := func(want string) func(string) bool {
		return func(body string) bool { return strings.Contains(body, `"`+want+`"`) }
	}
	base := map[string]string{"system": system, "tenant": tenant}
	get(t, "/v1/systems/:system/tenants", base, names(tenant))
	get(t, prefix, base, names(tenant))
	for _, p := range people {
		params := map[string]string{"system": system, "tenant": tenant, "username": p.username, "name": p.group}
		get(t, prefix+"/users/:username", params, names(p.username))
		get(t, prefix+"/users/:username/groups", params, names(p.group))
		get(t, prefix+"/groups/:name", params, names(p.group))
		get(t, prefix+"/groups/:name/members", params, names(p.username))
	}
	get(t, prefix+"/erasures/:erasure_id", map[string]string{"system": system, "tenant": tenant, "erasure_id": erasureID}, names(erasureID))

	// Every walked route has :system and :tenant encoded too.
	for _, r := range a.routes {
		rest := strings.NewReplacer(":system", "", ":tenant", "").Replace(r.Path)
		if strings.Contains(rest, ":") && (r.Method != http.MethodGet || !walked[r.Path]) {
			t.Errorf("%s %s was not walked", r.Method, r.Path)
		}
	}
}
