package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
	"github.com/ssodir/ssodir/internal/streams"
)

// canaryScanner looks for canary strings in every form ssodir could keep them: any case,
// inside nested JSON, base64 (standard and URL alphabets, decoded wherever a value
// decodes), gzip-compressed binary, and as a SHA-256 hex digest.
type canaryScanner struct {
	canaries map[string][]string // lower-cased canary → what it is (two may share a value)
}

func newCanaryScanner(c map[string]string) *canaryScanner {
	s := &canaryScanner{canaries: map[string][]string{}}
	for what, v := range c {
		s.canaries[strings.ToLower(v)] = append(s.canaries[strings.ToLower(v)], what)
	}
	return s
}

// hits lists the canaries found in text (and in what text decodes to).
func (s *canaryScanner) hits(text string, depth int) []string {
	var out []string
	lower := strings.ToLower(text)
	for c, whats := range s.canaries {
		sum := sha256.Sum256([]byte(c))
		forms := []string{c, base64.StdEncoding.EncodeToString([]byte(c)), base64.URLEncoding.EncodeToString([]byte(c)),
			strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(c)), "="), hex.EncodeToString(sum[:])}
		for _, f := range forms {
			if strings.Contains(lower, strings.ToLower(f)) {
				out = append(out, whats...)
				break
			}
		}
	}
	if depth > 0 {
		for _, word := range strings.FieldsFunc(text, func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("+/=-_", r))
		}) {
			if len(word) < 12 {
				continue
			}
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
				if b, err := enc.DecodeString(word); err == nil {
					out = append(out, s.bytesHits(b, depth-1)...)
				}
			}
		}
	}
	return out
}

func (s *canaryScanner) bytesHits(b []byte, depth int) []string {
	if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
		if raw, err := io.ReadAll(zr); err == nil {
			b = raw
		}
	}
	return s.hits(string(b), depth)
}

// item lists the canaries in one DynamoDB item: keys, values, nested maps and lists.
func (s *canaryScanner) item(it map[string]types.AttributeValue) []string {
	var out []string
	var walk func(v types.AttributeValue)
	walk = func(v types.AttributeValue) {
		switch x := v.(type) {
		case *types.AttributeValueMemberB:
			out = append(out, s.bytesHits(x.Value, 2)...)
		case *types.AttributeValueMemberBS:
			for _, b := range x.Value {
				out = append(out, s.bytesHits(b, 2)...)
			}
		case *types.AttributeValueMemberM:
			for k, e := range x.Value {
				out = append(out, s.hits(k, 0)...)
				walk(e)
			}
		case *types.AttributeValueMemberL:
			for _, e := range x.Value {
				walk(e)
			}
		}
	}
	for k, v := range it {
		out = append(out, s.hits(k, 0)...)
		walk(v)
	}
	b, _ := json.Marshal(plainItem(it))
	out = append(out, s.hits(string(b), 2)...)
	return out
}

func plainItem(it map[string]types.AttributeValue) map[string]any {
	m := map[string]any{}
	for k, v := range it {
		m[k] = plain(v)
	}
	return m
}

// tablesOf lists the tables of an installation (its prefix).
func tablesOf(t *testing.T, db *dynamodb.Client, prefix string) []string {
	t.Helper()
	var out []string
	p := dynamodb.NewListTablesPaginator(db, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page.TableNames {
			if strings.HasPrefix(n, prefix+"_") {
				out = append(out, n)
			}
		}
	}
	return out
}

// scanStage scans every item of every table of the installation; it returns the hits as
// "table: what (item)".
func (s *canaryScanner) scanStage(t *testing.T, db *dynamodb.Client, prefix string) []string {
	t.Helper()
	var out []string
	for _, h := range s.scanStageItems(t, db, prefix) {
		b, _ := json.Marshal(plainItem(h.item))
		for _, what := range h.what {
			out = append(out, fmt.Sprintf("%s: %s in %.300s", h.table, what, b))
		}
	}
	return out
}

// copyTable copies a table's items into a new table of the same spec, as a restore of a
// backup into a new table would.
func copyTable(t *testing.T, db *dynamodb.Client, spec dynamo.TableSpec, from string) {
	t.Helper()
	if err := dynamo.EnsureTable(context.Background(), db, spec); err != nil {
		t.Fatal(err)
	}
	for _, it := range scan(t, db, from) {
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: spec.Input.TableName, Item: it}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestErasureLeavesNoCanary is the canary scan of issue 26: a user whose every value is
// a unique canary goes through everything ssodir does (updates, an email change,
// passwords, memberships single and in bulk, activity, Idempotency-Keys, SCIM, a Keycloak
// twin, a dead letter naming them, a replay), is erased, and then no table of the stage,
// no restored copy after the ledger is re-applied, no Keycloak state and no log holds any
// canary in any form; the groups' histories still count their versions.
func TestErasureLeavesNoCanary(t *testing.T) {
	t.Parallel()
	kc := keycloaktest.NewServer(t, keycloaktest.Config{TokenLifetime: 30 * time.Second})
	kc.AddRealm(realm, "ssodir-sync", "sync-secret")
	if err := kc.SetUnmanagedAttributes(realm, true); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	// Every level is logged, and scanned below.
	api := e.start("command-api", "SSO_LOG_LEVEL=debug")
	proj := e.start("projector", "SSO_ERASURE_SETTLE=10s", "SSO_LOG_LEVEL=debug")
	sync := e.start("keycloak-sync", "SSO_STREAM_LEASE=3s", "SSO_RECONCILE_INTERVAL=1h", "SSO_LOG_LEVEL=debug")
	qry := e.start("query-api", "SSO_LOG_LEVEL=debug")
	r := call(t, "POST", "http://"+api.addr+"/v1/systems/kc/tenants", map[string]any{"tenant_id": "t1",
		"keycloak": map[string]any{"url": kc.URL(), "realm": realm, "client_id": "ssodir-sync", "client_secret": "sync-secret", "on_delete": "disable"}})
	mustStatus(t, r, 201)
	base := "http://" + api.addr + "/v1/systems/kc/tenants/t1"
	qbase := "http://" + qry.addr + "/v1/systems/kc/tenants/t1"

	c := map[string]string{
		"username": "cnryuser-x7q2", "email": "cnrymail-k3p9@example.org", "email2": "cnrymail2-v8r1@example.org",
		"first_name": "Cnryfirst-zq4t", "first_name2": "Cnryfirst2-b6yh", "last_name": "Cnrylast-wv5n",
		"attribute": "cnryattr-m4n8", "attribute2": "cnryattr2-p1c0", "external_id": "cnryext-j2h6",
		"password": "cnry-pass-8h2k", "password2": "cnry-pass2-3d7s",
	}
	u := c["username"]
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": u, "email": c["email"], "first_name": c["first_name"],
		"last_name": c["last_name"], "password": c["password"], "attributes": map[string][]string{"dept": {c["attribute"]}}}), 201)
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "bystander", "email": "bystander@example.org", "first_name": "Bea"}), 201)
	for _, g := range []string{"Alpha", "Beta", "Gamma"} {
		mustStatus(t, call(t, "POST", base+"/groups", map[string]any{"name": g}), 201)
	}
	// Updates, one of them idempotent (sent twice with one key), an email change, a new
	// password, and an external id (the SCIM lookup items).
	for range 2 {
		mustStatus(t, call(t, "PATCH", base+"/users/"+u, map[string]any{"first_name": c["first_name2"]}, "Idempotency-Key", "canary-patch-1"), 200)
	}
	mustStatus(t, call(t, "PATCH", base+"/users/"+u, map[string]any{"email": c["email2"]}), 200)
	mustStatus(t, call(t, "PATCH", base+"/users/"+u, map[string]any{"attributes": map[string][]string{
		"dept": {c["attribute2"]}, "scim.externalId": {c["external_id"]}}}), 200)
	mustStatus(t, call(t, "PUT", base+"/users/"+u+"/password", map[string]any{"password": c["password2"]}), 204)

	// The Keycloak twin.
	var kcID string
	eventually(t, 30*time.Second, "the Keycloak twin", func() (bool, string) {
		ku, ok := kc.UserByUsername(realm, u)
		kcID = ku.ID
		return ok, "no twin yet"
	})
	mustStatus(t, call(t, "PUT", base+"/groups/alpha/members/"+u, nil), 204)
	// Memberships in bulk, added and removed.
	mustStatus(t, call(t, "POST", base+"/groups/beta/members", map[string]any{"add": []string{u, "bystander"}}), 200)
	mustStatus(t, call(t, "POST", base+"/groups/gamma/members", map[string]any{"add": []string{u}}), 200)
	mustStatus(t, call(t, "DELETE", base+"/groups/beta/members/"+u, nil), 204)
	mustStatus(t, call(t, "POST", base+"/groups/gamma/members", map[string]any{"remove": []string{u}}), 200)
	// SCIM reads them.
	sr := call(t, "GET", "http://"+api.addr+"/scim/v2/kc/t1/Users?filter="+strings.ReplaceAll(`userName eq "`+u+`"`, " ", "%20"), nil)
	mustStatus(t, sr, 200)

	var user struct {
		Version int64 `json:"version"`
	}
	eventually(t, 30*time.Second, "the views", func() (bool, string) {
		r := call(t, "GET", qbase+"/groups/gamma", nil)
		var g struct {
			Version int64 `json:"version"`
		}
		if r.status == 200 {
			_ = json.Unmarshal(r.body, &g)
		}
		ru := call(t, "GET", qbase+"/users/"+u, nil)
		if ru.status == 200 {
			_ = json.Unmarshal(ru.body, &user)
		}
		return g.Version == 3 && user.Version == 5, fmt.Sprintf("gamma v%d, user v%d", g.Version, user.Version)
	})
	// The user's own feed holds their joins and leaves (alone and in bulk), which the
	// erasure must take with the rest.
	eventually(t, 30*time.Second, "the user's membership items", func() (bool, string) {
		var feed struct {
			Items []struct {
				Type   string `json:"type"`
				Entity string `json:"entity"`
			} `json:"items"`
		}
		call(t, "GET", qbase+"/activity?entity=user:"+u+"&limit=100", nil).json(t, &feed)
		n := 0
		for _, it := range feed.Items {
			if strings.HasPrefix(it.Entity, "group:") {
				n++
			}
		}
		return n == 5, fmt.Sprintf("%d of 5 (3 added, 2 removed)", n)
	})
	// A dead letter naming the user: the projector's, of Alpha's member_added record, as
	// the projector stores one it gave up (the handler's failure itself is not made here:
	// the stream tests prove that path).
	names := dynamo.Names{Prefix: e.prefix}
	dls := deadletters.New(e.db, names.DeadLetters(), "projector")
	parkedMembership := false
	for _, it := range scan(t, e.db, names.Commands("kc", "t1")) {
		if attrString(it, "id") == "group#alpha" && attrString(it, "sk") == dynamo.HistorySK(2) {
			err := dls.Put(context.Background(), deadletters.Letter{System: "kc", Tenant: "t1", Table: names.Commands("kc", "t1"),
				ShardID: "shardId-test", SequenceNumber: "100", Aggregate: "group#alpha", Attempts: 5, At: time.Now(),
				Reason: "project group.member_added group:alpha v2: user " + u + " refused",
				Record: streams.Record{System: "kc", Tenant: "t1", Table: names.Commands("kc", "t1"), EventName: streams.EventInsert,
					SequenceNumber: "100", Keys: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}, NewImage: it, Aggregate: "group#alpha"}})
			if err != nil {
				t.Fatal(err)
			}
		}
		// And the Keycloak sync's, of Alpha's membership item (its key and image name the
		// person, and carry their id), parked under the group's aggregate.
		if attrString(it, "id") == "group#alpha" && attrString(it, "sk") == dynamo.MemberSK(u) {
			err := deadletters.New(e.db, names.DeadLetters(), "keycloak-sync").Put(context.Background(), deadletters.Letter{
				System: "kc", Tenant: "t1", Table: names.Commands("kc", "t1"), ShardID: "shardId-test", SequenceNumber: "101",
				Aggregate: "group#alpha", Attempts: 5, At: time.Now(), Reason: "apply group#alpha member: timeout",
				Record: streams.Record{System: "kc", Tenant: "t1", Table: names.Commands("kc", "t1"), EventName: streams.EventInsert,
					SequenceNumber: "101", Keys: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}, NewImage: it, Aggregate: "group#alpha"}})
			if err != nil {
				t.Fatal(err)
			}
			parkedMembership = true
		}
	}
	if !parkedMembership {
		t.Fatal("no membership item of alpha to park: the dead-letter case proves nothing")
	}
	groupVersions := map[string]int64{}
	for _, g := range []string{"alpha", "beta", "gamma"} {
		var gv struct {
			Version int64 `json:"version"`
		}
		call(t, "GET", qbase+"/groups/"+g, nil).json(t, &gv)
		groupVersions[g] = gv.Version
	}

	// What only the write model shows: the password ciphertexts and the user's id.
	for _, it := range scan(t, e.db, names.Commands("kc", "t1")) {
		if attrString(it, "id") != "user#"+u {
			continue
		}
		if id := attrString(it, "user_id"); id != "" {
			c["user_id"] = id
		}
		if p := attrString(it, "password"); p != "" {
			c["password_ciphertext"] = p
		}
		var data struct {
			PasswordCiphertext string `json:"password_ciphertext"`
		}
		if json.Unmarshal([]byte(attrString(it, "data")), &data) == nil && data.PasswordCiphertext != "" {
			c["password_ciphertext_"+attrString(it, "sk")] = data.PasswordCiphertext
		}
	}
	c["keycloak_id"] = kcID
	scanner := newCanaryScanner(c)

	// The scanner finds the canaries before the erasure (it can fail).
	before := scanner.scanStage(t, e.db, e.prefix)
	for what := range c {
		// Passwords are never stored in clear; the ciphertext in the state item is gone
		// once the sync sent it; the Keycloak id is the realm's.
		if what == "keycloak_id" || what == "password" || what == "password2" || what == "password_ciphertext" {
			continue
		}
		found := false
		for _, h := range before {
			if strings.Contains(h, ": "+what+" in ") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("before the erasure the scan finds no %s: the scan cannot be trusted", what)
		}
	}

	// Every table that can hold the person as it is now, copied as a restore into new
	// tables would; each copy but the sync status's holds them.
	drill := restoreStage(t, e.db, names, "kc", "t1")
	drill.holdsThePerson(t, scanner.scanStageItems(t, e.db, e.prefix))

	// The erasure: 202 with its Location; the same key answers the same again.
	reason := map[string]any{"reason": "GDPR art. 17 request, ticket 4411"}
	r = call(t, "POST", base+"/users/"+u+"/erase", reason, "Idempotency-Key", "erase-1")
	mustStatus(t, r, 202)
	loc := r.header.Get("Location")
	if !strings.HasPrefix(loc, "/v1/systems/kc/tenants/t1/erasures/") {
		t.Fatalf("Location %q", loc)
	}
	r2 := call(t, "POST", base+"/users/"+u+"/erase", reason, "Idempotency-Key", "erase-1")
	mustStatus(t, r2, 202)
	if r2.header.Get("Location") != loc {
		t.Fatalf("replayed erase answered Location %q, first %q", r2.header.Get("Location"), loc)
	}
	var status erasure.Entry // what GET /erasures/{id} shows
	eventually(t, 120*time.Second, "the erasure done", func() (bool, string) {
		r := call(t, "GET", "http://"+qry.addr+loc, nil)
		if r.status != 200 {
			return false, fmt.Sprintf("%d %s", r.status, r.body)
		}
		r.json(t, &status)
		return status.Status == "done", string(r.body)
	})
	if status.CompletedAt == nil || status.RequestedAt == "" || len(status.Places) != 7 {
		t.Fatalf("erasure status %+v", status)
	}
	for p, st := range status.Places {
		if st != "done" {
			t.Errorf("place %s is %s", p, st)
		}
	}
	// Erased: unknown to every read; erasing again is 404.
	mustStatus(t, call(t, "POST", base+"/users/"+u+"/erase", reason), 404)
	mustStatus(t, call(t, "GET", qbase+"/users/"+u, nil), 404)
	for _, path := range []string{"/users?username_prefix=cnry", "/users?email=" + c["email2"], "/users?last_name_prefix=cnry",
		"/users", "/groups/alpha/members", "/groups/beta/members", "/activity?entity=user:" + u, "/activity?actor=bootstrap&limit=500"} {
		r := call(t, "GET", qbase+path, nil)
		mustStatus(t, r, 200)
		if h := scanner.hits(string(r.body), 2); len(h) > 0 {
			t.Errorf("GET %s shows %v: %s", path, h, r.body)
		}
	}
	// The groups keep their versions; their feeds show an erased member without a name.
	for g, v := range groupVersions {
		var gv struct {
			Version int64 `json:"version"`
		}
		call(t, "GET", qbase+"/groups/"+g, nil).json(t, &gv)
		if gv.Version != v {
			t.Errorf("group %s at v%d after the erasure, v%d before", g, gv.Version, v)
		}
	}
	r = call(t, "GET", qbase+"/activity?entity=group:gamma", nil)
	if !strings.Contains(string(r.body), `{"erased":true}`) {
		t.Errorf("gamma's feed shows no erased member: %s", r.body)
	}
	// The user is gone from the realm.
	if _, ok := kc.UserByUsername(realm, u); ok {
		t.Errorf("Keycloak still has the user")
	}

	// A replay after the erasure rebuilds the views without the user and verifies.
	replay := exec.Command(filepath.Join(binDir, "projector"), "replay", "--system", "kc", "--tenant", "t1")
	replay.Env = e.vars()
	out, err := replay.CombinedOutput()
	if err != nil {
		t.Fatalf("replay after the erasure: %v\n%s", err, out)
	}
	if h := scanner.hits(string(out), 2); len(h) > 0 {
		t.Errorf("the replay's output shows %v", h)
	}

	// The dead letter, rewritten, re-drives without naming them again.
	redrive := exec.Command(filepath.Join(binDir, "projector"), "dead-letters", "redrive", "--system", "kc", "--tenant", "t1")
	redrive.Env = append(e.vars(), "SSO_LOG_LEVEL=debug")
	out, err = redrive.CombinedOutput()
	if err != nil {
		t.Fatalf("redrive: %v\n%s", err, out)
	}
	if h := scanner.hits(string(out), 2); len(h) > 0 {
		t.Errorf("the re-drive's output shows %v", h)
	}

	// No table of the stage holds a canary (the restored copies aside, for now).
	for _, h := range scanner.scanStage(t, e.db, e.prefix) {
		if !strings.Contains(h, "_restored:") {
			t.Errorf("after the erasure: %s", h)
		}
	}
	// Keycloak's state holds none.
	state, _ := json.Marshal(map[string]any{"users": kc.Users(realm), "groups": kc.Groups(realm)})
	if h := scanner.hits(string(state), 2); len(h) > 0 {
		t.Errorf("the Keycloak double holds %v", h)
	}
	// The name is free again: a new user takes it, from version 1, with nothing of the
	// erased one; before the restore drill, which must leave them whole.
	r = call(t, "POST", base+"/users", map[string]any{"username": u, "email": c["email"]}, "Idempotency-Key", "later-create")
	mustStatus(t, r, 201)
	var later struct {
		ID string `json:"id"`
	}
	r.json(t, &later)
	var laterTwin string
	eventually(t, 60*time.Second, "the later user's view, Keycloak twin and change feed", func() (bool, string) {
		if r := call(t, "GET", qbase+"/users/"+u, nil); r.status != 200 {
			return false, fmt.Sprintf("view: %d", r.status)
		}
		ku, ok := kc.UserByUsername(realm, u)
		if !ok {
			return false, "no Keycloak twin"
		}
		laterTwin = ku.ID
		return laterFeedItem(t, e.db, names, later.ID)
	})
	drill.keepLater(t, scanner.scanStageItems(t, e.db, e.prefix))

	// The restore drill: the ledger re-applied to every restored copy leaves no canary but
	// the later user's items, and those as they were.
	reapply := exec.Command(filepath.Join(binDir, "ssodirctl"), append([]string{"erasures", "reapply", "--system", "kc", "--tenant", "t1"}, drill.args()...)...)
	reapply.Env = append(e.vars(), "SSO_LOG_LEVEL=debug")
	if out, err := reapply.CombinedOutput(); err != nil || !strings.Contains(string(out), "1 erased users found again") {
		t.Fatalf("erasures reapply: %v\n%s", err, out)
	} else if h := scanner.hits(string(out), 2); len(h) > 0 {
		t.Errorf("the re-application's output shows %v", h)
	}
	drill.checkAfter(t, scanner.scanStageItems(t, e.db, e.prefix))
	if ku, ok := kc.UserByUsername(realm, u); !ok || ku.ID != laterTwin {
		t.Errorf("the later user's Keycloak twin after the re-application: %+v, %v (was %s)", ku, ok, laterTwin)
	}
	r = call(t, "GET", qbase+"/users/"+u, nil, "X-Min-Version", "1")
	mustStatus(t, r, 200)
	var again struct {
		Version   int64  `json:"version"`
		FirstName string `json:"first_name"`
	}
	r.json(t, &again)
	if again.Version != 1 || again.FirstName != "" {
		t.Errorf("the new user under the erased name: %s", r.body)
	}
	r = call(t, "GET", qbase+"/activity?entity=user:"+u, nil)
	var feed struct {
		Items []any `json:"items"`
	}
	r.json(t, &feed)
	if len(feed.Items) > 1 {
		t.Errorf("the new user's feed has the erased user's items: %s", r.body)
	}

	// The services' logs, at every level (debug included) and through the erasure's own
	// run (its park between the passes), never held any: log lines name users by id or
	// by a keyed hash only (identity.LogKey).
	for _, s := range []*service{api, proj, sync, qry} {
		logged := s.output()
		if !strings.Contains(logged, `"level":"info"`) {
			t.Errorf("%s logged nothing at info: the log scan cannot be trusted", s.name)
		}
		for line := range strings.Lines(logged) {
			if h := scanner.hits(line, 2); len(h) > 0 {
				t.Errorf("%s's log holds %v: %.400s", s.name, h, line)
			}
		}
	}
	if !strings.Contains(proj.output(), "erasure: first pass done") {
		t.Errorf("the projector's log has no line of the erasure's run: the scan missed it")
	}
}

func attrString(it map[string]types.AttributeValue, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
