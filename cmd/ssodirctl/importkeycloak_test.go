package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
	"github.com/ssodir/ssodir/internal/servicetest"
)

type kcPlanOut struct {
	Groups, Users, Memberships []string
	Managed                    int `json:"already_managed"`
	Conflicts                  []struct{ Name, Reason string }
}

func TestImportKeycloak(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	c.ok("users", "create", "taken", "--email", "taken@example.com")
	c.ok("users", "create", "zed", "--email", "zed@example.com")
	c.ok("groups", "create", "Legacy")

	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	kc.AddRealm("eu", "ssodir", "s3cret")
	must := func(id string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	admins := must(kc.CreateGroup("eu", keycloaktest.Group{Name: "Admins", Description: "the admins", Attributes: map[string][]string{"team": {"core"}}}))
	staff := must(kc.CreateGroup("eu", keycloaktest.Group{Name: "Staff"}))
	must(kc.CreateGroup("eu", keycloaktest.Group{Name: "legacy"}))
	must(kc.CreateGroup("eu", keycloaktest.Group{Name: "Ops+Dev"}))
	jdoe := must(kc.CreateUser("eu", keycloaktest.User{Username: "jdoe", Email: "jdoe@example.com", FirstName: "Jane", LastName: "Doe", Enabled: true,
		EmailVerified: true, Attributes: map[string][]string{"dept": {"eng"}, "locale": {"de"}}, RequiredActions: []string{"CONFIGURE_TOTP"}}))
	asmith := must(kc.CreateUser("eu", keycloaktest.User{Username: "asmith", Email: "asmith@example.com", Enabled: false}))
	must(kc.CreateUser("eu", keycloaktest.User{Username: "taken", Email: "other@example.com", Enabled: true}))
	must(kc.CreateUser("eu", keycloaktest.User{Username: "zedcopy", Email: "zed@example.com", Enabled: true}))
	// (Two realm users with one email, possible in realms that allow duplicate emails:
	// TestImportKeycloakRealmWithSharedEmails.)
	for _, m := range [][2]string{{jdoe, admins}, {jdoe, staff}, {asmith, staff}} {
		if err := kc.AddMember("eu", m[0], m[1]); err != nil {
			t.Fatal(err)
		}
	}

	c.env["SSODIR_KEYCLOAK_CLIENT_SECRET"] = "s3cret"
	args := []string{"import", "keycloak", "--url", kc.URL(), "--realm", "eu", "--client-id", "ssodir"}
	writes := func() []string {
		var out []string
		for _, r := range kc.Requests() {
			if r.Admin() && r.Method != http.MethodGet {
				out = append(out, r.Method+" "+r.Path)
			}
		}
		return out
	}
	events := func() int {
		return len(decodeJSON[[]client.Activity](t, c.ok("activity", "--actor", "bootstrap", "--max", "0", "-o", "json")))
	}
	// The plan reads the directory through the query API: wait until the projector has
	// the three commands above, or a busy machine makes the plan miss them.
	for i := 0; events() < 3; i++ {
		if i == 300 {
			t.Fatal("the seed commands were not projected within 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := settled(t, events)

	// The dry run shows the plan and writes nothing.
	r := c.run("", append(args, "--dry-run", "-o", "json")...)
	if r.code != exitIncomplete {
		t.Fatalf("dry run: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	plan := decodeJSON[kcPlanOut](t, r.out)
	if !slices.Equal(plan.Groups[:2], []string{"Admins", "Staff"}) || !strings.HasPrefix(plan.Groups[2], "legacy (the directory holds this name") || len(plan.Groups) != 3 {
		t.Errorf("planned groups %q", plan.Groups)
	}
	if len(plan.Users) != 3 || plan.Users[0] != "asmith" || plan.Users[1] != "jdoe" || !strings.HasPrefix(plan.Users[2], "taken (the directory holds") {
		t.Errorf("planned users %q", plan.Users)
	}
	slices.Sort(plan.Memberships)
	if want := []string{"Admins/jdoe", "Staff/asmith", "Staff/jdoe"}; !slices.Equal(plan.Memberships, want) {
		t.Errorf("planned memberships %q, want %q", plan.Memberships, want)
	}
	var conflicts []string
	for _, cf := range plan.Conflicts {
		conflicts = append(conflicts, cf.Name)
	}
	wantConflicts := []string{"group Ops+Dev", "user zedcopy"}
	if !slices.Equal(conflicts, wantConflicts) {
		t.Errorf("conflicts %q, want %q", conflicts, wantConflicts)
	}
	if w := writes(); len(w) != 0 {
		t.Fatalf("the dry run wrote to Keycloak: %q", w)
	}
	if n := settled(t, events); n != before {
		t.Fatalf("the dry run wrote %d directory events", n-before)
	}

	// The import.
	r = c.run("", append(args, "-o", "json")...)
	if r.code != exitIncomplete {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	sum := decodeJSON[importSummary](t, r.out)
	conflicts = nil
	for _, cf := range sum.Conflicts {
		conflicts = append(conflicts, cf.Name)
	}
	if sum.Created != 4 || sum.Memberships != 3 || !slices.Equal(conflicts, []string{"group Ops+Dev", "group legacy", "user taken", "user zedcopy"}) {
		t.Fatalf("summary %+v", sum)
	}
	dj := decodeJSON[client.User](t, c.ok("users", "get", "jdoe", "--min-version", "1", "-o", "json"))
	if dj.FirstName != "Jane" || !dj.IsActive || dj.Attributes["dept"][0] != "eng" || dj.Attributes["locale"][0] != "de" {
		t.Fatalf("directory jdoe %+v", dj)
	}
	da := decodeJSON[client.User](t, c.ok("users", "get", "asmith", "--min-version", "1", "-o", "json"))
	if da.IsActive {
		t.Fatalf("a disabled Keycloak user is active in the directory: %+v", da)
	}
	// Its two members joined in one members change: version 2.
	dstaff := decodeJSON[client.Group](t, c.ok("groups", "get", "staff", "--min-version", "2", "-o", "json"))
	if dstaff.Version != 2 {
		t.Fatalf("directory staff %+v", dstaff)
	}
	if dt := decodeJSON[client.User](t, c.ok("users", "get", "taken", "-o", "json")); dt.Email != "taken@example.com" {
		t.Fatalf("a conflict changed the directory's user: %+v", dt)
	}

	// Keycloak's objects carry their directory id and version, and keep everything else.
	kj, _ := kc.User("eu", jdoe)
	if kj.Attributes["ssodir_id"][0] != dj.ID || kj.Attributes["ssodir_version"][0] != "1" || kj.Attributes["locale"][0] != "de" ||
		!kj.EmailVerified || !slices.Equal(kj.RequiredActions, []string{"CONFIGURE_TOTP"}) || kj.FirstName != "Jane" {
		t.Fatalf("Keycloak jdoe %+v", kj)
	}
	ks, _ := kc.GroupByName("eu", "Staff")
	if ks.Attributes["ssodir_id"][0] != dstaff.ID || ks.Attributes["ssodir_version"][0] != "2" || len(ks.Members) != 2 {
		t.Fatalf("Keycloak Staff %+v", ks)
	}
	ka, _ := kc.GroupByName("eu", "Admins")
	if ka.Attributes["team"][0] != "core" || ka.Description != "the admins" || ka.Attributes["ssodir_version"][0] != "2" {
		t.Fatalf("Keycloak Admins %+v", ka)
	}
	if kt, _ := kc.UserByUsername("eu", "taken"); kt.Attributes["ssodir_id"] != nil {
		t.Fatalf("a conflicting Keycloak user was marked: %+v", kt)
	}
	for _, w := range writes() {
		if strings.Contains(w, "password") || strings.Contains(w, "credentials") || strings.HasPrefix(w, "DELETE") || strings.HasPrefix(w, "POST") {
			t.Fatalf("the import sent %s", w)
		}
	}
	if _, set := kc.LastPassword("eu", jdoe); set {
		t.Fatal("the import set a password")
	}

	// A second run changes nothing on either side.
	kc.ResetRequests()
	before = settled(t, events)
	r = c.run("", append(args, "-o", "json")...)
	sum = decodeJSON[importSummary](t, r.out)
	if r.code != exitIncomplete || sum.Created != 0 || sum.Unchanged != 4 || sum.Memberships != 0 {
		t.Fatalf("second run: exit %d %+v\n%s", r.code, sum, r.errOut)
	}
	if w := writes(); len(w) != 0 {
		t.Fatalf("the second run wrote to Keycloak: %q", w)
	}
	if n := settled(t, events); n != before {
		t.Fatalf("the second run wrote %d directory events", n-before)
	}

	// A run that stopped after creating jdoe in the directory, before marking it in
	// Keycloak, is resumed by running it again: the create's Idempotency-Key answers with
	// the same user, and nothing is written twice.
	if err := kc.UpdateUser("eu", jdoe, func(u *keycloaktest.User) {
		delete(u.Attributes, "ssodir_id")
		delete(u.Attributes, "ssodir_version")
	}); err != nil {
		t.Fatal(err)
	}
	r = c.run("", append(args, "-o", "json")...)
	sum = decodeJSON[importSummary](t, r.out)
	if r.code != exitIncomplete || sum.Created != 1 || sum.Unchanged != 3 || len(sum.Conflicts) != 4 {
		t.Fatalf("resumed run: exit %d %+v\n%s", r.code, sum, r.errOut)
	}
	if kj, _ := kc.User("eu", jdoe); kj.Attributes["ssodir_id"][0] != dj.ID || kj.Attributes["locale"][0] != "de" {
		t.Fatalf("Keycloak jdoe after the resumed run %+v", kj)
	}
	if n := settled(t, events); n != before {
		t.Fatalf("the resumed run wrote %d directory events", n-before)
	}

	// A missing secret is a usage error, found before anything is read.
	delete(c.env, "SSODIR_KEYCLOAK_CLIENT_SECRET")
	if r := c.run("", args...); r.code != exitUsage || !strings.Contains(r.errOut, "SSODIR_KEYCLOAK_CLIENT_SECRET") {
		t.Fatalf("without a secret: %+v", r)
	}
}

func TestSharedEmails(t *testing.T) {
	t.Parallel()
	got := sharedEmails([]keycloak.User{{Username: "a", Email: "Twins@example.com"}, {Username: "b", Email: "twins@example.com"},
		{Username: "c", Email: "c@example.com"}, {Username: "d"}, {Username: "e"}})
	if len(got) != 1 || !slices.Equal(got["twins@example.com"], []string{"a", "b"}) {
		t.Fatalf("shared %v", got)
	}
}

func TestImportKeycloakIntoARealmThatDropsTheMark(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	kc.AddRealm("eu", "ssodir", "s3cret")
	if _, err := kc.CreateUser("eu", keycloaktest.User{Username: "jdoe", Email: "jdoe@example.com", Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if err := kc.SetUnmanagedAttributes("eu", false); err != nil {
		t.Fatal(err)
	}
	c.env["SSODIR_KEYCLOAK_CLIENT_SECRET"] = "s3cret"
	r := c.run("", "import", "keycloak", "--url", kc.URL(), "--realm", "eu", "--client-id", "ssodir")
	if r.code != exitFailure || !strings.Contains(r.errOut, "unmanaged attributes") {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
}

// A realm with duplicateEmailsAllowed may hold two users with one email; the directory
// holds an email once, and which of them should keep it is not the import's to guess:
// both are reported, neither is created nor marked, and the rest of the realm comes in.
// Subgroups, which ssodir's flat groups cannot hold, are reported with their parent and
// left out; the parent is imported with its direct members only.
func TestImportKeycloakSharedEmailsAndSubgroups(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	kc := keycloaktest.NewServer(t, keycloaktest.Config{})
	kc.AddRealm("eu", "ssodir", "s3cret")
	if err := kc.AllowDuplicateEmails("eu"); err != nil {
		t.Fatal(err)
	}
	must := func(id string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	staff := must(kc.CreateGroup("eu", keycloaktest.Group{Name: "Staff"}))
	twin1 := must(kc.CreateUser("eu", keycloaktest.User{Username: "twin1", Email: "Twins@example.com", Enabled: true}))
	twin2 := must(kc.CreateUser("eu", keycloaktest.User{Username: "twin2", Email: "twins@example.com", Enabled: true}))
	solo := must(kc.CreateUser("eu", keycloaktest.User{Username: "solo", Email: "solo@example.com", Enabled: true}))
	backend := must(kc.CreateSubGroup("eu", staff, "Backend"))
	must(kc.CreateSubGroup("eu", staff, "Frontend"))
	for _, m := range [][2]string{{twin1, staff}, {solo, staff}, {solo, backend}, {twin2, backend}} {
		if err := kc.AddMember("eu", m[0], m[1]); err != nil {
			t.Fatal(err)
		}
	}
	c.env["SSODIR_KEYCLOAK_CLIENT_SECRET"] = "s3cret"
	args := []string{"import", "keycloak", "--url", kc.URL(), "--realm", "eu", "--client-id", "ssodir", "-o", "json"}

	plan := decodeJSON[kcPlanOut](t, c.run("", append(args, "--dry-run")...).out)
	if !slices.Equal(plan.Groups, []string{"Staff"}) || !slices.Equal(plan.Users, []string{"solo"}) ||
		!slices.Equal(plan.Memberships, []string{"Staff/solo"}) || len(plan.Conflicts) != 3 {
		t.Fatalf("plan %+v", plan)
	}

	check := func(run string, created, unchanged, memberships int) {
		t.Helper()
		r := c.run("", args...)
		if r.code != exitIncomplete {
			t.Fatalf("%s: exit %d, want 5\n%s%s", run, r.code, r.out, r.errOut)
		}
		sum := decodeJSON[importSummary](t, r.out)
		if sum.Created != created || sum.Unchanged != unchanged || sum.Memberships != memberships || len(sum.Conflicts) != 3 {
			t.Fatalf("%s: summary %+v", run, sum)
		}
		if cf := sum.Conflicts[0]; cf.Name != "subgroups of group Staff" || !strings.Contains(cf.Reason, "2 subgroups not imported") {
			t.Errorf("%s: conflict 0: %+v, want Staff's 2 subgroups", run, cf)
		}
		for i, name := range []string{"user twin1", "user twin2"} {
			if cf := sum.Conflicts[i+1]; cf.Name != name || !strings.Contains(cf.Reason, "twin1, twin2 share the email twins@example.com") {
				t.Errorf("%s: conflict %d: %+v, want %s sharing twins@example.com", run, i+1, cf, name)
			}
		}
	}
	check("import", 2, 0, 1)
	if u := decodeJSON[client.User](t, c.ok("users", "get", "solo", "--min-version", "1", "-o", "json")); u.Email != "solo@example.com" {
		t.Fatalf("solo %+v", u)
	}
	for _, name := range []string{"twin1", "twin2"} {
		if r := c.run("", "users", "get", name); r.code == 0 {
			t.Errorf("%s was created in the directory", name)
		}
		if ku, _ := kc.UserByUsername("eu", name); ku.Attributes["ssodir_id"] != nil {
			t.Errorf("Keycloak %s was marked: %+v", name, ku)
		}
	}
	eventually(t, "solo alone is a member of staff", func() bool {
		r := c.run("", "groups", "members", "list", "staff", "-o", "json")
		members := decodeJSON[[]client.User](t, r.out)
		return r.code == 0 && len(members) == 1 && members[0].Username == "solo"
	})
	if gs := decodeJSON[[]client.Group](t, c.ok("groups", "list", "-o", "json")); len(gs) != 1 || gs[0].Name != "Staff" {
		t.Fatalf("directory groups %+v, want Staff alone", gs)
	}
	if kb, _ := kc.GroupByName("eu", "Staff"); kb.Attributes["ssodir_id"] == nil {
		t.Fatalf("Keycloak Staff was not marked: %+v", kb)
	}
	// Once the realm's twins are told apart (an email changed there), a run imports both;
	// the subgroups stay reported.
	if err := kc.UpdateUser("eu", twin2, func(u *keycloaktest.User) { u.Email = "twin2@example.com" }); err != nil {
		t.Fatal(err)
	}
	r := c.run("", args...)
	sum := decodeJSON[importSummary](t, r.out)
	if r.code != exitIncomplete || sum.Created != 2 || sum.Unchanged != 2 || sum.Memberships != 1 || len(sum.Conflicts) != 1 {
		t.Fatalf("after the realm was fixed: exit %d %+v\n%s", r.code, sum, r.errOut)
	}
}
