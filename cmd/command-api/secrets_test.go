package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/secrets"
)

// TestSecretsNeverInClear sends passwords and client secrets through every route that
// takes them, successfully and not, then looks for them in the answers, the logs (at debug
// level) and every item of every table of the app.
func TestSecretsNeverInClear(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	a := startApp(t, env)
	tenant := "secrets"
	base := "/v1/systems/acme/tenants/" + tenant
	secret := func(name string) string { return name + "-" + randomText(t, 12) }
	clientSecret, newClientSecret, otherClientSecret := secret("cs1"), secret("cs2"), secret("cs3")
	password, newPassword, badPassword := secret("pw1"), secret("pw2"), secret("pw3")
	all := []string{clientSecret, newClientSecret, otherClientSecret, password, newPassword, badPassword}
	kc := func(s string) map[string]any {
		return map[string]any{"url": "https://kc.example.com", "realm": "acme", "client_id": "ssodir", "client_secret": s}
	}

	var replies []reply
	do := func(status int, method, path string, body any, hdr ...string) {
		t.Helper()
		replies = append(replies, a.do(t, method, path, body, hdr...).want(t, status))
	}
	do(201, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": tenant, "keycloak": kc(clientSecret)})
	do(200, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": tenant, "keycloak": kc(clientSecret)})
	do(409, "POST", "/v1/systems/acme/tenants", map[string]any{"tenant_id": tenant, "keycloak": kc(otherClientSecret)})
	do(200, "PUT", base+"/keycloak", kc(newClientSecret))
	do(400, "PUT", base+"/keycloak", map[string]any{"url": "nope", "realm": "r", "client_id": "c", "client_secret": otherClientSecret})
	do(201, "POST", base+"/users", map[string]any{"username": "jdoe", "password": password}, "Idempotency-Key", "pw-create")
	do(201, "POST", base+"/users", map[string]any{"username": "jdoe", "password": password}, "Idempotency-Key", "pw-create")
	do(409, "POST", base+"/users", map[string]any{"username": "jdoe", "password": password})
	do(400, "POST", base+"/users", map[string]any{"username": "bad name", "password": badPassword})
	do(400, "POST", base+"/users", map[string]any{"username": "x", "password": badPassword, "pasword": badPassword})
	do(204, "PUT", base+"/users/jdoe/password", map[string]any{"password": newPassword}, "Idempotency-Key", "pw-change")
	do(204, "PUT", base+"/users/jdoe/password", map[string]any{"password": newPassword}, "Idempotency-Key", "pw-change")
	do(422, "PUT", base+"/users/jdoe/password", map[string]any{"password": badPassword}, "Idempotency-Key", "pw-change")
	do(412, "PUT", base+"/users/jdoe/password", map[string]any{"password": badPassword}, "If-Match", `"1"`)
	do(404, "PUT", base+"/users/nobody/password", map[string]any{"password": badPassword})
	do(400, "PUT", base+"/users/jdoe/password", map[string]any{"password": strings.Repeat(badPassword, 10)})

	for _, s := range all {
		for _, r := range replies {
			if strings.Contains(string(r.body), s) || strings.Contains(fmt.Sprint(r.header), s) {
				t.Errorf("an answer carries a secret: %s", r)
			}
		}
	}

	logs := a.logs.String()
	if !strings.Contains(logs, `"request"`) {
		t.Fatalf("no request was logged; the log capture is broken: %q", logs)
	}
	for _, s := range all {
		if strings.Contains(logs, s) {
			t.Errorf("the logs carry a secret")
		}
	}

	// Every page: ListTables names at most 100 tables at a time, and the package's other
	// tests make many.
	var names []string
	for pages := dynamodb.NewListTablesPaginator(a.db, &dynamodb.ListTablesInput{}); pages.HasMorePages(); {
		page, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, page.TableNames...)
	}
	scanned := 0
	for _, table := range names {
		if !strings.HasPrefix(table, a.names.Prefix+"_") {
			continue
		}
		scanned++
		for _, it := range a.items(t, table) {
			for _, s := range all {
				if path, ok := dynamotest.FindPlaintext(it, s); ok {
					t.Errorf("table %s, item %s/%s%s: %s holds a secret in clear", table, attrS(it, "id"), attrS(it, "system_id"), attrS(it, "key"), path)
				}
			}
		}
	}
	if scanned < 5 {
		t.Errorf("scanned %d tables, want the shared and the tenant's", scanned)
	}

	// What is stored is the encryption of the secret, not a placeholder.
	key, err := base64.StdEncoding.DecodeString(env["SSO_SECRET_KEY"])
	if err != nil {
		t.Fatal(err)
	}
	box, err := secrets.NewLocal(key)
	if err != nil {
		t.Fatal(err)
	}
	row, err := a.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(a.names.Config()),
		Key:            map[string]types.AttributeValue{"system_id": &types.AttributeValueMemberS{Value: "acme"}, "tenant_id": &types.AttributeValueMemberS{Value: tenant}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := box.Decrypt(context.Background(), attrS(row.Item, "client_secret"), "client_secret:acme/"+tenant); err != nil || string(pt) != newClientSecret {
		t.Errorf("the stored client secret does not decrypt to the one set last (%v)", err)
	}
	user, err := a.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(a.commandsTable(base)),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "user#jdoe"}, "sk": &types.AttributeValueMemberS{Value: "config"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := box.Decrypt(context.Background(), attrS(user.Item, "password"), "password:acme/"+tenant+"/jdoe"); err != nil || string(pt) != newPassword {
		t.Errorf("the stored password does not decrypt to the one set last (%v)", err)
	}
}
