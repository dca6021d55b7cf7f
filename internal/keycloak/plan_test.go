package keycloak

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// kcUser is a managed Keycloak user as a reconcile reads it.
func kcUser(kcID, ssodirID, username string, version int64, enabled bool) User {
	attrs := map[string][]string{AttrSsodirID: {ssodirID}}
	if version > 0 {
		attrs[AttrSsodirVersion] = []string{strconv.FormatInt(version, 10)}
	}
	return User{ID: kcID, Username: username, Email: username + "@example.com", Enabled: enabled, Attributes: attrs}
}

func dirUser(id, username string, version int64, active bool) DirectoryUser {
	return DirectoryUser{ID: id, Username: username, Email: username + "@example.com", Active: active, Version: version}
}

// TestDiffDecidesOnVersions: the planner is a pure function of the two snapshots, and
// never plans to write a state older than the one Keycloak holds.
func TestDiffDecidesOnVersions(t *testing.T) {
	tests := []struct {
		name  string
		realm []User
		dir   []DirectoryUser
		want  []string
		check func(t *testing.T, p *Plan)
	}{
		{
			name:  "a realm newer than the directory read (the read model lags) is left alone, even where they differ",
			realm: []User{kcUser("k1", "u1", "ann", 5, false)},
			dir:   []DirectoryUser{dirUser("u1", "ann", 4, true)},
			want:  nil,
		},
		{
			name:  "a directory read newer than the realm updates it, carrying both versions",
			realm: []User{kcUser("k1", "u1", "ann", 4, true)},
			dir:   []DirectoryUser{dirUser("u1", "ann", 5, false)},
			want:  []string{"~ update user ann: enabled true→false, attributes.ssodir_version [4]→[5]"},
			check: func(t *testing.T, p *Plan) {
				if a := p.Actions[0]; a.Version != 5 || a.Found != 4 {
					t.Fatalf("action versions %d found %d, want 5 and 4", a.Version, a.Found)
				}
			},
		},
		{
			name:  "the same version with a field changed by hand in Keycloak is repaired",
			realm: []User{func() User { u := kcUser("k1", "u1", "ann", 3, true); u.Email = "evil@example.com"; return u }()},
			dir:   []DirectoryUser{dirUser("u1", "ann", 3, true)},
			want:  []string{"~ update user ann: email evil@example.com→ann@example.com"},
		},
		{
			name:  "a user written before versions were kept gets its version",
			realm: []User{kcUser("k1", "u1", "ann", 0, true)},
			dir:   []DirectoryUser{dirUser("u1", "ann", 2, true)},
			want:  []string{"~ update user ann: attributes.ssodir_version (none)→[2]"},
		},
		{
			name:  "a managed user missing from the directory read is deleted, with the version found",
			realm: []User{kcUser("k1", "u1", "ann", 7, true)},
			dir:   nil,
			want:  []string{"- delete user ann"},
			check: func(t *testing.T, p *Plan) {
				if a := p.Actions[0]; a.Found != 7 || a.UserID != "u1" {
					t.Fatalf("delete action %+v", a)
				}
			},
		},
		{
			name: "a user the realm lacks is created at the directory's version",
			dir:  []DirectoryUser{dirUser("u1", "ann", 3, true)},
			want: []string{"+ create user ann"},
			check: func(t *testing.T, p *Plan) {
				if a := p.Actions[0]; a.Version != 3 || a.Found != 0 {
					t.Fatalf("create action %+v", a)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Diff(&RealmSnapshot{Realm: realm, Users: tt.realm, Members: map[string][]string{}},
				&DirectorySnapshot{Users: tt.dir}, PlanOptions{Valve: &SafetyValve{MaxShare: 1}})
			if err != nil {
				t.Fatal(err)
			}
			got := planLines(p)
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("plan %q, want %q", got, tt.want)
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
}

// TestDiffNeverPlansOlderOverNewer is a property test: whatever the write model's
// history, and wherever in it the realm read and the (possibly lagging) directory read
// happened to fall, no planned action writes a version older than the one it found.
func TestDiffNeverPlansOlderOverNewer(t *testing.T) {
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 7))
		realmSnap := &RealmSnapshot{Realm: realm, Members: map[string][]string{}}
		dirSnap := &DirectorySnapshot{}
		found := map[string]int64{}
		for i := range 1 + rng.IntN(12) {
			id, name := fmt.Sprintf("u%d", i), fmt.Sprintf("user%d", i)
			history := 1 + rng.Int64N(6)
			// The realm holds the state of some version of the user, or none; the
			// directory read shows some version, or none (deleted, or not projected yet).
			if v := rng.Int64N(history + 1); v > 0 {
				realmSnap.Users = append(realmSnap.Users, kcUser("k"+id, id, name, v, rng.IntN(2) == 0))
				found[id] = v
			}
			if v := rng.Int64N(history + 1); v > 0 {
				dirSnap.Users = append(dirSnap.Users, dirUser(id, name, v, rng.IntN(2) == 0))
			}
		}
		p, err := Diff(realmSnap, dirSnap, PlanOptions{Valve: &SafetyValve{MaxShare: 1}})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, a := range p.Actions {
			switch a.Kind {
			case ActionCreateUser, ActionUpdateUser:
				if a.Version < found[a.UserID] || a.Version < a.Found {
					t.Fatalf("seed %d: %s writes version %d over version %d", seed, a, a.Version, found[a.UserID])
				}
			}
		}
	}
}

// TestDiffIgnoresMembershipOnlyGroupVersions: membership changes raise a group's version
// but the event path writes only the membership, so a group whose only difference is an
// older ssodir_version is in step; one that also differs is updated, with the version.
func TestDiffIgnoresMembershipOnlyGroupVersions(t *testing.T) {
	kcGroup := func(desc string, version string) Group {
		return Group{ID: "kg", Name: "Staff", Description: desc, Attributes: map[string][]string{AttrSsodirID: {"g1"}, AttrSsodirVersion: {version}}}
	}
	dir := &DirectorySnapshot{Groups: []DirectoryGroup{{ID: "g1", Name: "Staff", Description: "all staff", Version: 5}}}
	for _, tt := range []struct {
		name  string
		group Group
		want  []string
	}{
		{"only the version differs", kcGroup("all staff", "3"), nil},
		{"the description differs too", kcGroup("old", "3"), []string{"~ update group Staff: description old→\"all staff\", attributes.ssodir_version [3]→[5]"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Diff(&RealmSnapshot{Realm: realm, Groups: []Group{tt.group}, Members: map[string][]string{}}, dir, PlanOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := planLines(p); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("plan %q, want %q", got, tt.want)
			}
		})
	}
}
