package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// newTenant starts the services and provisions a tenant through the client.
func newTenant(t *testing.T) (*client.Client, *client.TenantClient) {
	t.Helper()
	s := servicetest.Start(t)
	c, err := client.New(client.Config{CommandURL: s.CommandURL, QueryURL: s.QueryURL, Token: client.StaticToken(servicetest.Token)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p, err := c.CreateTenant(ctx, "acme", client.NewTenant{TenantID: "eu"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != http.StatusCreated && p.Status != http.StatusAccepted {
		t.Fatalf("provision status %d, want 201 or 202", p.Status)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.WaitTenantActive(wctx, "acme", "eu", 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return c, c.Tenant("acme", "eu")
}

func problemOf(t *testing.T, err error) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *client.Error", err, err)
	}
	return e
}

func collect[T any](t *testing.T, seq func(func(T, error) bool)) []T {
	t.Helper()
	var out []T
	for it, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, it)
	}
	return out
}

func TestClientAgainstTheServices(t *testing.T) {
	t.Parallel()
	c, ten := newTenant(t)
	ctx := context.Background()

	again, err := c.CreateTenant(ctx, "acme", client.NewTenant{TenantID: "eu"})
	if err != nil || again.Status != http.StatusOK || again.Tenant.TenantID != "eu" {
		t.Fatalf("provision again: %+v %v, want 200", again, err)
	}
	if _, err := c.CreateTenant(ctx, "acme", client.NewTenant{TenantID: "eu", Keycloak: &client.KeycloakSettings{
		URL: "http://kc.example", Realm: "r", ClientID: "c", ClientSecret: "s"}}); !client.HasCode(err, client.CodeTenantExists) {
		t.Fatalf("provision with other settings: %v, want tenant_exists", err)
	}
	tn, err := ten.SetKeycloak(ctx, client.KeycloakSettings{URL: "http://kc.example", Realm: "r", ClientID: "c", ClientSecret: "s"})
	if err != nil || tn.Keycloak == nil || tn.Keycloak.Realm != "r" || tn.Keycloak.ClientSecret != "" {
		t.Fatalf("set keycloak: %+v %v", tn, err)
	}
	got, err := ten.Get(ctx)
	if err != nil || got.Status != client.TenantActive || got.TenantID != "eu" {
		t.Fatalf("get tenant: %+v %v", got, err)
	}

	u, err := ten.CreateUser(ctx, client.NewUser{Username: "JDoe", Email: "JDoe@Example.com", FirstName: "Jane", LastName: "Doe",
		Attributes: map[string][]string{"dept": {"eng"}}, Password: "correct horse"}, client.IdempotencyKey("create-jdoe"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Username != "jdoe" || u.Email != "jdoe@example.com" || u.Version != 1 || u.ID == "" || !u.IsActive {
		t.Fatalf("created %+v", u)
	}
	replay, err := ten.CreateUser(ctx, client.NewUser{Username: "JDoe", Email: "JDoe@Example.com", FirstName: "Jane", LastName: "Doe",
		Attributes: map[string][]string{"dept": {"eng"}}, Password: "correct horse"}, client.IdempotencyKey("create-jdoe"))
	if err != nil || replay.ID != u.ID || replay.Version != 1 {
		t.Fatalf("idempotent replay: %+v %v, want the same user", replay, err)
	}
	_, err = ten.CreateUser(ctx, client.NewUser{Username: "other"}, client.IdempotencyKey("create-jdoe"))
	if e := problemOf(t, err); e.Status != 422 || e.Code != client.CodeIdempotencyKeyReused {
		t.Fatalf("key reused: %v", err)
	}
	_, err = ten.CreateUser(ctx, client.NewUser{Username: "jane", Email: "JDOE@example.com"})
	if !client.HasCode(err, client.CodeEmailTaken) || !client.IsConflict(err) {
		t.Fatalf("email taken: %v", err)
	}
	_, err = ten.CreateUser(ctx, client.NewUser{Username: "bad name!", Email: "not-an-email"})
	e := problemOf(t, err)
	var fields []string
	for _, f := range e.Errors {
		fields = append(fields, f.Field)
	}
	if e.Status != 400 || e.Code != client.CodeValidationFailed || !slices.Contains(fields, "username") || !slices.Contains(fields, "email") {
		t.Fatalf("validation: %+v", e)
	}

	read, err := ten.GetUser(ctx, "jdoe", client.MinVersion(u.Version))
	if err != nil || read.ID != u.ID || read.Attributes["dept"][0] != "eng" {
		t.Fatalf("get user: %+v %v", read, err)
	}
	last := "Dough"
	if _, err := ten.UpdateUser(ctx, "jdoe", client.UserPatch{LastName: &last}, client.IfMatch(7)); !client.HasCode(err, client.CodeVersionMismatch) {
		t.Fatalf("stale If-Match: %v, want version_mismatch", err)
	}
	u, err = ten.UpdateUser(ctx, "jdoe", client.UserPatch{LastName: &last}, client.IfMatch(1))
	if err != nil || u.LastName != "Dough" || u.Version != 2 {
		t.Fatalf("update: %+v %v", u, err)
	}
	if u, err = ten.DeactivateUser(ctx, "jdoe", client.IfMatch(2)); err != nil || u.IsActive || u.Version != 3 {
		t.Fatalf("deactivate: %+v %v", u, err)
	}
	if u, err = ten.ActivateUser(ctx, "jdoe"); err != nil || !u.IsActive || u.Version != 4 {
		t.Fatalf("activate: %+v %v", u, err)
	}
	if r, err := ten.SetPassword(ctx, "jdoe", "another secret", client.IfMatch(4)); err != nil || r.Version != 5 || r.CommandID == "" {
		t.Fatalf("password: %+v %v", r, err)
	}
	if _, err := ten.GetUser(ctx, "nobody"); !client.IsNotFound(err) {
		t.Fatalf("unknown user: %v", err)
	}

	g, err := ten.CreateGroup(ctx, client.NewGroup{Name: "Site Admins", Description: "people who run the site"})
	if err != nil || g.Name != "Site Admins" || g.ID == "" {
		t.Fatalf("create group: %+v %v", g, err)
	}
	if _, err := ten.CreateGroup(ctx, client.NewGroup{Name: "site admins"}); !client.HasCode(err, client.CodeGroupExists) {
		t.Fatalf("group exists: %v", err)
	}
	desc := "admins of the site"
	if g, err = ten.UpdateGroup(ctx, "site admins", client.GroupPatch{Description: &desc}, client.IfMatch(1)); err != nil || g.Description != desc {
		t.Fatalf("update group: %+v %v", g, err)
	}
	for i := range 5 {
		name := fmt.Sprintf("user%02d", i)
		if _, err := ten.CreateUser(ctx, client.NewUser{Username: name, Email: name + "@example.com", LastName: "Smith"}); err != nil {
			t.Fatal(err)
		}
		if _, err := ten.AddMember(ctx, "Site Admins", name); err != nil {
			t.Fatal(err)
		}
	}
	r, err := ten.AddMember(ctx, "Site Admins", "jdoe")
	if err != nil || r.Version != 8 {
		t.Fatalf("add member: %+v %v, want group version 8", r, err)
	}
	if r, err = ten.RemoveMember(ctx, "Site Admins", "user04", client.IfMatch(8)); err != nil || r.Version != 9 {
		t.Fatalf("remove member: %+v %v", r, err)
	}
	if _, err := ten.GetGroup(ctx, "SITE ADMINS", client.MinVersion(9)); err != nil {
		t.Fatal(err)
	}

	// Lists follow their cursors: pages of 2 over 6 users.
	users := collect(t, ten.Users(ctx, client.UserFilter{Order: client.UpdatedAsc, Limit: 2}))
	var names []string
	for _, u := range users {
		names = append(names, u.Username)
	}
	if want := []string{"jdoe", "user00", "user01", "user02", "user03", "user04"}; !slices.Equal(names, want) {
		t.Fatalf("users %v, want %v", names, want)
	}
	page, err := ten.ListUsers(ctx, client.UserFilter{LastNamePrefix: "smi", Limit: 3}, "")
	if err != nil || len(page.Items) != 3 || page.NextCursor == nil {
		t.Fatalf("first page: %+v %v", page, err)
	}
	page, err = ten.ListUsers(ctx, client.UserFilter{LastNamePrefix: "smi", Limit: 3}, *page.NextCursor)
	if err != nil || len(page.Items) != 2 || page.Items[1].Username != "user04" {
		t.Fatalf("second page: %+v %v", page, err)
	}
	if _, err := ten.ListUsers(ctx, client.UserFilter{}, "not-a-cursor"); !client.HasCode(err, client.CodeValidationFailed) {
		t.Fatalf("bad cursor: %v", err)
	}
	byUsername := collect(t, ten.Users(ctx, client.UserFilter{UsernamePrefix: "USER0", Limit: 2}))
	if len(byUsername) != 5 || byUsername[0].Username != "user00" || byUsername[4].Username != "user04" {
		t.Fatalf("by username prefix: %+v", byUsername)
	}
	byEmail := collect(t, ten.Users(ctx, client.UserFilter{Email: "USER03@example.com"}))
	if len(byEmail) != 1 || byEmail[0].Username != "user03" {
		t.Fatalf("by email: %+v", byEmail)
	}
	members := collect(t, ten.GroupMembers(ctx, "site admins", 2))
	if len(members) != 5 || members[0].Username != "jdoe" {
		t.Fatalf("members: %+v", members)
	}
	groups := collect(t, ten.UserGroups(ctx, "user01", 0))
	if len(groups) != 1 || groups[0].Name != "Site Admins" {
		t.Fatalf("user groups: %+v", groups)
	}
	all := collect(t, ten.Groups(ctx, 0))
	if len(all) != 1 {
		t.Fatalf("groups: %+v", all)
	}
	// Newest first: jdoe's joining Site Admins (the group's change, in jdoe's feed too,
	// written after the group's view), then jdoe's own.
	var activity []client.Activity
	eventually(t, func() bool {
		activity = collect(t, ten.Activity(ctx, client.ActivityFilter{Entity: client.UserEntity("jdoe"), Limit: 2}))
		return len(activity) == 6
	})
	var types []string
	for _, a := range activity {
		types = append(types, a.Type)
	}
	if want := []string{"group.member_added", "user.password_changed", "user.activated", "user.deactivated", "user.updated", "user.created"}; !slices.Equal(types, want) {
		t.Fatalf("activity %v, want %v", types, want)
	}
	if ch := activity[0].Changes["group"]; activity[0].Entity != "group:site admins" || ch.New != "Site Admins" {
		t.Fatalf("joining Site Admins in jdoe's feed: %+v", activity[0])
	}
	if ch := activity[4].Changes["last_name"]; ch.Old != "Doe" || ch.New != "Dough" {
		t.Fatalf("update's change %+v", activity[4].Changes)
	}
	byActor := collect(t, ten.Activity(ctx, client.ActivityFilter{Actor: "bootstrap", Limit: 500}))
	if len(byActor) < 15 {
		t.Fatalf("by actor: %d items", len(byActor))
	}
	if len(collect(t, ten.Activity(ctx, client.ActivityFilter{Day: time.Now().UTC().Format("2006-01-02")}))) != len(byActor) {
		t.Fatal("today's activity differs from the bootstrap actor's")
	}
	groupActivity := collect(t, ten.Activity(ctx, client.ActivityFilter{Entity: client.GroupEntity("site admins")}))
	if len(groupActivity) == 0 || groupActivity[0].Type != "group.member_removed" {
		t.Fatalf("group activity %+v", groupActivity)
	}

	if _, err := ten.DeleteUser(ctx, "jdoe", client.IfMatch(1)); !client.HasCode(err, client.CodeVersionMismatch) {
		t.Fatalf("stale delete: %v", err)
	}
	if r, err := ten.DeleteUser(ctx, "jdoe"); err != nil || r.Status != http.StatusNoContent {
		t.Fatalf("delete user: %+v %v", r, err)
	}
	if _, err := ten.DeleteGroup(ctx, "Site Admins"); err != nil {
		t.Fatal(err)
	}
	if _, err := ten.DeleteGroup(ctx, "Site Admins"); !client.IsNotFound(err) {
		t.Fatalf("delete again: %v", err)
	}
}

func TestClientWithoutAValidToken(t *testing.T) {
	t.Parallel()
	s := servicetest.Start(t)
	c, err := client.New(client.Config{CommandURL: s.CommandURL, QueryURL: s.QueryURL, Token: client.StaticToken("wrong")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Tenant("acme", "eu").GetUser(context.Background(), "jdoe")
	if e := problemOf(t, err); e.Status != 401 || e.Code != client.CodeUnauthorized {
		t.Fatalf("got %v, want 401 unauthorized", err)
	}
}

func TestListTenants(t *testing.T) {
	t.Parallel()
	c, _ := newTenant(t)
	ctx := context.Background()
	for _, st := range [][2]string{{"acme", "us"}, {"other", "ap"}} {
		if _, err := c.CreateTenant(ctx, st[0], client.NewTenant{TenantID: st[1], Keycloak: &client.KeycloakSettings{
			URL: "http://kc.example", Realm: "r", ClientID: "c", ClientSecret: "secret"}}); err != nil {
			t.Fatal(err)
		}
	}

	var ids []string
	for tn, err := range c.Tenants(ctx, "acme", 1) {
		if err != nil {
			t.Fatal(err)
		}
		if tn.SystemID != "acme" {
			t.Errorf("tenant %+v listed for system acme", tn)
		}
		if tn.Keycloak != nil && tn.Keycloak.ClientSecret != "" {
			t.Errorf("tenant %s listed with its client secret", tn.TenantID)
		}
		ids = append(ids, tn.TenantID)
	}
	if want := []string{"eu", "us"}; !slices.Equal(ids, want) {
		t.Fatalf("tenants of acme %v, want %v", ids, want)
	}

	first, err := c.ListTenants(ctx, "acme", 1, "")
	if err != nil || len(first.Items) != 1 || first.NextCursor == nil {
		t.Fatalf("first page of one: %+v %v, want one tenant and a cursor", first, err)
	}
	second, err := c.ListTenants(ctx, "acme", 1, *first.NextCursor)
	if err != nil || len(second.Items) != 1 || second.Items[0].TenantID != "us" || second.NextCursor != nil {
		t.Fatalf("second page: %+v %v, want us and no cursor", second, err)
	}
	if second.Items[0].Keycloak == nil || second.Items[0].Keycloak.Realm != "r" {
		t.Errorf("us listed without its Keycloak settings: %+v", second.Items[0])
	}
	_, err = c.ListTenants(ctx, "other", 1, *first.NextCursor)
	if e := problemOf(t, err); e.Status != http.StatusBadRequest || e.Code != client.CodeValidationFailed {
		t.Errorf("acme's cursor on other's list: %v, want a 400", err)
	}
	if got := collect(t, c.Tenants(ctx, "nobody", 0)); len(got) != 0 {
		t.Errorf("a system without tenants lists %+v", got)
	}
}
