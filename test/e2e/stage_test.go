package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// The ARNs a stage's stack gives its functions, as deploy/ names them for the stage
// "prod" (deploy/leastprivilege_test.go maps them to the stack's resources: keep both in
// step). The region and account are the test's; the recorder replaces them.
const (
	stageSecretsKey     = "arn:aws:kms:us-east-1:000000000000:key/secrets-key"
	stageDataKey        = "arn:aws:kms:us-east-1:000000000000:key/data-key"
	stageCursorKey      = "arn:aws:secretsmanager:us-east-1:000000000000:secret:ssodir/prod/cursor-key-AbCdEf"
	stageIdempotencyKey = "arn:aws:secretsmanager:us-east-1:000000000000:secret:ssodir/prod/idempotency-key-AbCdEf"
	stageScimTokenKey   = "arn:aws:secretsmanager:us-east-1:000000000000:secret:ssodir/prod/scim-token-key-AbCdEf"
)

// TestAStageConfiguredAsTheStackConfiguresIt runs the four services with the settings
// deploy/ gives the functions: passwords and client secrets under a KMS key, the query
// API's cursor key and the command API's idempotency key read from Secrets Manager, the
// system tables made beforehand (by the stack) and only checked, tenant tables with the
// stage's key, protection and tags. The whole path works: provisioning, commands with an
// Idempotency-Key, paged reads, a password reaching Keycloak.
func TestAStageConfiguredAsTheStackConfiguresIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := newAWSFake(t, stageSecretsKey, map[string]string{
		stageCursorKey:      "Q3Vyc29yS2V5T2ZUaGVTdGFnZUZvclRlc3RpbmdPbmx5",
		stageIdempotencyKey: "SWRlbXBvdGVuY3lLZXlPZlRoZVN0YWdlRm9yVGVzdHM0",
		stageScimTokenKey:   "U2NpbVRva2VuS2V5T2ZUaGVTdGFnZUZvclRlc3RzT24x",
	})
	kc := keycloaktest.NewServer(t, keycloaktest.Config{TokenLifetime: 30 * time.Second})
	kc.AddRealm(realm, "ssodir-sync", "sync-secret")
	if err := kc.SetUnmanagedAttributes(realm, true); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.stageKeys = true

	// newEnv made the system tables, as the stack does.
	names := dynamo.Names{Prefix: e.prefix}

	common := []string{"SSO_STAGE=prod", "SSO_SYSTEM_TABLES=existing", "SSO_TABLE_PITR=false", "SSO_TABLE_DELETION_PROTECTION=true",
		"SSO_TABLE_KMS_KEY=" + stageDataKey, "AWS_ENDPOINT_URL_KMS=" + fake.srv.URL, "AWS_ENDPOINT_URL_SECRETS_MANAGER=" + fake.srv.URL}
	commandVars := append(common, "SSO_KMS_KEY_ID="+stageSecretsKey, "SSO_IDEMPOTENCY_KEY_SECRET_ARN="+stageIdempotencyKey,
		"SSO_SCIM_TOKEN_KEY_SECRET_ARN="+stageScimTokenKey)
	api := e.start("command-api", commandVars...)
	query := e.start("query-api", append(common, "SSO_CURSOR_KEY_SECRET_ARN="+stageCursorKey)...)
	e.start("projector", common...)
	e.start("keycloak-sync", append(common, "SSO_KMS_KEY_ID="+stageSecretsKey, "SSO_RECONCILE_INTERVAL=1h")...)

	r := call(t, "POST", "http://"+api.addr+"/v1/systems/kc/tenants", map[string]any{"tenant_id": "t1",
		"keycloak": map[string]any{"url": kc.URL(), "realm": realm, "client_id": "ssodir-sync", "client_secret": "sync-secret"}})
	mustStatus(t, r, 201)
	// The same settings again, to a new instance (a cold start): the stored client secret
	// is opened with KMS to compare.
	api.stop(t)
	api = e.start("command-api", commandVars...)
	r = call(t, "POST", "http://"+api.addr+"/v1/systems/kc/tenants", map[string]any{"tenant_id": "t1",
		"keycloak": map[string]any{"url": kc.URL(), "realm": realm, "client_id": "ssodir-sync", "client_secret": "sync-secret"}})
	mustStatus(t, r, 200)
	base := "http://" + api.addr + "/v1/systems/kc/tenants/t1"
	reads := "http://" + query.addr + "/v1/systems/kc/tenants/t1"

	create := map[string]any{"username": "jdoe", "email": "jdoe@example.com", "last_name": "Doe", "password": "first-secret"}
	first := call(t, "POST", base+"/users", create, "Idempotency-Key", "hr-1")
	mustStatus(t, first, 201)
	again := call(t, "POST", base+"/users", create, "Idempotency-Key", "hr-1")
	if again.status != 201 || string(again.body) != string(first.body) {
		t.Fatalf("the repeated request got %d %s, want the first answer again", again.status, again.body)
	}
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "rroe", "email": "rroe@example.com", "last_name": "Roe"}), 201)
	mustStatus(t, call(t, "POST", base+"/groups", map[string]any{"name": "admins"}), 201)
	mustStatus(t, call(t, "PUT", base+"/groups/admins/members/jdoe", nil), 204)

	got := call(t, "GET", reads+"/groups/admins", nil, "X-Min-Version", "2")
	mustStatus(t, got, 200)
	var p struct {
		Items      []map[string]any `json:"items"`
		NextCursor *string          `json:"next_cursor"`
	}
	eventually(t, 20*time.Second, "both users listed", func() (bool, string) {
		r := call(t, "GET", reads+"/users?limit=1&order=updated_asc", nil)
		r.json(t, &p)
		return r.status == 200 && p.NextCursor != nil, fmt.Sprintf("%d %s", r.status, r.body)
	})
	next := call(t, "GET", reads+"/users?limit=1&order=updated_asc&cursor="+*p.NextCursor, nil)
	mustStatus(t, next, 200)
	next.json(t, &p)
	if len(p.Items) != 1 || p.Items[0]["username"] != "rroe" {
		t.Fatalf("second page %s, want rroe (a cursor signed with the key from Secrets Manager)", next.body)
	}

	eventually(t, 30*time.Second, "jdoe and the password in Keycloak", func() (bool, string) {
		u, ok := kc.UserByUsername(realm, "jdoe")
		if !ok {
			return false, "no user"
		}
		pw, ok := kc.LastPassword(realm, u.ID)
		return ok && pw.Value == "first-secret", fmt.Sprintf("%+v", pw)
	})

	if fake.count("TrentService.GenerateDataKey") == 0 || fake.count("TrentService.Decrypt") == 0 {
		t.Errorf("KMS calls: %d GenerateDataKey, %d Decrypt; want the secrets sealed and opened with the stage's key",
			fake.count("TrentService.GenerateDataKey"), fake.count("TrentService.Decrypt"))
	}
	if n := fake.count("secretsmanager.GetSecretValue"); n != 5 {
		t.Errorf("%d secrets read, want 5 (the command API's two keys, idempotency and SCIM token, at each of its two starts, the query API's once)", n)
	}
	for _, table := range []string{names.Commands("kc", "t1"), names.Users("kc", "t1", 0), names.Activities("kc", "t1", 0)} {
		d, err := e.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		if !aws.ToBool(d.Table.DeletionProtectionEnabled) {
			t.Errorf("%s has no deletion protection", table)
		}
	}
}
