package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
	"github.com/ssodir/ssodir/test/apitest"
)

// The SCIM tests replay recorded request sequences of identity providers
// (testdata/scim/*.json: each step is a request as that provider sends it, and what the
// answer must hold) against the real services with a Keycloak double, then check what
// the sequence left in the query API, the activity feed and the realm.

// scimFlow is one recorded sequence.
type scimFlow struct {
	Provider string            `json:"provider"`
	About    string            `json:"about"`
	Headers  map[string]string `json:"headers"`
	Steps    []struct {
		Name          string            `json:"name"`
		Request       string            `json:"request"`
		Headers       map[string]string `json:"headers"`
		NoContentType bool              `json:"noContentType"`
		Body          json.RawMessage   `json:"body"`
		Status        int               `json:"status"`
		Expect        json.RawMessage   `json:"expect"`
		Absent        []string          `json:"absent"`
		Save          map[string]string `json:"save"`
	} `json:"steps"`
}

// scimSetup starts the four services and a Keycloak double, provisions a tenant, and makes
// a SCIM token for it through the admin API.
func scimSetup(t *testing.T) (e *env, kc *keycloaktest.Server, scimBase, queryBase, tokenID, scimToken string) {
	t.Helper()
	e, kc, base := keycloakSetup(t)
	query := e.start("query-api")
	r := call(t, "POST", base+"/scim-tokens", map[string]any{"name": "provider connection"})
	mustStatus(t, r, 201)
	var tok struct{ ID, Token string }
	r.json(t, &tok)
	apiBase := strings.TrimSuffix(base, "/v1/systems/kc/tenants/t1")
	return e, kc, apiBase + "/scim/v2/kc/t1", "http://" + query.addr + "/v1/systems/kc/tenants/t1", tok.ID, tok.Token
}

// replay sends a flow's requests in order and checks each answer; it returns the values
// the steps saved (ids, by name).
func replay(t *testing.T, file, base, bearer string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "scim", file))
	if err != nil {
		t.Fatal(err)
	}
	var flow scimFlow
	if err := json.Unmarshal(raw, &flow); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	vars := map[string]string{}
	subst := func(s string) string {
		for k, v := range vars {
			s = strings.ReplaceAll(s, "{{"+k+"}}", v)
		}
		return s
	}
	for i, st := range flow.Steps {
		method, path, _ := strings.Cut(st.Request, " ")
		var body io.Reader
		if len(st.Body) > 0 {
			body = strings.NewReader(subst(string(st.Body)))
		}
		req, err := http.NewRequest(method, base+subst(path), body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+bearer)
		for k, v := range flow.Headers {
			req.Header.Set(k, v)
		}
		for k, v := range st.Headers {
			req.Header.Set(k, v)
		}
		if st.NoContentType || body == nil {
			req.Header.Del("Content-Type")
		}
		resp, err := apitest.Client.Do(req)
		if err != nil {
			t.Fatalf("%s step %d (%s): %v", flow.Provider, i+1, st.Name, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		where := fmt.Sprintf("%s step %d (%s): %s %s", flow.Provider, i+1, st.Name, method, subst(path))
		if resp.StatusCode != st.Status {
			t.Fatalf("%s: status %d, want %d: %s", where, resp.StatusCode, st.Status, got)
		}
		if len(got) > 0 && resp.Header.Get("Content-Type") != "application/scim+json" {
			t.Errorf("%s: Content-Type %q", where, resp.Header.Get("Content-Type"))
		}
		var answer map[string]any
		if len(got) > 0 {
			if err := json.Unmarshal(got, &answer); err != nil {
				t.Fatalf("%s: not JSON: %s", where, got)
			}
		}
		if len(st.Expect) > 0 {
			var want any
			if err := json.Unmarshal([]byte(subst(string(st.Expect))), &want); err != nil {
				t.Fatalf("%s: expect: %v", where, err)
			}
			if msg := contain(answer, want, ""); msg != "" {
				t.Fatalf("%s: %s\nanswer: %s", where, msg, got)
			}
		}
		for _, a := range st.Absent {
			if _, ok := answer[a]; ok {
				t.Fatalf("%s: the answer holds %s: %s", where, a, got)
			}
		}
		for name, field := range st.Save {
			v, ok := answer[field].(string)
			if !ok {
				t.Fatalf("%s: no %s to save: %s", where, field, got)
			}
			vars[name] = v
		}
	}
	return vars
}

// contain reports how got fails to hold want ("" when it does): objects hold at least
// want's keys, arrays hold as many elements, each holding want's, scalars are equal.
func contain(got, want any, at string) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: want an object, got %v", at, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s.%s: missing", at, k)
			}
			if msg := contain(gv, wv, at+"."+k); msg != "" {
				return msg
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("%s: want %d elements, got %v", at, len(w), got)
		}
		for i := range w {
			if msg := contain(g[i], w[i], fmt.Sprintf("%s[%d]", at, i)); msg != "" {
				return msg
			}
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s: %v, want %v", at, got, want)
		}
	}
	return ""
}

// viewUser reads a user from the query API, waiting until the view reached version v.
func viewUser(t *testing.T, queryBase, username string, v int64) map[string]any {
	t.Helper()
	r := call(t, "GET", queryBase+"/users/"+url.PathEscape(username), nil, "X-Min-Version", fmt.Sprint(v))
	mustStatus(t, r, 200)
	var u map[string]any
	r.json(t, &u)
	return u
}

// activityTypes are the event types of an entity's activity, oldest first, and the actors.
func activityTypes(t *testing.T, queryBase, entity string) (types, actors []string) {
	t.Helper()
	r := call(t, "GET", queryBase+"/activity?entity="+url.QueryEscape(entity)+"&limit=100", nil)
	mustStatus(t, r, 200)
	var list struct {
		Items []struct{ Type, Actor, Entity string }
	}
	r.json(t, &list)
	for i := len(list.Items) - 1; i >= 0; i-- {
		it := list.Items[i]
		if strings.HasPrefix(entity, "user:") && strings.HasPrefix(it.Entity, "group:") {
			// A group's membership change of the user's, in the user's feed too.
			types = append(types, it.Type+" "+it.Entity)
			continue
		}
		types = append(types, it.Type)
		if !slices.Contains(actors, list.Items[i].Actor) {
			actors = append(actors, list.Items[i].Actor)
		}
	}
	return types, actors
}

// wantActivity waits until an entity's activity (which the projector writes after the
// views) is the types given, oldest first, all by the SCIM token; in a user's feed, a
// group's membership change of theirs is its type and the group (activityTypes).
func wantActivity(t *testing.T, queryBase, entity, tokenID string, want ...string) {
	t.Helper()
	eventually(t, 30*time.Second, entity+"'s activity", func() (bool, string) {
		types, actors := activityTypes(t, queryBase, entity)
		return slices.Equal(types, want) && slices.Equal(actors, []string{"scim-token:" + tokenID}),
			fmt.Sprintf("%v by %v, want %v by the SCIM token", types, actors, want)
	})
}

func groupMembers(t *testing.T, queryBase, group string) []string {
	t.Helper()
	r := call(t, "GET", queryBase+"/groups/"+url.PathEscape(group)+"/members", nil)
	if r.status != 200 {
		return []string{fmt.Sprintf("status %d", r.status)}
	}
	var list struct{ Items []struct{ Username string } }
	r.json(t, &list)
	var out []string
	for _, it := range list.Items {
		out = append(out, it.Username)
	}
	return out
}

// TestOktaProvisioningFlow replays Okta's flows (testdata/scim/okta.json) with a SCIM
// token, and checks the directory, its activity feed and the Keycloak realm afterwards.
func TestOktaProvisioningFlow(t *testing.T) {
	t.Parallel()
	_, kc, scimBase, queryBase, tokenID, scimToken := scimSetup(t)
	ids := replay(t, "okta.json", scimBase, scimToken)

	ann := viewUser(t, queryBase, "ann.smith@example.com", 5)
	if ann["id"] != ids["ann"] || ann["email"] != "ann.smith-jones@example.com" || ann["last_name"] != "Smith-Jones" || ann["is_active"] != true ||
		fmt.Sprint(ann["attributes"]) != "map[scim.displayName:[Ann Smith-Jones] scim.externalId:[00u1ann0000okta] scim.locale:[en-US]]" {
		t.Errorf("ann in the query API: %v", ann)
	}
	if bob := viewUser(t, queryBase, "bob.jones@example.com", 2); bob["is_active"] != false {
		t.Errorf("bob in the query API: %v", bob)
	}
	// Okta pushed Engineering's new name: the same group, its members and its whole
	// history under "Engineering Team", and the old name free.
	eventually(t, 30*time.Second, "the groups' views", func() (bool, string) {
		eng := groupMembers(t, queryBase, "Engineering Team")
		old := call(t, "GET", queryBase+"/groups/Engineering", nil)
		gone := call(t, "GET", queryBase+"/groups/Contractors", nil)
		return slices.Equal(eng, []string{"ann.smith@example.com"}) && old.status == 404 && gone.status == 404,
			fmt.Sprintf("Engineering Team %v, Engineering %d, Contractors %d", eng, old.status, gone.status)
	})
	wantActivity(t, queryBase, "user:ann.smith@example.com", tokenID,
		"user.created", "user.updated", "user.deactivated", "user.activated", "user.password_changed",
		"group.member_added group:engineering")
	// The membership PATCHes are one members change each: one item per member.
	wantActivity(t, queryBase, "group:engineering team", tokenID,
		"group.created", "group.member_added", "group.member_added", "group.member_removed", "group.renamed")
	eventually(t, 60*time.Second, "the realm to reflect Okta's provisioning", func() (bool, string) {
		a, ag, ok := realmUser(kc, "ann.smith@example.com")
		if !ok || !a.Enabled || a.Email != "ann.smith-jones@example.com" || a.LastName != "Smith-Jones" || !slices.Equal(ag, []string{"Engineering Team"}) {
			return false, fmt.Sprintf("ann: %+v in %v", a, ag)
		}
		if _, ok := kc.GroupByName(realm, "Engineering"); ok {
			return false, "the group's old name is still in the realm"
		}
		if n := len(kc.Groups(realm)); n != 1 {
			return false, fmt.Sprintf("%d groups in the realm, want Engineering Team alone (renamed in place, never created again)", n)
		}
		if p, ok := kc.LastPassword(realm, a.ID); !ok || p.Value != "t1meMachine-2" {
			return false, fmt.Sprintf("ann's password: %+v", p)
		}
		b, bg, ok := realmUser(kc, "bob.jones@example.com")
		if !ok || b.Enabled || len(bg) != 0 {
			return false, fmt.Sprintf("bob: %+v in %v", b, bg)
		}
		if _, ok := kc.GroupByName(realm, "Contractors"); ok {
			return false, "the deleted group is still in the realm"
		}
		return true, ""
	})
}

// TestEntraProvisioningFlow replays Microsoft Entra ID's flows (testdata/scim/entra.json)
// with a SCIM token, and checks the directory, its activity feed and the realm.
func TestEntraProvisioningFlow(t *testing.T) {
	t.Parallel()
	_, kc, scimBase, queryBase, tokenID, scimToken := scimSetup(t)
	// Entra changes a UPN when a person changes their name: the realm lets the sync rename
	// the Keycloak user in place.
	if err := kc.AllowEditUsername(realm, true); err != nil {
		t.Fatal(err)
	}
	ids := replay(t, "entra.json", scimBase, scimToken)

	const user = "renamed@contoso.com"
	// Versions: the create, the update, the deactivation; the restore's update and
	// activation (two commands: a profile change, then SetUserActive); the phone number;
	// the rename.
	u := viewUser(t, queryBase, user, 7)
	attrs := fmt.Sprint(u["attributes"])
	if u["id"] != ids["u1"] || u["email"] != "updatedemail_ab6490ee@contoso.com" || u["first_name"] != "Ann" || u["last_name"] != "updatedFamilyName" ||
		u["is_active"] != true || !strings.Contains(attrs, "scim.enterprise.department:[Engineering]") ||
		!strings.Contains(attrs, "scim.phoneNumbers.mobile:[+1 425 555 0100]") || !strings.Contains(attrs, "scim.enterprise.manager:["+ids["u2"]+"]") {
		t.Errorf("the user in the query API: %v", u)
	}
	eventually(t, 30*time.Second, "the views", func() (bool, string) {
		// Entra's displayName change renamed the group: its members followed, the old
		// name finds nothing.
		members := groupMembers(t, queryBase, "Sales Team EMEA")
		old := call(t, "GET", queryBase+"/groups/Sales%20Team", nil)
		gone := call(t, "GET", queryBase+"/users/manager_9c3d@contoso.com", nil)
		temp := call(t, "GET", queryBase+"/groups/Temp", nil)
		return slices.Equal(members, []string{user}) && old.status == 404 && gone.status == 404 && temp.status == 404,
			fmt.Sprintf("Sales Team EMEA %v, Sales Team %d, manager %d, Temp %d", members, old.status, gone.status, temp.status)
	})
	wantActivity(t, queryBase, "user:"+user, tokenID,
		"user.created", "user.updated", "user.deactivated", "user.updated", "user.activated", "user.updated", "user.renamed",
		"group.member_added group:sales team")
	eventually(t, 60*time.Second, "the realm to reflect Entra's provisioning", func() (bool, string) {
		a, ag, ok := realmUser(kc, user)
		if !ok || !a.Enabled || a.FirstName != "Ann" || !slices.Equal(ag, []string{"Sales Team EMEA"}) ||
			!slices.Equal(a.Attributes["scim.enterprise.department"], []string{"Engineering"}) {
			return false, fmt.Sprintf("user: %+v in %v", a, ag)
		}
		if _, _, ok := realmUser(kc, "manager_9c3d@contoso.com"); ok {
			return false, "the deleted user is still in the realm"
		}
		if _, ok := kc.GroupByName(realm, "Temp"); ok {
			return false, "the deleted group is still in the realm"
		}
		return true, ""
	})
}
