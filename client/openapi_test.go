package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/openapi"
)

// TestClientCoversTheOpenAPIDocument keeps the served OpenAPI document and the client in
// step: every exported method of Client and TenantClient is called against a recording
// server, and the routes they use must be exactly the document's /v1 operations. A route
// added to one and not the other, or a method added without a line here, fails it.
func TestClientCoversTheOpenAPIDocument(t *testing.T) {
	ctx := context.Background()
	type call func(c *client.Client, tc *client.TenantClient) error
	drain := func(seq func(func(client.User, error) bool)) error {
		for _, err := range seq {
			return err
		}
		return nil
	}
	calls := map[string]call{
		"Client.CreateTenant": func(c *client.Client, _ *client.TenantClient) error {
			_, err := c.CreateTenant(ctx, "s", client.NewTenant{TenantID: "t"})
			return err
		},
		"Client.WaitTenantActive": func(c *client.Client, _ *client.TenantClient) error {
			_, err := c.WaitTenantActive(ctx, "s", "t", time.Millisecond)
			return err
		},
		"Client.ListTenants": func(c *client.Client, _ *client.TenantClient) error {
			_, err := c.ListTenants(ctx, "s", 0, "")
			return err
		},
		"Client.Tenants": func(c *client.Client, _ *client.TenantClient) error {
			for _, err := range c.Tenants(ctx, "s", 0) {
				return err
			}
			return nil
		},
		"Client.Tenant": func(c *client.Client, _ *client.TenantClient) error { c.Tenant("s", "t"); return nil },
		"Client.MintConsoleSignInCode": func(c *client.Client, _ *client.TenantClient) error {
			_, err := c.MintConsoleSignInCode(ctx)
			return err
		},
		"TenantClient.System": func(_ *client.Client, tc *client.TenantClient) error { tc.System(); return nil },
		"TenantClient.ID":     func(_ *client.Client, tc *client.TenantClient) error { tc.ID(); return nil },
		"TenantClient.Get": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.Get(ctx)
			return err
		},
		"TenantClient.AccessReport": func(_ *client.Client, tc *client.TenantClient) error {
			body, err := tc.AccessReport(ctx, time.Unix(0, 0), time.Unix(1, 0), client.ReportCSV)
			if err == nil {
				body.Close()
			}
			return err
		},
		"TenantClient.AccessRows": func(_ *client.Client, tc *client.TenantClient) error {
			for _, err := range tc.AccessRows(ctx, time.Unix(0, 0), time.Unix(1, 0)) {
				return err
			}
			return nil
		},
		"TenantClient.CreateScimToken": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.CreateScimToken(ctx, client.NewScimToken{Name: "okta"})
			return err
		},
		"TenantClient.ListScimTokens": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ListScimTokens(ctx)
			return err
		},
		"TenantClient.RevokeScimToken": func(_ *client.Client, tc *client.TenantClient) error {
			return tc.RevokeScimToken(ctx, "id")
		},
		"TenantClient.CreateWebhook": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.CreateWebhook(ctx, client.NewWebhook{URL: "https://hooks.example.com/"})
			return err
		},
		"TenantClient.ListWebhooks": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ListWebhooks(ctx)
			return err
		},
		"TenantClient.GetWebhook": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.GetWebhook(ctx, "id")
			return err
		},
		"TenantClient.DeleteWebhook": func(_ *client.Client, tc *client.TenantClient) error {
			return tc.DeleteWebhook(ctx, "id")
		},
		"TenantClient.WebhookDeliveries": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.WebhookDeliveries(ctx, "id", "", 0)
			return err
		},
		"TenantClient.ReplayWebhook": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ReplayWebhook(ctx, "id", "")
			return err
		},
		"TenantClient.RotateWebhookSecret": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.RotateWebhookSecret(ctx, "id")
			return err
		},
		"TenantClient.SetKeycloak": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.SetKeycloak(ctx, client.KeycloakSettings{})
			return err
		},
		"TenantClient.CreateUser": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.CreateUser(ctx, client.NewUser{Username: "u"})
			return err
		},
		"TenantClient.GetUser": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.GetUser(ctx, "u")
			return err
		},
		"TenantClient.UpdateUser": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.UpdateUser(ctx, "u", client.UserPatch{})
			return err
		},
		"TenantClient.ActivateUser": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ActivateUser(ctx, "u")
			return err
		},
		"TenantClient.DeactivateUser": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.DeactivateUser(ctx, "u")
			return err
		},
		"TenantClient.SetPassword": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.SetPassword(ctx, "u", "password")
			return err
		},
		"TenantClient.RenameUser": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.RenameUser(ctx, "u", "v")
			return err
		},
		"TenantClient.RenameGroup": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.RenameGroup(ctx, "g", "h")
			return err
		},
		"TenantClient.DeleteUser": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.DeleteUser(ctx, "u")
			return err
		},
		"TenantClient.EraseUser": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.EraseUser(ctx, "u", "a request")
			return err
		},
		"TenantClient.EraseUserWith": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.EraseUserWith(ctx, "u", client.EraseRequest{Reason: "a request", AllIncarnations: true})
			return err
		},
		"TenantClient.GetErasure": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.GetErasure(ctx, "00000000-0000-0000-0000-000000000000")
			return err
		},
		"TenantClient.WaitErasure": func(_ *client.Client, tc *client.TenantClient) error {
			// The scripted answer is no erasure done: it waits until its context ends.
			wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err := tc.WaitErasure(wctx, "00000000-0000-0000-0000-000000000000", time.Hour)
			if errors.Is(err, context.DeadlineExceeded) {
				return nil
			}
			return err
		},
		"TenantClient.ListUsers": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ListUsers(ctx, client.UserFilter{}, "")
			return err
		},
		"TenantClient.Users": func(_ *client.Client, tc *client.TenantClient) error {
			return drain(tc.Users(ctx, client.UserFilter{}))
		},
		"TenantClient.UserGroups": func(_ *client.Client, tc *client.TenantClient) error {
			for _, err := range tc.UserGroups(ctx, "u", 0) {
				return err
			}
			return nil
		},
		"TenantClient.CreateGroup": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.CreateGroup(ctx, client.NewGroup{Name: "g"})
			return err
		},
		"TenantClient.GetGroup": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.GetGroup(ctx, "g")
			return err
		},
		"TenantClient.UpdateGroup": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.UpdateGroup(ctx, "g", client.GroupPatch{})
			return err
		},
		"TenantClient.DeleteGroup": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.DeleteGroup(ctx, "g")
			return err
		},
		"TenantClient.AddMember": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.AddMember(ctx, "g", "u")
			return err
		},
		"TenantClient.SetMemberExpiry": func(_ *client.Client, tc *client.TenantClient) error {
			at := time.Now().Add(time.Hour)
			_, err := tc.SetMemberExpiry(ctx, "g", "u", &at)
			return err
		},
		"TenantClient.ChangeMembers": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ChangeMembers(ctx, "g", client.MembersChange{Add: []string{"u"}})
			return err
		},
		"TenantClient.RemoveMember": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.RemoveMember(ctx, "g", "u")
			return err
		},
		"TenantClient.ListGroups": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ListGroups(ctx, 0, "")
			return err
		},
		"TenantClient.Groups": func(_ *client.Client, tc *client.TenantClient) error {
			for _, err := range tc.Groups(ctx, 0) {
				return err
			}
			return nil
		},
		"TenantClient.GroupMembers": func(_ *client.Client, tc *client.TenantClient) error {
			return drain(tc.GroupMembers(ctx, "g", 0))
		},
		"TenantClient.ListActivity": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ListActivity(ctx, client.ActivityFilter{Day: "2026-11-21"}, "")
			return err
		},
		"TenantClient.Activity": func(_ *client.Client, tc *client.TenantClient) error {
			for _, err := range tc.Activity(ctx, client.ActivityFilter{Day: "2026-11-21"}) {
				return err
			}
			return nil
		},
		"TenantClient.ReadEvents": func(_ *client.Client, tc *client.TenantClient) error {
			_, err := tc.ReadEvents(ctx, "", 0, 0)
			return err
		},
		"TenantClient.Events": func(_ *client.Client, tc *client.TenantClient) error {
			for _, err := range tc.Events(ctx, client.EventsOptions{}) {
				return err
			}
			return nil
		},
	}

	var methods []string
	for _, typ := range []reflect.Type{reflect.TypeFor[*client.Client](), reflect.TypeFor[*client.TenantClient]()} {
		for i := range typ.NumMethod() {
			methods = append(methods, typ.Elem().Name()+"."+typ.Method(i).Name)
		}
	}
	for _, m := range methods {
		if calls[m] == nil {
			t.Errorf("%s has no line in this test: add one, so its route is checked against the document", m)
		}
	}

	// The document's operations, as method and path pattern.
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	type route struct {
		method, template string
		re               *regexp.Regexp
	}
	var routes []route
	for p, item := range doc.Paths {
		if !strings.HasPrefix(p, "/v1/") && !strings.HasPrefix(p, "/console/") {
			continue // the open probes and the document itself are not the client's
		}
		// QuoteMeta escapes the braces of {param}; each becomes one path segment.
		re := regexp.MustCompile("^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(p), `[^/]+`) + "$")
		for m := range item {
			switch m {
			case "get", "post", "put", "patch", "delete":
				routes = append(routes, route{strings.ToUpper(m), p, re})
			}
		}
	}

	used := map[string]bool{}
	for _, name := range methods {
		f := calls[name]
		if f == nil {
			continue
		}
		c, s := scriptedClient(t, jsonAnswer(200, `{"status":"active","items":[],"next_cursor":null}`))
		if err := f(c, c.Tenant("s", "t")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, r := range s.calls {
			found := false
			for _, rt := range routes {
				if rt.method == r.Method && rt.re.MatchString(r.URL.EscapedPath()) {
					used[rt.method+" "+rt.template], found = true, true
				}
			}
			if !found {
				t.Errorf("%s sends %s %s, which the OpenAPI document does not have", name, r.Method, r.URL.EscapedPath())
			}
		}
	}
	var missing []string
	for _, rt := range routes {
		// The console redeems its sign-in codes itself; a Go program has no use for that.
		if !used[rt.method+" "+rt.template] && rt.template != "/console/dev-codes/redeem" {
			missing = append(missing, rt.method+" "+rt.template)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the OpenAPI document has routes no client method uses:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(routes) < 20 || !slices.ContainsFunc(routes, func(r route) bool { return r.method == http.MethodPut && strings.HasSuffix(r.template, "/password") }) {
		t.Fatalf("read %d routes from the document; it does not look like ssodir's", len(routes))
	}
}
