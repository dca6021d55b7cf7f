package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/servicetest"
)

// eventually waits (up to 15 s) for the query views to show what cond checks.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 15 s: %s", what)
		}
	}
}

// settled reads a count until it stays the same for a second (the views caught up).
func settled(t *testing.T, count func() int) int {
	t.Helper()
	last := count()
	for range 30 {
		time.Sleep(time.Second)
		n := count()
		if n == last {
			return n
		}
		last = n
	}
	t.Fatal("the count did not settle within 30 s")
	return 0
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type importSummary struct {
	Created, Unchanged, Invalid int
	Conflicts                   []struct {
		Line         int
		Name, Reason string
	}
	GroupsCreated int `json:"groups_created"`
	Memberships   int
}

func TestImportUsersFromCSV(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")

	bad := writeFile(t, "people.csv", `username,email,first_name,last_name,groups,attr.dept,password
jdoe,jdoe@example.com,Jane,Doe,Admins;Staff,eng;ops,
bad name!,asmith@example.com,Al,Smith,,,
asmith,not-an-email,Al,Smith,,,short
JDOE,other@example.com,,,,,
bsmith,JDOE@example.com,Bo,Smith,,,
csmith,c@example.com,,,Bad/Group,,
`)
	r := c.run("", "import", "users", bad)
	if r.code != exitUsage {
		t.Fatalf("exit %d, want 2\n%s%s", r.code, r.out, r.errOut)
	}
	for _, want := range []string{"line 3: username", "line 4: email", "line 4: password", "line 5: username jdoe is also on line 2",
		"line 6: email jdoe@example.com is also on line 2", `line 7: group "Bad/Group"`, "5 of 6 lines are invalid"} {
		if !strings.Contains(r.errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.errOut)
		}
	}
	if users := decodeJSON[[]client.User](t, c.ok("users", "list", "-o", "json")); len(users) != 0 {
		t.Fatalf("an invalid file wrote %d users", len(users))
	}

	// --skip-invalid imports the valid line, creates its groups, and exits 5.
	r = c.run("", "import", "users", "--skip-invalid", "-o", "json", bad)
	if r.code != exitIncomplete {
		t.Fatalf("exit %d, want 5\n%s%s", r.code, r.out, r.errOut)
	}
	sum := decodeJSON[importSummary](t, r.out)
	if sum.Created != 1 || sum.Invalid != 5 || sum.GroupsCreated != 2 || sum.Memberships != 2 {
		t.Fatalf("summary %+v", sum)
	}
	u := decodeJSON[client.User](t, c.ok("users", "get", "jdoe", "--min-version", "1", "-o", "json"))
	if u.FirstName != "Jane" || !slices.Equal(u.Attributes["dept"], []string{"eng", "ops"}) {
		t.Fatalf("imported %+v", u)
	}
	eventually(t, "jdoe is a member of staff", func() bool {
		r := c.run("", "groups", "members", "list", "staff", "-o", "json")
		if r.code != 0 {
			return false
		}
		gs := decodeJSON[[]client.User](t, r.out)
		return len(gs) == 1 && gs[0].Username == "jdoe"
	})

	// A good file with a user the directory already holds differently: a conflict, left alone.
	c.ok("users", "create", "csmith", "--email", "csmith@example.com", "--last-name", "Other")
	c.ok("users", "create", "zed", "--email", "zed@example.com")
	good := writeFile(t, "good.csv", `username,email,first_name,last_name,groups,is_active,password
jdoe,jdoe@example.com,Jane,Doe,Admins;Staff,,
csmith,csmith@example.com,Cy,Smith,,,
dsmith,dsmith@example.com,Di,Smith,Staff,false,correct horse
esmith,zed@example.com,Ed,Smith,,,
`)
	r = c.run("", "import", "users", good, "-o", "json", "--concurrency", "2")
	if r.code != exitIncomplete {
		t.Fatalf("exit %d, want 5\n%s%s", r.code, r.out, r.errOut)
	}
	sum = decodeJSON[importSummary](t, r.out)
	if sum.Created != 1 || sum.Unchanged != 0 || len(sum.Conflicts) != 3 {
		t.Fatalf("summary %+v", sum)
	}
	// jdoe's attributes differ (the file has none), csmith's names, esmith's email is jdoe's.
	for i, want := range []string{"other attributes", `first_name ""`, "email is already used"} {
		if !strings.Contains(sum.Conflicts[i].Reason, want) || sum.Conflicts[i].Line != []int{2, 3, 5}[i] {
			t.Errorf("conflict %d: %+v, want line %d with %q", i, sum.Conflicts[i], []int{2, 3, 5}[i], want)
		}
	}
	if u := decodeJSON[client.User](t, c.ok("users", "get", "csmith", "-o", "json")); u.LastName != "Other" {
		t.Fatalf("a conflict changed the user: %+v", u)
	}
	if u := decodeJSON[client.User](t, c.ok("users", "get", "dsmith", "--min-version", "1", "-o", "json")); u.IsActive || u.FirstName != "Di" {
		t.Fatalf("dsmith %+v", u)
	}

	// The same file again writes nothing: the created line is unchanged, the conflicts stay.
	eventually(t, "the views show the import", func() bool {
		return len(decodeJSON[[]client.User](t, c.ok("users", "list", "-o", "json"))) == 4
	})
	events := func() int {
		return len(decodeJSON[[]client.Activity](t, c.ok("activity", "--actor", "bootstrap", "--max", "0", "-o", "json")))
	}
	before := settled(t, events)
	r = c.run("", "import", "users", good, "-o", "json")
	sum = decodeJSON[importSummary](t, r.out)
	if r.code != exitIncomplete || sum.Created != 0 || sum.Unchanged != 1 || len(sum.Conflicts) != 3 {
		t.Fatalf("second run: exit %d, %+v", r.code, sum)
	}
	if after := settled(t, events); after != before {
		t.Fatalf("the second run recorded %d events", after-before)
	}
	if !strings.Contains(r.errOut, "users: 4/4") {
		t.Fatalf("no plain progress lines on a non-terminal: %q", r.errOut)
	}
	if r := c.run("", "import", "users", writeFile(t, "x.txt", "")); r.code != exitUsage || !strings.Contains(r.errOut, "--format") {
		t.Fatalf("unknown format: %+v", r)
	}
	if r := c.run("", "import", "users", writeFile(t, "x.csv", "user,mail\n")); r.code != exitUsage || !strings.Contains(r.errOut, `column "user"`) {
		t.Fatalf("unknown column: %+v", r)
	}
}

func TestExportThenImportIntoAnotherTenant(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	c.ok("tenants", "create", "us")
	lines := `{"username":"jdoe","email":"jdoe@example.com","first_name":"Jane","last_name":"Doe","attributes":{"dept":["eng"]},"groups":["Admins","Staff"],"password":"correct horse"}

{"username":"asmith","email":"asmith@example.com","is_active":false,"groups":["staff"]}
{"username":"bsmith","nickname":"b"}
`
	r := c.run(lines, "import", "users", "--format", "jsonl", "-")
	if r.code != exitUsage || !strings.Contains(r.errOut, "line 4: not a valid record") || !strings.Contains(r.errOut, "nickname") {
		t.Fatalf("unknown field: %+v", r)
	}
	r = c.run(strings.Replace(lines, `,"nickname":"b"`, "", 1), "import", "users", "--format", "jsonl", "-")
	if r.code != 0 || !strings.Contains(r.out, "users: 3 created, 0 unchanged, 0 conflicts") || !strings.Contains(r.out, "groups: 2 created; memberships: 3 ensured") {
		t.Fatalf("import: %+v", r)
	}
	c.ok("groups", "update", "admins", "--description", "the admins", "--attr", "level=high")
	waitMembers := func() {
		eventually(t, "the import and the update are in the views", func() bool {
			r := c.run("", "groups", "members", "list", "staff", "-o", "json")
			if r.code != 0 {
				return false
			}
			staff := decodeJSON[[]client.User](t, r.out)
			admins := decodeJSON[[]client.Group](t, c.ok("groups", "list", "-o", "json"))
			return len(staff) == 2 && len(admins) == 2 && admins[0].Description == "the admins"
		})
	}
	waitMembers()

	groupsFile := filepath.Join(t.TempDir(), "groups.jsonl")
	c.ok("export", "groups", "--file", groupsFile)
	usersOut := c.run("", "export", "users")
	if usersOut.code != 0 || !strings.Contains(usersOut.errOut, "exported 3 users") {
		t.Fatalf("export users: %+v", usersOut)
	}
	if strings.Contains(usersOut.out, "password") || strings.Contains(usersOut.out, "correct horse") {
		t.Fatalf("the export holds a password: %s", usersOut.out)
	}

	c.env["SSODIR_TENANT"] = "us"
	if r := c.run("", "import", "groups", groupsFile); r.code != 0 || !strings.Contains(r.out, "groups: 2 created") {
		t.Fatalf("import groups: %+v", r)
	}
	if r := c.run(usersOut.out, "import", "users", "--format", "jsonl", "-"); r.code != 0 || !strings.Contains(r.out, "users: 3 created") {
		t.Fatalf("import users: %+v", r)
	}
	waitMembers()
	for _, tenant := range []string{"eu", "us"} {
		c.env["SSODIR_TENANT"] = tenant
		admins := decodeJSON[client.Group](t, c.ok("groups", "get", "admins", "-o", "json"))
		if admins.Description != "the admins" || admins.Attributes["level"][0] != "high" {
			t.Fatalf("%s: admins %+v", tenant, admins)
		}
		staff := decodeJSON[[]client.User](t, c.ok("groups", "members", "list", "staff", "-o", "json"))
		if len(staff) != 2 || staff[0].Username != "asmith" || staff[0].IsActive || staff[1].Attributes["dept"][0] != "eng" {
			t.Fatalf("%s: staff %+v", tenant, staff)
		}
	}
	// Exporting the copy gives the same lines (in the order of the copy's updates).
	sorted := func(s string) string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		slices.Sort(lines)
		return strings.Join(lines, "\n")
	}
	if again := c.ok("export", "users"); sorted(again) != sorted(usersOut.out) {
		t.Fatalf("export of the copy differs:\n%s\nwant\n%s", again, usersOut.out)
	}
	if r := c.run("", "import", "groups", groupsFile); r.code != 0 || !strings.Contains(r.out, "groups: 0 created, 2 unchanged") {
		t.Fatalf("import groups again: %+v", r)
	}
}

// TestImportIsReadableWhenItExits: right after import users exits 0, users list shows every
// new user and groups members list every new membership (--wait, the default), with a
// file of more users than one members change holds.
func TestImportIsReadableWhenItExits(t *testing.T) {
	t.Parallel()
	c := newCtl(t, servicetest.Start(t))
	c.ok("tenants", "create", "eu")
	var b strings.Builder
	b.WriteString("username,email,groups\n")
	const n = 1200
	for i := range n {
		g := "Staff"
		if i%3 == 0 {
			g = "Staff;Admins"
		}
		fmt.Fprintf(&b, "u%04d,u%04d@example.com,%s\n", i, i, g)
	}
	r := c.run("", "import", "users", writeFile(t, "people.csv", b.String()), "-o", "json")
	if r.code != 0 {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.out, r.errOut)
	}
	if sum := decodeJSON[importSummary](t, r.out); sum.Created != n || sum.Memberships != n+n/3 || sum.GroupsCreated != 2 {
		t.Fatalf("summary %+v", sum)
	}
	if users := decodeJSON[[]client.User](t, c.ok("users", "list", "-o", "json")); len(users) != n {
		t.Errorf("users list right after the import shows %d users, want %d", len(users), n)
	}
	for group, want := range map[string]int{"staff": n, "admins": n / 3} {
		if members := decodeJSON[[]client.User](t, c.ok("groups", "members", "list", group, "-o", "json")); len(members) != want {
			t.Errorf("groups members list %s right after the import shows %d, want %d", group, len(members), want)
		}
	}
	// Each group got a few commands, not one per member.
	for _, group := range []string{"staff", "admins"} {
		g := decodeJSON[client.Group](t, c.ok("groups", "get", group, "-o", "json"))
		if g.Version > 30 {
			t.Errorf("group %s is at version %d after the import: its memberships were not sent together", group, g.Version)
		}
	}
}
