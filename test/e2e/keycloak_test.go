package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

const realm = "acme"

// realmUser is the double's user by username, with the names of its groups.
func realmUser(kc *keycloaktest.Server, username string) (keycloaktest.User, []string, bool) {
	u, ok := kc.UserByUsername(realm, username)
	if !ok {
		return u, nil, false
	}
	var names []string
	for _, g := range kc.Groups(realm) {
		if slices.Contains(g.Members, u.ID) {
			names = append(names, g.Name)
		}
	}
	return u, names, true
}

// keycloakSetup starts the services, a Keycloak double with a realm, and a tenant whose
// Keycloak settings point at it.
func keycloakSetup(t *testing.T) (*env, *keycloaktest.Server, string) {
	t.Helper()
	kc := keycloaktest.NewServer(t, keycloaktest.Config{TokenLifetime: 30 * time.Second})
	kc.AddRealm(realm, "ssodir-sync", "sync-secret")
	if err := kc.SetUnmanagedAttributes(realm, true); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	api := e.start("command-api")
	e.start("projector")
	e.start("keycloak-sync", "SSO_STREAM_LEASE=3s", "SSO_RECONCILE_INTERVAL=1h")
	r := call(t, "POST", "http://"+api.addr+"/v1/systems/kc/tenants", map[string]any{"tenant_id": "t1",
		"keycloak": map[string]any{"url": kc.URL(), "realm": realm, "client_id": "ssodir-sync", "client_secret": "sync-secret", "on_delete": "delete"}})
	if r.status != 201 {
		t.Fatalf("provision: %d %s", r.status, r.body)
	}
	return e, kc, "http://" + api.addr + "/v1/systems/kc/tenants/t1"
}

func mustStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("want %d, got %d: %s", want, r.status, r.body)
	}
}

// TestKeycloakFollowsCommands checks that users, groups, memberships, passwords,
// deactivations and deletes reach the realm within seconds, each user once, also through
// injected 429 and 503 answers.
func TestKeycloakFollowsCommands(t *testing.T) {
	t.Parallel()
	_, kc, base := keycloakSetup(t)
	kc.Inject(keycloaktest.Fault{Method: "POST", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Times: 2, Status: 429, RetryAfter: "1"})
	kc.Inject(keycloaktest.Fault{Method: "PUT", PathPrefix: keycloaktest.AdminPath(realm, "/users"), Times: 1, Status: 503})

	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "jdoe", "email": "jdoe@example.com",
		"first_name": "Jane", "last_name": "Doe", "password": "first-secret"}), 201)
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "rroe", "email": "rroe@example.com"}), 201)
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "gone", "email": "gone@example.com"}), 201)
	mustStatus(t, call(t, "POST", base+"/groups", map[string]any{"name": "Admins", "description": "the admins"}), 201)
	mustStatus(t, call(t, "PUT", base+"/groups/admins/members/jdoe", nil), 204)
	mustStatus(t, call(t, "PUT", base+"/groups/admins/members/rroe", nil), 204)
	mustStatus(t, call(t, "PATCH", base+"/users/jdoe", map[string]any{"email": "jane@example.com"}), 200)
	mustStatus(t, call(t, "PUT", base+"/users/jdoe/password", map[string]any{"password": "second-secret"}), 204)
	mustStatus(t, call(t, "POST", base+"/users/rroe/deactivate", nil), 200)
	mustStatus(t, call(t, "DELETE", base+"/groups/admins/members/rroe", nil), 204)
	mustStatus(t, call(t, "DELETE", base+"/users/gone", nil), 204)
	// Members in bulk: each member of a change reaches the realm.
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "sam", "email": "sam@example.com"}), 201)
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "ted", "email": "ted@example.com"}), 201)
	mustStatus(t, call(t, "POST", base+"/groups/admins/members", map[string]any{"add": []string{"sam", "ted"}}), 200)
	mustStatus(t, call(t, "POST", base+"/groups/admins/members", map[string]any{"remove": []string{"ted"}}), 200)

	eventually(t, 60*time.Second, "the realm to reflect the directory", func() (bool, string) {
		for user, want := range map[string][]string{"sam": {"Admins"}, "ted": nil} {
			if _, groups, ok := realmUser(kc, user); !ok || !slices.Equal(groups, want) {
				return false, fmt.Sprintf("%s is in %v, want %v", user, groups, want)
			}
		}
		j, jg, ok := realmUser(kc, "jdoe")
		if !ok || j.Email != "jane@example.com" || !j.Enabled || !slices.Equal(jg, []string{"Admins"}) || len(j.Attributes["ssodir_id"]) != 1 {
			return false, fmt.Sprintf("jdoe: %+v groups %v", j, jg)
		}
		if p, ok := kc.LastPassword(realm, j.ID); !ok || p.Value != "second-secret" || p.Temporary {
			return false, fmt.Sprintf("jdoe's password: %+v", p)
		}
		r, rg, ok := realmUser(kc, "rroe")
		if !ok || r.Enabled || len(rg) != 0 {
			return false, fmt.Sprintf("rroe: %+v groups %v", r, rg)
		}
		if _, _, ok := realmUser(kc, "gone"); ok {
			return false, "the deleted user is still in the realm"
		}
		g, ok := kc.GroupByName(realm, "Admins")
		if !ok || g.Description != "the admins" {
			return false, fmt.Sprintf("group: %+v", g)
		}
		return true, ""
	})
	if n := len(kc.Users(realm)); n != 4 {
		t.Errorf("the realm holds %d users, want 4 (no duplicates from retried creates)", n)
	}
}

func reconcile(t *testing.T, e *env, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "keycloak-sync"), append([]string{"reconcile", "--system", "kc", "--tenant", "t1"}, args...)...)
	cmd.Env = e.vars()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reconcile %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func writes(kc *keycloaktest.Server) int {
	n := 0
	for _, r := range kc.AdminRequests() {
		if r.Method != "GET" {
			n++
		}
	}
	return n
}

// TestReconcileRepairsDrift changes the realm behind ssodir's back and checks that a dry
// run prints the repairs without writing, that a reconcile makes them (leaving unmanaged
// users alone), and that a second reconcile finds nothing to do.
func TestReconcileRepairsDrift(t *testing.T) {
	t.Parallel()
	e, kc, base := keycloakSetup(t)
	for _, u := range []string{"ann", "bob", "cid", "dan", "eve", "fay"} {
		mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": u, "email": u + "@example.com"}), 201)
	}
	mustStatus(t, call(t, "POST", base+"/groups", map[string]any{"name": "Staff"}), 201)
	mustStatus(t, call(t, "PUT", base+"/groups/staff/members/ann", nil), 204)
	eventually(t, 60*time.Second, "the realm to fill", func() (bool, string) {
		_, g, ok := realmUser(kc, "ann")
		return ok && len(kc.Users(realm)) == 6 && len(g) == 1, fmt.Sprintf("%d users", len(kc.Users(realm)))
	})
	// Let the stream consumer settle so that nothing it still sends counts as a write below.
	time.Sleep(2 * time.Second)

	ann, _, _ := realmUser(kc, "ann")
	bob, _, _ := realmUser(kc, "bob")
	staff, _ := kc.GroupByName(realm, "Staff")
	if err := kc.UpdateUser(realm, bob.ID, func(u *keycloaktest.User) { u.Email = "changed@example.com" }); err != nil {
		t.Fatal(err)
	}
	if err := kc.RemoveMember(realm, ann.ID, staff.ID); err != nil {
		t.Fatal(err)
	}
	cid, _, _ := realmUser(kc, "cid")
	if err := kc.DeleteUser(realm, cid.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CreateUser(realm, keycloaktest.User{Username: "stray", Email: "stray@example.com", Enabled: true,
		Attributes: map[string][]string{"ssodir_id": {"no-such-id"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CreateUser(realm, keycloaktest.User{Username: "admin", Email: "admin@example.com", Enabled: true}); err != nil {
		t.Fatal(err)
	}

	before := writes(kc)
	plan := reconcile(t, e, "--dry-run")
	if w := writes(kc); w != before {
		t.Fatalf("the dry run wrote %d times", w-before)
	}
	for _, want := range []string{"bob", "cid", "stray", "ann"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the dry-run plan does not mention %s:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "admin@") || strings.Contains(plan, " admin") {
		t.Errorf("the plan touches the unmanaged user:\n%s", plan)
	}

	reconcile(t, e)
	if b, _, _ := realmUser(kc, "bob"); b.Email != "bob@example.com" {
		t.Errorf("bob's email not repaired: %q", b.Email)
	}
	if _, g, _ := realmUser(kc, "ann"); !slices.Equal(g, []string{"Staff"}) {
		t.Errorf("ann's membership not repaired: %v", g)
	}
	if _, _, ok := realmUser(kc, "cid"); !ok {
		t.Error("cid not re-created")
	}
	if _, _, ok := realmUser(kc, "stray"); ok {
		t.Error("the managed user unknown to the directory is still there")
	}
	if _, _, ok := realmUser(kc, "admin"); !ok {
		t.Error("the unmanaged user was removed")
	}
	if out := reconcile(t, e); !strings.Contains(out, "nothing to do") {
		t.Errorf("a second reconcile planned changes:\n%s", out)
	}
}
