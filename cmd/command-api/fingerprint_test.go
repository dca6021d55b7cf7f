package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
)

// idempotencyItem is the stored record of the bootstrap caller's key in the tenant at base.
func (a *app) idempotencyItem(t *testing.T, base, key string) map[string]types.AttributeValue {
	t.Helper()
	system, tenant := tenantOf(base)
	out, err := a.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(a.names.Idempotency()),
		Key:            map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: system + "/" + tenant + "/bootstrap/" + key}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil || out.Item == nil {
		t.Fatalf("idempotency record %s: %v (item %v)", key, err, out)
	}
	return out.Item
}

func TestIdempotencyFingerprintIsKeyed(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	a := startApp(t, env)
	base := a.newTenant(t)
	body := `{"username":"pwuser","password":"correct horse battery"}`
	path := base + "/users"
	unkeyed := sha256.Sum256([]byte("POST\n" + path + "\n" + body))

	t.Run("the stored fingerprint of a body holding a password is an HMAC under a key the database does not hold", func(t *testing.T) {
		a.do(t, "POST", path, body, "Idempotency-Key", "pw-key").want(t, http.StatusCreated)
		stored := attrS(a.idempotencyItem(t, base, "pw-key"), "request_hash")
		if strings.Contains(stored, hex.EncodeToString(unkeyed[:])) {
			t.Fatalf("request_hash %q is the unkeyed SHA-256 of the body: a password guess can be checked against it offline", stored)
		}
		secret, _ := base64.StdEncoding.DecodeString(env["SSO_SECRET_KEY"])
		key, err := commands.DeriveFingerprintKey(secret)
		if err != nil {
			t.Fatal(err)
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte("POST\n" + path + "\n" + body))
		if want := "hmac-sha256:" + hex.EncodeToString(m.Sum(nil)); stored != want {
			t.Errorf("request_hash %q, want the HMAC under the key derived from SSO_SECRET_KEY %q", stored, want)
		}
	})

	t.Run("SSO_IDEMPOTENCY_KEY keys the fingerprint when set", func(t *testing.T) {
		env2 := testEnv(t)
		env2["SSO_IDEMPOTENCY_KEY"] = base64.StdEncoding.EncodeToString([]byte("an idempotency key of 32 bytes!!"))
		b := startApp(t, env2)
		base2 := b.newTenant(t)
		b.do(t, "POST", base2+"/users", body, "Idempotency-Key", "k").want(t, http.StatusCreated)
		m := hmac.New(sha256.New, []byte("an idempotency key of 32 bytes!!"))
		m.Write([]byte("POST\n" + base2 + "/users\n" + body))
		if got, want := attrS(b.idempotencyItem(t, base2, "k"), "request_hash"), "hmac-sha256:"+hex.EncodeToString(m.Sum(nil)); got != want {
			t.Errorf("request_hash %q, want %q", got, want)
		}
	})

	t.Run("a record written with the unkeyed hash before still answers its request, and only it", func(t *testing.T) {
		first := a.do(t, "POST", base+"/groups", `{"name":"Legacy"}`, "Idempotency-Key", "legacy-key").want(t, http.StatusCreated)
		legacy := sha256.Sum256([]byte("POST\n" + base + "/groups\n" + `{"name":"Legacy"}`))
		system, tenant := tenantOf(base)
		_, err := a.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName:                 aws.String(a.names.Idempotency()),
			Key:                       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: system + "/" + tenant + "/bootstrap/legacy-key"}},
			UpdateExpression:          aws.String("SET request_hash = :h"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":h": &types.AttributeValueMemberS{Value: hex.EncodeToString(legacy[:])}},
		})
		if err != nil {
			t.Fatal(err)
		}
		sameAnswer(t, first, a.do(t, "POST", base+"/groups", `{"name":"Legacy"}`, "Idempotency-Key", "legacy-key"))
		a.do(t, "POST", base+"/groups", `{"name":"Other"}`, "Idempotency-Key", "legacy-key").
			wantProblem(t, http.StatusUnprocessableEntity, "idempotency_key_reused")
	})
}
