package queries

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/httpapi"
)

// anyDB answers every read with something plausible: an active tenant row, a live view for
// every key, and two items for every Query, so that fuzzed requests reach every decoding
// and paging path without a database.
type anyDB struct{}

func (anyDB) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if strings.HasSuffix(*in.TableName, "_Config") {
		item, err := attributevalue.MarshalMap(dynamo.Tenant{
			SystemID: "acme", TenantID: "eu", Status: dynamo.TenantActive, UsersTable: "u", ActivitiesTable: "a",
			KeycloakURL: "https://kc", ClientSecret: "secret", CreatedAt: "2026-01-01T00:00:00.000Z",
		})
		return &dynamodb.GetItemOutput{Item: item}, err
	}
	if strings.HasSuffix(*in.TableName, "_keycloak_sync_status") {
		return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{
			"username_changes": &types.AttributeValueMemberS{Value: "allowed"}}}, nil
	}
	id := in.Key["id"].(*types.AttributeValueMemberS).Value
	return &dynamodb.GetItemOutput{Item: anyItem(id, "config")}, nil
}

func (anyDB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{anyItem("group#g", "member#a"), anyItem("group#h", "member#b")}}, nil
}

func (anyDB) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for table, ka := range in.RequestItems {
		for _, k := range ka.Keys {
			out.Responses[table] = append(out.Responses[table], anyItem(k["id"].(*types.AttributeValueMemberS).Value, "config"))
		}
	}
	return out, nil
}

func (anyDB) Scan(_ context.Context, _ *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return &dynamodb.ScanOutput{Items: []map[string]types.AttributeValue{anyItem("asof#g#g", "m#a")}}, nil
}

func anyItem(id, sk string) map[string]types.AttributeValue {
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
	key := id[strings.IndexByte(id, '#')+1:]
	return map[string]types.AttributeValue{
		"id": s(id), "sk": s(sk), "kind": s("user"), "username": s(key), "name": s(key), "key": s(key),
		"member_id": s(key), "member_of": s(key), "group_key": s(key), "email": s(key + "@example.com"),
		"updated_sort": s("t#" + key), "last_name_sort": s("l\u0001" + key), "first_name_sort": s("f\u0001" + key),
		"name_sort": s(key), "pk": s("entity#user:" + key), "actor_pk": s("actor#x"), "day_pk": s("day#2026-01-01"),
		"event_id": s("e-" + key), "type": s("user.created"), "entity": s("user:" + key), "actor": s("x"),
		"occurred_at": s("2026-01-01T00:00:00.000Z"), "version": n("5"), "membership_rev": n("5"), "changes": s(`{}`),
		"attributes": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"dept": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("eng")}}}},
	}
}

var fuzzRoutes = []string{"", "/users", "/users/{}", "/users/{}/groups", "/groups", "/groups/{}", "/groups/{}/members", "/activity"}

// FuzzHandlers sends arbitrary path parameters, query strings and X-Min-Version values
// through the real handlers and the one error handler: no request may get a 500, and every
// answer is JSON.
func FuzzHandlers(f *testing.F) {
	svc, err := New(anyDB{}, dynamo.Names{Prefix: "fz"}, testKey, Options{MinVersionWait: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	e := httpapi.NewEcho(httpapi.Options{Log: zap.NewNop(), Service: "fuzz"})
	NewHandlers(svc).Register(e)
	for i, seed := range []struct{ param, query, minVersion string }{
		{"", "", ""},
		{"", "email=A@B.C&limit=2", ""},
		{"jdoe", "", "3"},
		{"JDoe", "limit=1", ""},
		{"", "limit=1", ""},
		{"Site Admins", "", "9"},
		{"a/b%2F", "cursor=abc", "x"},
		{"", "entity=user:a&limit=1", ""},
		{"", "day=2026-01-01&cursor=" + strings.Repeat("A", 60), ""},
		{"jdoe", "as_of=2026-01-01T00:00:00Z&limit=2", ""},
		{"Site Admins", "as_of=2026-13-01&cursor=abc", ""},
	} {
		f.Add(uint8(i), seed.param, seed.query, seed.minVersion)
	}
	f.Fuzz(func(t *testing.T, route uint8, param, query, minVersion string) {
		path := "/v1/systems/acme/tenants/eu" + strings.ReplaceAll(fuzzRoutes[int(route)%len(fuzzRoutes)], "{}", url.PathEscape(param))
		if int(route)%len(fuzzRoutes) == 0 && param != "" {
			path = "/v1/systems/acme/tenants/" + url.PathEscape(param)
		}
		u, err := url.Parse(path)
		if err != nil {
			t.Skip()
		}
		u.RawQuery = query
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL = u
		req.RequestURI = u.RequestURI()
		if minVersion != "" {
			req.Header.Set(HeaderMinVersion, minVersion)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("GET %s?%s: %d %s", path, query, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("GET %s?%s: the answer is not JSON: %s", path, query, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "secret") {
			t.Fatalf("GET %s: the answer holds the client secret", path)
		}
	})
}
