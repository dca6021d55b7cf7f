package keycloaktest

import "testing"

// TestGroupRenameIsAPutOfTheGroup: Keycloak renames a group in place by a PUT of its
// representation with the new name (GroupResource.updateGroup): the same id; a name held
// by another top-level group is 409; a change of case is no clash; a body without a name,
// or naming another id, is 400.
func TestGroupRenameIsAPutOfTheGroup(t *testing.T) {
	r := newRaw(t, Config{})
	ops, err := r.s.CreateGroup(testRealm, Group{Name: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.CreateGroup(testRealm, Group{Name: "admins"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, body string
		want       int
		after      string // the group's name afterwards
	}{
		{"another group's name is a conflict", `{"name":"admins"}`, 409, "ops"},
		{"no name is refused", `{"description":"d"}`, 400, "ops"},
		{"a blank name is refused", `{"name":"  "}`, 400, "ops"},
		{"another id is refused", `{"id":"not-this-one","name":"dev"}`, 400, "ops"},
		{"a new name renames the group in place", `{"id":"` + ops + `","name":"dev"}`, 204, "dev"},
		{"a change of case is no clash", `{"name":"DEV"}`, 204, "DEV"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, body := r.do("PUT", "/groups/"+ops, c.body)
			if status != c.want {
				t.Fatalf("status %d, want %d (%s)", status, c.want, body)
			}
			g, ok := r.s.GroupByName(testRealm, c.after)
			if !ok || g.ID != ops {
				t.Fatalf("group %q = %+v (found %v), want the group %s", c.after, g, ok, ops)
			}
		})
	}
	if n := len(r.s.Groups(testRealm)); n != 2 {
		t.Errorf("%d groups, want 2: a rename never makes one", n)
	}
}
