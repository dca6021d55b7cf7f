package scim

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/events"
)

// TestUserMappingRoundTrips: a user rendered as a SCIM resource and read back sets the same
// fields and `scim.` attributes, so a PATCH that touches nothing changes nothing.
func TestUserMappingRoundTrips(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	u := events.User{ID: "id-1", Username: "jane@contoso.com", Email: "jane@contoso.com", FirstName: "Jane", LastName: "Doe",
		IsActive: true, Version: 3, CreatedAt: at, UpdatedAt: at, Attributes: map[string][]string{
			"scim.externalId": {"e-1"}, "scim.displayName": {"Jane Doe"}, "scim.name.middleName": {"Q"},
			"scim.emails.home": {"jd@home.example"}, "scim.phoneNumbers.mobile": {"+1 555"}, "scim.phoneNumbers.work": {"+1 556", "+1 557"},
			"scim.addresses.work.locality": {"Redmond"}, "scim.addresses.work.postalCode": {"98052"}, "scim.roles": {"admin"},
			"scim.enterprise.department": {"Sales"}, "scim.enterprise.manager": {"m-1"}, "dept": {"not SCIM's"},
		}}
	d := lowerKeys(roundJSON(t, renderUser(u, "https://x/scim/v2/s/t"))).(map[string]any)
	f, err := userFromDoc(d)
	if err != nil {
		t.Fatal(err)
	}
	if f.username != u.Username || f.email != u.Email || f.firstName != u.FirstName || f.lastName != u.LastName ||
		f.active == nil || !*f.active || f.password != nil {
		t.Errorf("fields %+v", f)
	}
	if want := ownAttrs(u.Attributes); !reflect.DeepEqual(f.attrs, want) {
		t.Errorf("attributes\n got %v\nwant %v", f.attrs, want)
	}
	if err := applyPatch(d, []patchOp{{op: "replace", path: "title", value: "Boss"}}, userSchema); err != nil {
		t.Fatal(err)
	}
	if f, _ := userFromDoc(d); f.attrs["scim.title"][0] != "Boss" || len(f.attrs) != len(ownAttrs(u.Attributes))+1 {
		t.Errorf("after a replace of title: %v", f.attrs)
	}
}

func roundJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// FuzzPatch: no PATCH body, however malformed, panics; each is applied or refused with a
// SCIM error.
func FuzzPatch(f *testing.F) {
	for _, s := range []string{
		`{"Operations":[{"op":"Replace","path":"emails[type eq \"work\"].value","value":"x@y.z"}]}`,
		`{"Operations":[{"op":"replace","value":{"active":false,"name.givenName":"A","urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department":"D"}}]}`,
		`{"Operations":[{"op":"remove","path":"members[value eq \"1\"]"},{"op":"Add","path":"members","value":[{"value":"2"}]}]}`,
		`{"Operations":[{"op":"add","path":"phoneNumbers[type eq \"mobile\"].value","value":"1"}]}`,
	} {
		f.Add(s)
	}
	at := time.Now()
	base := renderUser(events.User{ID: "1", Username: "u", Email: "u@x.y", IsActive: true, CreatedAt: at, UpdatedAt: at,
		Attributes: map[string][]string{"scim.phoneNumbers.work": {"1"}}}, "https://x")
	f.Fuzz(func(t *testing.T, body string) {
		ops, err := parsePatch([]byte(body))
		if err != nil {
			return
		}
		d := lowerKeys(roundJSON(t, base)).(map[string]any)
		if err := applyPatch(d, ops, userSchema); err != nil {
			return
		}
		_, _ = userFromDoc(d)
		g := lowerKeys(roundJSON(t, renderGroup(events.Group{ID: "g", Name: "G", CreatedAt: at, UpdatedAt: at}, []member{{id: "1", username: "u"}}, true, "https://x"))).(map[string]any)
		if err := applyPatch(g, ops, groupSchema); err == nil {
			_, _ = groupFromDoc(g)
		}
	})
}

// TestManagerShapes: Entra sends the manager as an object, a plain id, or a list of one.
func TestManagerShapes(t *testing.T) {
	for _, v := range []any{map[string]any{"value": "m-1"}, "m-1", []any{map[string]any{"$ref": nil, "value": "m-1"}}} {
		f, err := userFromDoc(map[string]any{"username": "u", enterpriseKey: map[string]any{"manager": v}})
		if err != nil || f.attrs[keyManager][0] != "m-1" {
			t.Errorf("%v: %v %v", v, f.attrs, err)
		}
	}
}
