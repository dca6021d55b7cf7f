package keycloak

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// memDir is a Directory held in memory.
type memDir struct {
	users  []DirectoryUser
	groups []DirectoryGroup
}

func (d *memDir) Users(context.Context) iter.Seq2[DirectoryUser, error] {
	return func(yield func(DirectoryUser, error) bool) {
		for _, u := range d.users {
			if !yield(u, nil) {
				return
			}
		}
	}
}

func (d *memDir) Groups(context.Context) iter.Seq2[DirectoryGroup, error] {
	return func(yield func(DirectoryGroup, error) bool) {
		for _, g := range d.groups {
			if !yield(g, nil) {
				return
			}
		}
	}
}

// memDir is its own write model: what it holds now is what Apply re-checks against.
var _ WriteModel = (*memDir)(nil)

func (d *memDir) User(_ context.Context, username string) (DirectoryUser, bool, error) {
	for _, u := range d.users {
		if strings.EqualFold(u.Username, username) {
			return u, true, nil
		}
	}
	return DirectoryUser{}, false, nil
}

func (d *memDir) Group(_ context.Context, name string) (DirectoryGroup, bool, error) {
	for _, g := range d.groups {
		if strings.EqualFold(g.Name, name) {
			return g, true, nil
		}
	}
	return DirectoryGroup{}, false, nil
}

func (d *memDir) Member(ctx context.Context, groupName, username string) (string, string, bool, error) {
	g, gok, _ := d.Group(ctx, groupName)
	u, uok, _ := d.User(ctx, username)
	if gok && uok && slices.Contains(u.Groups, g.ID) {
		return g.ID, u.ID, true, nil
	}
	return "", "", false, nil
}

func (d *memDir) user(username string) *DirectoryUser {
	for i := range d.users {
		if d.users[i].Username == username {
			return &d.users[i]
		}
	}
	panic("no directory user " + username)
}

func (d *memDir) without(username string) {
	d.users = slices.DeleteFunc(d.users, func(u DirectoryUser) bool { return u.Username == username })
}

// baseDirectory is a small tenant: three groups and five users, one of them inactive.
func baseDirectory() *memDir {
	return &memDir{
		groups: []DirectoryGroup{
			{ID: "g-admins", Name: "admins", Description: "Admins"},
			{ID: "g-staff", Name: "staff", Description: "All staff", Attributes: map[string][]string{"kind": {"org"}}},
			{ID: "g-eng", Name: "eng"},
		},
		users: []DirectoryUser{
			{ID: "u-alice", Username: "alice", Email: "alice@example.com", FirstName: "Alice", LastName: "A", Active: true, Groups: []string{"g-admins", "g-staff"}},
			{ID: "u-bob", Username: "bob", Email: "bob@example.com", FirstName: "Bob", LastName: "B", Active: true, Groups: []string{"g-staff"}},
			{ID: "u-carol", Username: "carol", Email: "Carol@Example.com", FirstName: "Carol", Active: false},
			{ID: "u-dave", Username: "dave", Email: "dave@example.com", Active: true, Groups: []string{"g-eng"},
				Attributes: map[string][]string{"dept": {"eng"}, "floor": {"3", "4"}}},
			{ID: "u-erin", Username: "erin", Email: "erin@example.com", Active: true},
		},
	}
}

// seedUnmanaged adds what an administrator created in Keycloak by hand: a user and a group
// without ssodir_id, the user a member of that group.
func seedUnmanaged(t *testing.T, kc *keycloaktest.Server) (userID, groupID string) {
	t.Helper()
	uid, err := kc.CreateUser(realm, keycloaktest.User{Username: "outsider", Email: "outsider@example.com", Enabled: true,
		Attributes: map[string][]string{"origin": {"manual"}}})
	if err != nil {
		t.Fatal(err)
	}
	gid, err := kc.CreateGroup(realm, keycloaktest.Group{Name: "keycloak-admins"})
	if err != nil {
		t.Fatal(err)
	}
	if err := kc.AddMember(realm, uid, gid); err != nil {
		t.Fatal(err)
	}
	return uid, gid
}

func planLines(p *Plan) []string {
	lines := make([]string, len(p.Actions))
	for i, a := range p.Actions {
		lines[i] = a.String()
	}
	return lines
}

// reconcile plans and applies, then checks that a second plan finds nothing to do.
func reconcile(t *testing.T, f *fixture, dir *memDir, opts PlanOptions) *Plan {
	t.Helper()
	p, err := NewPlan(t.Context(), dir, f.c, opts)
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if _, err := Apply(t.Context(), p, f.c, ApplyOptions{Check: dir}); err != nil {
		t.Fatalf("apply: %v\n%s", err, p)
	}
	again, err := NewPlan(t.Context(), dir, f.c, opts)
	if err != nil {
		t.Fatalf("second plan: %v", err)
	}
	if !again.Empty() {
		t.Fatalf("a second plan on an unchanged directory is not empty:\n%s", again)
	}
	return p
}

func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	metrics:
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestReconcileIntoAnEmptyRealm(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, keycloaktest.Config{}, func(c *ClientConfig) { c.Metrics = metrics })
	outsiderID, kcAdminsID := seedUnmanaged(t, f.kc)
	dir := baseDirectory()

	p, err := NewPlan(t.Context(), dir, f.c, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"+ create group admins", "+ create group eng", "+ create group staff",
		"+ create user alice in admins, staff", "+ create user bob in staff", "+ create user carol",
		"+ create user dave in eng", "+ create user erin",
	}
	if got := planLines(p); !slices.Equal(got, want) {
		t.Fatalf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(p.String(), "Keycloak realm \"acme\": 3 create_group, 5 create_user\n") {
		t.Fatalf("summary line: %s", p)
	}

	var calls, lastDone, lastTotal int
	res, err := Apply(t.Context(), p, f.c, ApplyOptions{Check: dir, Progress: func(done, total int) { calls++; lastDone, lastTotal = done, total }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Applied != len(want) || res.Failed != 0 || calls != len(want) || lastDone != lastTotal || lastTotal != len(want) {
		t.Fatalf("result %+v, progress called %d times, last %d/%d", res, calls, lastDone, lastTotal)
	}

	groupName := map[string]string{}
	for _, g := range f.kc.Groups(realm) {
		groupName[g.ID] = g.Name
	}
	for _, du := range dir.users {
		u, ok := f.kc.UserByUsername(realm, du.Username)
		if !ok {
			t.Fatalf("user %s not created", du.Username)
		}
		var groups []string
		for _, gid := range u.Groups {
			groups = append(groups, groupName[gid])
		}
		wantGroups := []string{}
		for _, gid := range du.Groups {
			wantGroups = append(wantGroups, strings.TrimPrefix(gid, "g-"))
		}
		slices.Sort(wantGroups)
		if u.Attributes[AttrSsodirID][0] != du.ID || u.Enabled != du.Active || u.Email != strings.ToLower(du.Email) ||
			u.FirstName != du.FirstName || !slices.Equal(append([]string{}, groups...), wantGroups) {
			t.Fatalf("user %s in Keycloak: %+v in %v", du.Username, u, groups)
		}
	}
	if got, _ := f.kc.User(realm, outsiderID); len(got.Attributes) != 1 || len(got.Groups) != 1 || got.Groups[0] != kcAdminsID {
		t.Fatalf("the unmanaged user was touched: %+v", got)
	}

	again, err := NewPlan(t.Context(), dir, f.c, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Empty() || again.String() != "Keycloak realm \"acme\": in step, nothing to change\n" {
		t.Fatalf("second plan:\n%s", again)
	}
	if again.ManagedUsers != 5 || again.ManagedGroups != 3 || again.DirectoryUsers != 5 {
		t.Fatalf("second plan counts: %+v", again)
	}

	if v := counterValue(t, reg, "ssodir_keycloak_operations_total", map[string]string{"kind": "create_user", "outcome": "ok"}); v != 5 {
		t.Fatalf("create_user ok = %v, want 5", v)
	}
	if v := counterValue(t, reg, "ssodir_keycloak_drift_total", map[string]string{"kind": "create_group"}); v != 3 {
		t.Fatalf("drift create_group = %v, want 3", v)
	}
}

func TestReconcileRepairsDrift(t *testing.T) {
	type env struct {
		f     *fixture
		dir   *memDir
		user  func(username string) string // Keycloak id
		group func(name string) string
	}
	tests := []struct {
		name          string
		onDelete      OnDelete
		change        func(t *testing.T, e env)
		want          []string
		wantConflicts int
		check         func(t *testing.T, e env)
	}{
		{
			name: "an email changed in Keycloak is changed back",
			change: func(t *testing.T, e env) {
				must(t, e.f.kc.UpdateUser(realm, e.user("bob"), func(u *keycloaktest.User) { u.Email = "bob@evil.example" }))
			},
			want: []string{"~ update user bob: email bob@evil.example→bob@example.com"},
			check: func(t *testing.T, e env) {
				if u, _ := e.f.kc.UserByUsername(realm, "bob"); u.Email != "bob@example.com" || u.FirstName != "Bob" {
					t.Fatalf("bob: %+v", u)
				}
			},
		},
		{
			name: "a membership removed in Keycloak is restored",
			change: func(t *testing.T, e env) {
				must(t, e.f.kc.RemoveMember(realm, e.user("alice"), e.group("admins")))
			},
			want: []string{"> join alice admins"},
		},
		{
			name: "a membership added in Keycloak to a managed group is removed",
			change: func(t *testing.T, e env) {
				must(t, e.f.kc.AddMember(realm, e.user("bob"), e.group("admins")))
			},
			want: []string{"< leave bob admins"},
		},
		{
			name: "a user deleted in Keycloak is created again, with their groups",
			change: func(t *testing.T, e env) {
				must(t, e.f.kc.DeleteUser(realm, e.user("bob")))
			},
			want: []string{"+ create user bob in staff"},
		},
		{
			name: "an extra managed user is deleted",
			change: func(t *testing.T, e env) {
				_, err := e.f.kc.CreateUser(realm, keycloaktest.User{Username: "mallory", Enabled: true,
					Attributes: map[string][]string{AttrSsodirID: {"u-mallory"}}})
				must(t, err)
			},
			want: []string{"- delete user mallory"},
			check: func(t *testing.T, e env) {
				if _, ok := e.f.kc.UserByUsername(realm, "mallory"); ok {
					t.Fatal("mallory is still there")
				}
			},
		},
		{
			name:     "an extra managed user is disabled when on_delete is disable",
			onDelete: OnDeleteDisable,
			change: func(t *testing.T, e env) {
				_, err := e.f.kc.CreateUser(realm, keycloaktest.User{Username: "mallory", Enabled: true,
					Attributes: map[string][]string{AttrSsodirID: {"u-mallory"}}})
				must(t, err)
			},
			want: []string{"- disable user mallory"},
			check: func(t *testing.T, e env) {
				if u, ok := e.f.kc.UserByUsername(realm, "mallory"); !ok || u.Enabled {
					t.Fatalf("mallory should be kept, disabled: %+v", u)
				}
			},
		},
		{
			name: "an unmanaged user in a managed group is left alone",
			change: func(t *testing.T, e env) {
				must(t, e.f.kc.AddMember(realm, e.user("outsider"), e.group("admins")))
				must(t, e.f.kc.UpdateUser(realm, e.user("outsider"), func(u *keycloaktest.User) { u.Email = "new@example.com" }))
			},
			want: []string{},
			check: func(t *testing.T, e env) {
				if u, _ := e.f.kc.UserByUsername(realm, "outsider"); len(u.Groups) != 2 || u.Email != "new@example.com" {
					t.Fatalf("outsider: %+v", u)
				}
			},
		},
		{
			name: "a username held by an unmanaged user is a conflict, not an overwrite",
			change: func(t *testing.T, e env) {
				e.dir.users = append(e.dir.users, DirectoryUser{ID: "u-new", Username: "outsider", Email: "x@example.com", Active: true})
			},
			want:          []string{},
			wantConflicts: 1,
			check: func(t *testing.T, e env) {
				if u, _ := e.f.kc.UserByUsername(realm, "outsider"); u.Email != "outsider@example.com" || u.Attributes[AttrSsodirID] != nil {
					t.Fatalf("outsider was overwritten: %+v", u)
				}
			},
		},
		{
			name: "an email held by an unmanaged user is a conflict, not an overwrite",
			change: func(t *testing.T, e env) {
				e.dir.user("erin").Email = "Outsider@example.com"
			},
			want:          []string{},
			wantConflicts: 1,
		},
		{
			name: "a group description changed in Keycloak is changed back",
			change: func(t *testing.T, e env) {
				must(t, e.f.kc.UpdateGroup(realm, e.group("staff"), func(g *keycloaktest.Group) { g.Description = "Hacked" }))
			},
			want: []string{`~ update group staff: description Hacked→"All staff"`},
			check: func(t *testing.T, e env) {
				if g, _ := e.f.kc.GroupByName(realm, "staff"); g.Description != "All staff" || g.Attributes["kind"][0] != "org" {
					t.Fatalf("staff: %+v", g)
				}
			},
		},
		{
			name: "a group deleted in Keycloak is created again, with its members",
			change: func(t *testing.T, e env) {
				must(t, e.f.kc.DeleteGroup(realm, e.group("admins")))
			},
			want: []string{"+ create group admins", "> join alice admins"},
		},
		{
			name: "a group deleted in the directory is deleted in Keycloak",
			change: func(t *testing.T, e env) {
				e.dir.groups = slices.DeleteFunc(e.dir.groups, func(g DirectoryGroup) bool { return g.Name == "eng" })
				e.dir.user("dave").Groups = nil
			},
			want: []string{"- delete group eng"},
		},
		{
			name: "a user deactivated in the directory is disabled",
			change: func(t *testing.T, e env) {
				e.dir.user("bob").Active = false
			},
			want: []string{"~ update user bob: enabled true→false"},
		},
		{
			name: "a user renamed in Keycloak gets the directory's username back",
			change: func(t *testing.T, e env) {
				// Only a realm that allows editing usernames lets either side rename.
				must(t, e.f.kc.AllowEditUsername(realm, true))
				must(t, e.f.kc.UpdateUser(realm, e.user("bob"), func(u *keycloaktest.User) { u.Username = "robert" }))
			},
			want: []string{"~ update user bob: username robert→bob"},
		},
		{
			name: "an attribute dropped in the directory goes, the user's locale stays",
			change: func(t *testing.T, e env) {
				must(t, e.f.kc.UpdateUser(realm, e.user("dave"), func(u *keycloaktest.User) { u.Attributes["locale"] = []string{"de"} }))
				delete(e.dir.user("dave").Attributes, "dept")
			},
			want: []string{"~ update user dave: attributes.dept [eng]→(none)"},
			check: func(t *testing.T, e env) {
				u, _ := e.f.kc.UserByUsername(realm, "dave")
				if u.Attributes["locale"][0] != "de" || u.Attributes["dept"] != nil || len(u.Attributes["floor"]) != 2 {
					t.Fatalf("dave: %v", u.Attributes)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, keycloaktest.Config{}, nil)
			seedUnmanaged(t, f.kc)
			dir := baseDirectory()
			opts := PlanOptions{OnDelete: tt.onDelete}
			reconcile(t, f, dir, opts)
			e := env{f: f, dir: dir,
				user: func(username string) string {
					u, ok := f.kc.UserByUsername(realm, username)
					if !ok {
						t.Fatalf("no user %s", username)
					}
					return u.ID
				},
				group: func(name string) string {
					g, ok := f.kc.GroupByName(realm, name)
					if !ok {
						t.Fatalf("no group %s", name)
					}
					return g.ID
				},
			}
			tt.change(t, e)
			p, err := NewPlan(t.Context(), dir, f.c, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := planLines(p); !slices.Equal(got, tt.want) {
				t.Fatalf("plan:\n%s\nwant:\n%s", p, strings.Join(tt.want, "\n"))
			}
			if len(p.Conflicts) != tt.wantConflicts {
				t.Fatalf("%d conflicts, want %d:\n%s", len(p.Conflicts), tt.wantConflicts, p)
			}
			reconcile(t, f, dir, opts)
			if tt.check != nil {
				tt.check(t, e)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDryRunOnlyReads(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	dir := baseDirectory()
	reconcile(t, f, dir, PlanOptions{})
	bob, _ := f.kc.UserByUsername(realm, "bob")
	must(t, f.kc.UpdateUser(realm, bob.ID, func(u *keycloaktest.User) { u.Email = "bob@evil.example" }))
	dir.without("erin")
	dir.users = append(dir.users, DirectoryUser{ID: "u-frank", Username: "frank", Active: true, Groups: []string{"g-staff"}})
	f.kc.ResetRequests()

	p, err := NewPlan(t.Context(), dir, f.c, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Empty() {
		t.Fatal("the drift was not found")
	}
	reqs := f.kc.AdminRequests()
	if len(reqs) == 0 {
		t.Fatal("no requests logged")
	}
	for _, r := range reqs {
		if r.Method != http.MethodGet {
			t.Fatalf("a dry run wrote: %s %s", r.Method, r.Path)
		}
	}
	if u, _ := f.kc.User(realm, bob.ID); u.Email != "bob@evil.example" {
		t.Fatalf("bob changed by a dry run: %+v", u)
	}
}

func TestSafetyValve(t *testing.T) {
	tests := []struct {
		name     string
		users    int
		removed  int
		onDelete OnDelete
		valve    *SafetyValve
		wantTrip bool
	}{
		{"removing a third of the users trips the valve", 30, 10, OnDeleteDelete, nil, true},
		{"disabling a third of the users trips the valve too", 30, 10, OnDeleteDisable, nil, true},
		{"a directory that reads empty trips the valve", 30, 30, OnDeleteDelete, nil, true},
		{"removing a sixth of the users passes", 30, 5, OnDeleteDelete, nil, false},
		{"a small realm may lose up to the floor at once", 8, 4, OnDeleteDelete, nil, false},
		{"a valve opened for the run lets it through", 30, 10, OnDeleteDelete, &SafetyValve{MaxShare: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, keycloaktest.Config{}, nil)
			dir := &memDir{}
			for i := range tt.users {
				dir.users = append(dir.users, DirectoryUser{ID: fmt.Sprintf("u%02d", i), Username: fmt.Sprintf("user%02d", i), Active: true})
			}
			reconcile(t, f, dir, PlanOptions{})
			dir.users = dir.users[tt.removed:]
			f.kc.ResetRequests()

			opts := PlanOptions{OnDelete: tt.onDelete, Valve: tt.valve}
			p, err := NewPlan(t.Context(), dir, f.c, opts)
			if tripped := errors.Is(err, ErrSafetyValve); tripped != tt.wantTrip {
				t.Fatalf("NewPlan error = %v, want the valve to trip: %v", err, tt.wantTrip)
			}
			if p == nil {
				t.Fatal("no plan returned")
			}
			_, err = Apply(t.Context(), p, f.c, ApplyOptions{Check: dir})
			if tt.wantTrip {
				if !errors.Is(err, ErrSafetyValve) || !strings.Contains(p.String(), "REFUSED") {
					t.Fatalf("Apply error = %v; plan:\n%s", err, p)
				}
				for _, r := range f.kc.AdminRequests() {
					if r.Method != http.MethodGet {
						t.Fatalf("a refused plan wrote: %s %s", r.Method, r.Path)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := len(f.kc.Users(realm)); n != tt.users-tt.removed {
				t.Fatalf("%d users left, want %d", n, tt.users-tt.removed)
			}
		})
	}
}

func TestReconcileStopsWhenTheRealmDropsSsodirID(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	must(t, f.kc.SetUnmanagedAttributes(realm, false))
	dir := baseDirectory()
	p, err := NewPlan(t.Context(), dir, f.c, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Apply(t.Context(), p, f.c, ApplyOptions{Check: dir})
	if !errors.Is(err, ErrAttributesDropped) {
		t.Fatalf("err = %v, want ErrAttributesDropped", err)
	}
	if res.Failed != 1 || res.Skipped != 4 {
		t.Fatalf("result %+v: want the first create to fail and the other four to be skipped", res)
	}
	if n := f.count(http.MethodPost, "/users"); n != 1 {
		t.Fatalf("%d user creates, want 1", n)
	}
	if users := f.kc.Users(realm); len(users) != 0 {
		t.Fatalf("unmarked users left behind: %+v", users)
	}
}

func TestReconcile10000Users(t *testing.T) {
	if testing.Short() {
		t.Skip("large reconcile")
	}
	f := newFixture(t, keycloaktest.Config{}, func(c *ClientConfig) { c.Concurrency = 16 })
	const nUsers, nGroups = 10000, 20
	dir := &memDir{}
	for g := range nGroups {
		dir.groups = append(dir.groups, DirectoryGroup{ID: fmt.Sprintf("g%02d", g), Name: fmt.Sprintf("group%02d", g)})
	}
	memberships := 0
	for i := range nUsers {
		groups := []string{fmt.Sprintf("g%02d", i%nGroups)}
		if i%3 == 0 {
			groups = append(groups, fmt.Sprintf("g%02d", (i+1)%nGroups))
		}
		memberships += len(groups)
		dir.users = append(dir.users, DirectoryUser{ID: fmt.Sprintf("u%05d", i), Username: fmt.Sprintf("user%05d", i),
			Email: fmt.Sprintf("user%05d@example.com", i), Active: i%50 != 0, Groups: groups,
			Attributes: map[string][]string{"n": {fmt.Sprint(i)}}})
	}
	start := time.Now()
	p := reconcile(t, f, dir, PlanOptions{})
	t.Logf("plan, apply and re-plan of %d users took %s", nUsers, time.Since(start))
	if n := p.Count(ActionCreateUser); n != nUsers {
		t.Fatalf("%d user creates, want %d", n, nUsers)
	}
	if n := p.Count(ActionJoin); n != 0 {
		t.Fatalf("%d joins, want none: new users are created in their groups", n)
	}
	users := f.kc.Users(realm)
	if len(users) != nUsers {
		t.Fatalf("%d users in Keycloak, want %d", len(users), nUsers)
	}
	members := 0
	for _, g := range f.kc.Groups(realm) {
		members += len(g.Members)
	}
	if members != memberships {
		t.Fatalf("%d memberships in Keycloak, want %d", members, memberships)
	}
	if u := users[4242]; u.Username != "user04242" || u.Attributes["n"][0] != "4242" || u.Attributes[AttrSsodirID][0] != "u04242" {
		t.Fatalf("user04242: %+v", u)
	}
}

func TestApplyAdoptsWhatTheEventPathCreatedMeanwhile(t *testing.T) {
	f := newFixture(t, keycloaktest.Config{}, nil)
	dir := baseDirectory()
	p, err := NewPlan(t.Context(), dir, f.c, PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Between plan and apply, the event-driven sync creates alice and the admins group.
	s := NewSyncer(f.c, SyncerOptions{})
	must(t, s.UpsertGroup(t.Context(), dir.groups[0]))
	must(t, s.UpsertUser(t.Context(), *dir.user("alice")))

	res, err := Apply(t.Context(), p, f.c, ApplyOptions{Check: dir})
	if err != nil || res.Failed != 0 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	if n := len(f.kc.Users(realm)); n != len(dir.users) {
		t.Fatalf("%d users, want %d: nothing created twice", n, len(dir.users))
	}
	alice, _ := f.kc.UserByUsername(realm, "alice")
	if len(alice.Groups) != 2 {
		t.Fatalf("the adopted alice did not get her groups: %v", alice.Groups)
	}
	again, err := NewPlan(t.Context(), dir, f.c, PlanOptions{})
	if err != nil || !again.Empty() {
		t.Fatalf("second plan (%v):\n%s", err, again)
	}
}
