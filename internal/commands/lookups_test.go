package commands_test

import (
	"slices"
	"testing"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// lookups is what the write model's pointers find now: the key by id of each id in ids,
// and the keys of external id ext.
func (w *world) lookups(kind events.AggregateKind, ext string, ids ...string) (byID map[string]string, byExt []string, all []string) {
	w.t.Helper()
	byID = map[string]string{}
	for _, id := range ids {
		key, ok, err := w.real.FindByID(w.t.Context(), w.tenant, kind, id)
		if err != nil {
			w.t.Fatal(err)
		}
		if ok {
			byID[id] = key
		}
	}
	ps, err := w.real.FindByExternalID(w.t.Context(), w.tenant, kind, ext)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, p := range ps {
		byExt = append(byExt, p.Key)
	}
	err = w.real.ListIDs(w.t.Context(), w.tenant, kind, "", func(p commands.Lookup) bool { all = append(all, p.Key); return true })
	if err != nil {
		w.t.Fatal(err)
	}
	slices.Sort(byExt)
	slices.Sort(all)
	return byID, byExt, all
}

func ext(v string) map[string][]string { return map[string][]string{identity.ExternalIDAttribute: {v}} }

// TestLookupsFollowTheUser: the id and external id pointers are written, moved and removed
// in the transactions of the commands that change what they point to.
func TestLookupsFollowTheUser(t *testing.T) {
	w := newWorld(t)
	ctx := t.Context()
	created, err := w.exec(ctx, step{cmd: commands.CreateUser{Username: "jdoe", Attributes: ext("okta-1")}})
	if err != nil {
		t.Fatal(err)
	}
	first := created.(events.User).ID
	w.given(commands.CreateUser{Username: "rroe", Attributes: ext("okta-1")})

	byID, byExt, all := w.lookups(events.KindUser, "okta-1", first)
	if byID[first] != "jdoe" || !slices.Equal(byExt, []string{"jdoe", "rroe"}) || !slices.Equal(all, []string{"jdoe", "rroe"}) {
		t.Fatalf("after the creates: by id %v, by external id %v, all %v", byID, byExt, all)
	}

	attrs := map[string][]string{identity.ExternalIDAttribute: {"okta-2"}, "dept": {"eng"}}
	w.given(commands.UpdateUser{Username: "jdoe", Attributes: &attrs})
	if _, byExt, _ := w.lookups(events.KindUser, "okta-1"); !slices.Equal(byExt, []string{"rroe"}) {
		t.Errorf("the old external id still finds %v", byExt)
	}
	if _, byExt, _ := w.lookups(events.KindUser, "okta-2"); !slices.Equal(byExt, []string{"jdoe"}) {
		t.Errorf("the new external id finds %v", byExt)
	}

	w.given(commands.DeleteUser{Username: "jdoe"})
	byID, byExt, all = w.lookups(events.KindUser, "okta-2", first)
	if len(byID) != 0 || len(byExt) != 0 || !slices.Equal(all, []string{"rroe"}) {
		t.Fatalf("after the delete: by id %v, by external id %v, all %v", byID, byExt, all)
	}

	again, err := w.exec(ctx, step{cmd: commands.CreateUser{Username: "jdoe"}})
	if err != nil {
		t.Fatal(err)
	}
	second := again.(events.User).ID
	byID, _, all = w.lookups(events.KindUser, "okta-2", first, second)
	if second == first || byID[second] != "jdoe" || byID[first] != "" || !slices.Equal(all, []string{"jdoe", "rroe"}) {
		t.Fatalf("after the re-create (id %s, was %s): by id %v, all %v", second, first, byID, all)
	}
}

// TestLookupsFollowTheGroup: the same for groups.
func TestLookupsFollowTheGroup(t *testing.T) {
	w := newWorld(t)
	created, err := w.exec(t.Context(), step{cmd: commands.CreateGroup{Name: "Admins", Attributes: ext("g-1")}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.(events.Group).ID
	byID, byExt, all := w.lookups(events.KindGroup, "g-1", id)
	if byID[id] != "admins" || !slices.Equal(byExt, []string{"admins"}) || !slices.Equal(all, []string{"admins"}) {
		t.Fatalf("after the create: by id %v, by external id %v, all %v", byID, byExt, all)
	}
	none := map[string][]string{}
	w.given(commands.UpdateGroup{Name: "admins", Attributes: &none})
	if _, byExt, _ := w.lookups(events.KindGroup, "g-1"); len(byExt) != 0 {
		t.Errorf("the removed external id still finds %v", byExt)
	}
	w.given(commands.DeleteGroup{Name: "admins"})
	if byID, _, all := w.lookups(events.KindGroup, "g-1", id); len(byID) != 0 || len(all) != 0 {
		t.Fatalf("after the delete: by id %v, all %v", byID, all)
	}
}

// TestExternalIDHoldsOneValue: the external id is a key, so it holds one value that fits one.
func TestExternalIDHoldsOneValue(t *testing.T) {
	w := newWorld(t)
	before := len(w.items()) // what the tenant's tables start with (the member index's mark)
	long := make([]byte, identity.MaxExternalID+1)
	for i := range long {
		long[i] = 'x'
	}
	for name, attrs := range map[string]map[string][]string{
		"two values": {identity.ExternalIDAttribute: {"a", "b"}},
		"empty":      {identity.ExternalIDAttribute: {""}},
		"too long":   {identity.ExternalIDAttribute: {string(long)}},
	} {
		_, err := w.exec(t.Context(), step{cmd: commands.CreateUser{Username: "jdoe", Attributes: attrs}})
		if apperr.KindOf(err) != apperr.KindInvalid {
			t.Errorf("%s: want invalid, got %v", name, err)
		}
	}
	if n := len(w.items()) - before; n != 0 {
		t.Errorf("a refused create wrote %d items", n)
	}
}
