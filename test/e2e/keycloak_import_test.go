package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// TestKeycloakSyncAdoptsImportedRealm imports a realm that already holds users, groups and
// memberships with `ssodirctl import keycloak` into a tenant whose Keycloak settings point
// at that realm, while the projector and keycloak-sync run: keycloak-sync must adopt what
// the import marked instead of creating a second copy, change an imported user in place
// when the directory changes it, and a reconcile afterwards must find nothing to do.
func TestKeycloakSyncAdoptsImportedRealm(t *testing.T) {
	t.Parallel()
	e, kc, base := keycloakSetup(t)
	query := e.start("query-api")

	must := func(id string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	admins := must(kc.CreateGroup(realm, keycloaktest.Group{Name: "Admins", Description: "the admins"}))
	staff := must(kc.CreateGroup(realm, keycloaktest.Group{Name: "Staff"}))
	jdoe := must(kc.CreateUser(realm, keycloaktest.User{Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", LastName: "Doe", Enabled: true}))
	asmith := must(kc.CreateUser(realm, keycloaktest.User{Username: "asmith", Email: "asmith@example.com", FirstName: "Al", Enabled: true}))
	rroe := must(kc.CreateUser(realm, keycloaktest.User{Username: "rroe", Email: "rroe@example.com", Enabled: false}))
	for _, m := range [][2]string{{jdoe, admins}, {jdoe, staff}, {asmith, staff}, {rroe, staff}} {
		if err := kc.AddMember(realm, m[0], m[1]); err != nil {
			t.Fatal(err)
		}
	}
	userIDs := map[string]string{"jdoe": jdoe, "asmith": asmith, "rroe": rroe}
	groupIDs := map[string]string{"Admins": admins, "Staff": staff}

	cmd := exec.Command(filepath.Join(binDir, "ssodirctl"), "import", "keycloak", "--url", kc.URL(), "--realm", realm,
		"--client-id", "ssodir-sync", "-o", "json")
	cmd.Env = e.vars("SSODIR_COMMAND_URL="+strings.TrimSuffix(base, "/v1/systems/kc/tenants/t1"), "SSODIR_QUERY_URL=http://"+query.addr,
		"SSODIR_TOKEN="+token, "SSODIR_SYSTEM=kc", "SSODIR_TENANT=t1", "SSODIR_KEYCLOAK_CLIENT_SECRET=sync-secret")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("import keycloak: %v\n%s%s", err, out, stderr.String())
	}
	var sum struct {
		Created     int `json:"created"`
		Memberships int `json:"memberships"`
		Conflicts   []json.RawMessage
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("import summary %s: %v", out, err)
	}
	if sum.Created != 5 || sum.Memberships != 4 || len(sum.Conflicts) != 0 {
		t.Fatalf("import summary %s, want 5 created, 4 memberships, no conflicts", out)
	}

	// The directory changes an imported user: keycloak-sync must change that Keycloak user.
	mustStatus(t, call(t, "PATCH", base+"/users/jdoe", map[string]any{"email": "jane@example.com", "last_name": "Dough"}), 200)
	// And a membership: it raises the group's version, which the group in Keycloak need
	// not carry (a reconcile must not count that as drift).
	mustStatus(t, call(t, "DELETE", base+"/groups/admins/members/asmith", nil), 204)
	mustStatus(t, call(t, "PUT", base+"/groups/admins/members/asmith", nil), 204)

	realmState := func() (bool, string) {
		users, groups := kc.Users(realm), kc.Groups(realm)
		if len(users) != 3 || len(groups) != 2 {
			return false, fmt.Sprintf("%d users, %d groups, want 3 and 2", len(users), len(groups))
		}
		for _, u := range users {
			if userIDs[u.Username] != u.ID || len(u.Attributes["ssodir_id"]) != 1 {
				return false, fmt.Sprintf("user %s (%s) is not the imported one, or unmarked: %v", u.Username, u.ID, u.Attributes)
			}
		}
		for _, g := range groups {
			if groupIDs[g.Name] != g.ID || len(g.Attributes["ssodir_id"]) != 1 {
				return false, fmt.Sprintf("group %s (%s) is not the imported one, or unmarked: %v", g.Name, g.ID, g.Attributes)
			}
		}
		j, jg, _ := realmUser(kc, "jdoe")
		if j.Email != "jane@example.com" || j.LastName != "Dough" || j.FirstName != "Jane" || !slices.Equal(jg, []string{"Admins", "Staff"}) {
			return false, fmt.Sprintf("jdoe: %+v groups %v", j, jg)
		}
		if _, ag, _ := realmUser(kc, "asmith"); !slices.Equal(ag, []string{"Admins", "Staff"}) {
			return false, fmt.Sprintf("asmith groups %v", ag)
		}
		if r, rg, _ := realmUser(kc, "rroe"); r.Enabled || !slices.Equal(rg, []string{"Staff"}) {
			return false, fmt.Sprintf("rroe: %+v groups %v", r, rg)
		}
		return true, ""
	}
	eventually(t, 60*time.Second, "the realm to hold the imported objects, jdoe changed in place", realmState)
	// Let the stream consumer settle; nothing it does later may undo or duplicate.
	time.Sleep(2 * time.Second)
	if ok, why := realmState(); !ok {
		t.Fatalf("after settling: %s", why)
	}

	before := writes(kc)
	if plan := reconcile(t, e); !strings.Contains(plan, "nothing to do") {
		t.Errorf("a reconcile after the import planned changes:\n%s", plan)
	}
	if w := writes(kc); w != before {
		t.Errorf("the reconcile wrote %d times to the realm", w-before)
	}
	if ok, why := realmState(); !ok {
		t.Errorf("after the reconcile: %s", why)
	}
}
