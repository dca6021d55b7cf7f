package scim_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/auth"
	"github.com/ssodir/ssodir/internal/auth/authtest"
	"github.com/ssodir/ssodir/internal/commandapi"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/scim"
	"github.com/ssodir/ssodir/internal/scimtoken"
	"github.com/ssodir/ssodir/internal/secrets"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

const adminToken = "scim-test-admin"

// service is the command API with the SCIM port, in-process over DynamoDB Local, with
// one tenant and a SCIM token for it.
type service struct {
	t     *testing.T
	url   string // the command API
	base  string // the tenant's SCIM base URL
	token string // a SCIM token of the tenant
	store *dynamo.CommandStore
	names dynamo.Names
	// db counts the service's DynamoDB calls.
	db *dbCount
	// dynamo is the service's DynamoDB client; other is the URL of a second process.
	dynamo *dynamodb.Client
	other  string
	iss    *authtest.Issuer
	// local is the DynamoDB Local the service's tables are on.
	local *dynamotest.Local
}

func newService(t *testing.T) *service {
	t.Helper()
	return newServiceWith(t, scim.Limits{})
}

// newServiceWith is newService with the SCIM port's limits set.
func newServiceWith(t *testing.T, limits scim.Limits) *service {
	t.Helper()
	return newServiceOn(t, dynamotest.Current(t), limits)
}

// newServiceOn is newServiceWith on the given DynamoDB Local: dynamotest.Private's for a
// test that writes thousands of stream records, which on the package's instance would
// slow every later test's new tables (../shared/DYNAMODB-LOCAL.md, trap 1).
func newServiceOn(t *testing.T, local *dynamotest.Local, limits scim.Limits) *service {
	t.Helper()
	ctx := context.Background()
	count := newDBCount()
	db := dynamodb.NewFromConfig(local.AWSConfig(), func(o *dynamodb.Options) {
		o.DisableValidateResponseChecksum = true
		o.APIOptions = append(o.APIOptions, count.register)
	})
	names := dynamo.Names{Prefix: dynamotest.UniqueName("scim")}
	if err := dynamo.EnsureSharedTables(ctx, db, names, dynamo.TableSettings{}); err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	box, err := secrets.NewLocal(key)
	if err != nil {
		t.Fatal(err)
	}
	fingerprints, _ := commands.NewFingerprinter(key)
	hasher, _ := scimtoken.NewHasher(key)
	iss := authtest.NewIssuer(t)
	t.Cleanup(iss.Close)
	authn, err := auth.New(ctx, auth.Config{BootstrapToken: adminToken, OIDCIssuer: iss.URL, OIDCAudience: authtest.Audience}, http.DefaultClient, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	store := dynamo.NewCommandStore(db, names, events.NewRegistry(), 0)
	tenants := dynamo.NewTenantStore(db, names)
	tokens := auth.NewScimTokenCache(dynamo.NewScimTokenStore(db, names), 0, time.Now)
	gate := commands.NewTenantGate(tenants)
	e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "scim-test"})
	commandapi.Register(e, commandapi.Deps{Auth: authn, Store: store, Tenants: tenants, TenantGate: gate, Secrets: box,
		Clock: time.Now, Fingerprints: fingerprints, ScimTokens: tokens, ScimTokenHasher: hasher})
	scim.Register(e, scim.Deps{Auth: authn, ScimTokens: auth.ScimTokens{Hasher: hasher, Store: tokens, Now: time.Now},
		Store: store, Secrets: box, Gate: gate, Clock: time.Now, Limits: limits})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	// Another process of the same service: its own SCIM port (and memory), the same tables.
	e2 := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "scim-test-2"})
	scim.Register(e2, scim.Deps{Auth: authn, ScimTokens: auth.ScimTokens{Hasher: hasher, Store: dynamo.NewScimTokenStore(db, names), Now: time.Now},
		Store: store, Secrets: box, Gate: gate, Clock: time.Now, Limits: limits})
	srv2 := httptest.NewServer(e2)
	t.Cleanup(srv2.Close)
	s := &service{t: t, url: srv.URL, store: store, names: names, iss: iss, db: count, dynamo: db, other: srv2.URL, local: local}
	tenant := dynamotest.UniqueName("t")
	r := s.do(adminToken, "POST", srv.URL+"/v1/systems/acme/tenants", `{"tenant_id":"`+tenant+`"}`, "Content-Type", "application/json")
	r.want(t, 201)
	t.Cleanup(func() {
		for _, n := range []string{names.Commands("acme", tenant), names.Users("acme", tenant, 0), names.Activities("acme", tenant, 0)} {
			_ = dynamo.DeleteTable(context.Background(), db, n)
		}
	})
	s.base = srv.URL + "/scim/v2/acme/" + tenant
	r = s.do(adminToken, "POST", srv.URL+"/v1/systems/acme/tenants/"+tenant+"/scim-tokens", `{"name":"okta"}`, "Content-Type", "application/json")
	r.want(t, 201)
	s.token = r.obj(t)["token"].(string)
	return s
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

func (r response) want(t *testing.T, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("want %d, got %s", status, r)
	}
	return r
}

func (r response) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return m
}

// wantError checks a SCIM error: its status as a string, and its scimType.
func (r response) wantError(t *testing.T, status int, scimType string) map[string]any {
	t.Helper()
	r.want(t, status)
	if ct := r.header.Get("Content-Type"); ct != scim.MediaType {
		t.Errorf("error Content-Type %q", ct)
	}
	m := r.obj(t)
	if m["status"] != fmt.Sprint(status) || m["scimType"] != nil && m["scimType"] != scimType || scimType != "" && m["scimType"] != scimType ||
		!strings.Contains(fmt.Sprint(m["schemas"]), scim.URNError) {
		t.Errorf("want a SCIM error %d %s, got %s", status, scimType, r.body)
	}
	return m
}

func (s *service) do(token, method, url, body string, headers ...string) response {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/scim+json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// scim sends a request to the tenant's SCIM endpoint with the SCIM token.
func (s *service) scim(method, path, body string, headers ...string) response {
	s.t.Helper()
	return s.do(s.token, method, s.base+path, body, headers...)
}

func jsonBody(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return b.String()
}

func (s *service) createUser(userName, email string) string {
	s.t.Helper()
	r := s.scim("POST", "/Users", jsonBody(map[string]any{"schemas": []string{scim.URNUser}, "userName": userName,
		"emails": []any{map[string]any{"value": email, "type": "work", "primary": true}}, "active": true}))
	return r.want(s.t, 201).obj(s.t)["id"].(string)
}

func TestUserLifecycle(t *testing.T) {
	s := newService(t)
	r := s.scim("POST", "/Users", `{"schemas":["urn:ietf:params:scim:schemas:core:2.0:User"],"userName":"Ann.Smith@Example.com",
		"name":{"givenName":"Ann","familyName":"Smith","formatted":"Ann Smith"},"externalId":"00u1",
		"emails":[{"primary":true,"value":"Ann.Smith@example.com","type":"work"},{"value":"ann@home.example","type":"home"}],
		"phoneNumbers":[{"value":"+1 555 0100","type":"mobile"}],"title":"Engineer","active":true,"password":"correct horse",
		"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User":{"department":"Sales","manager":{"value":"m-1"}}}`).want(t, 201)
	u := r.obj(t)
	id := u["id"].(string)
	if u["userName"] != "ann.smith@example.com" || id == "" || id == "ann.smith@example.com" || u["externalId"] != "00u1" || u["title"] != "Engineer" {
		t.Fatalf("created %s", r.body)
	}
	if loc := r.header.Get("Location"); loc != s.base+"/Users/"+id {
		t.Errorf("Location %q", loc)
	}
	if r.header.Get("ETag") != `W/"1"` || u["meta"].(map[string]any)["version"] != `W/"1"` {
		t.Errorf("ETag %q, meta %v", r.header.Get("ETag"), u["meta"])
	}
	if strings.Contains(string(r.body), "correct horse") || strings.Contains(string(r.body), "password") {
		t.Errorf("the password shows: %s", r.body)
	}
	if ent := u[scim.URNEnterpriseUser].(map[string]any); ent["department"] != "Sales" {
		t.Errorf("enterprise: %v", ent)
	}
	got := s.scim("GET", "/Users/"+id, "").want(t, 200)
	if !bytes.Equal(got.body, r.body) {
		t.Errorf("GET differs from the create's answer:\n%s\n%s", got.body, r.body)
	}
	// The write model holds the mapping of README.md's "SCIM" section.
	agg, err := s.store.LoadUser(t.Context(), tenantOf(s), "ann.smith@example.com")
	if err != nil {
		t.Fatal(err)
	}
	st := agg.State
	want := map[string][]string{"scim.externalId": {"00u1"}, "scim.name.formatted": {"Ann Smith"}, "scim.emails.home": {"ann@home.example"},
		"scim.phoneNumbers.mobile": {"+1 555 0100"}, "scim.title": {"Engineer"}, "scim.enterprise.department": {"Sales"}, "scim.enterprise.manager": {"m-1"}}
	if st.Email != "ann.smith@example.com" || st.FirstName != "Ann" || st.LastName != "Smith" || !st.IsActive || fmt.Sprint(st.Attributes) != fmt.Sprint(want) || agg.PasswordCiphertext == "" {
		t.Errorf("stored %+v", st)
	}

	s.scim("POST", "/Users", `{"userName":"ann.smith@example.com"}`).wantError(t, 409, "uniqueness")
	s.scim("POST", "/Users", `{"userName":"other","emails":[{"value":"ANN.SMITH@example.com"}]}`).wantError(t, 409, "uniqueness")

	s.scim("DELETE", "/Users/"+id, "").want(t, 204)
	s.scim("GET", "/Users/"+id, "").wantError(t, 404, "")
	s.scim("DELETE", "/Users/"+id, "").wantError(t, 404, "")
	again := s.createUser("ann.smith@example.com", "ann.smith@example.com")
	if again == id {
		t.Error("a re-created user got its old id")
	}
}

func tenantOf(s *service) commands.Tenant {
	parts := strings.Split(s.base, "/")
	return commands.Tenant{System: parts[len(parts)-2], ID: parts[len(parts)-1]}
}

func deleteItem(t *testing.T, s *service, table, id, sk string) {
	t.Helper()
	_, err := s.local.DynamoDB().DeleteItem(t.Context(), &dynamodb.DeleteItemInput{TableName: aws.String(table),
		Key:                 map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}},
		ConditionExpression: aws.String("attribute_exists(id)")})
	if err != nil {
		t.Fatalf("delete %s/%s: %v", id, sk, err)
	}
}
