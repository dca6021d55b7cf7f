package config

import (
	"strings"
	"testing"
	"time"
)

const key32 = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="

func TestLoad(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		load    func(Env) error
		wantErr []string
	}{
		{"the command API starts with a key and a token", map[string]string{"SSO_SECRET_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t"},
			func(e Env) error { _, err := LoadCommandAPI(e); return err }, nil},
		{"every problem is reported at once", map[string]string{"SSO_LOG_LEVEL": "loud", "SSO_COMMAND_ADDR": "nowhere", "SSO_SECRET_KEY": "short"},
			func(e Env) error { _, err := LoadCommandAPI(e); return err },
			[]string{"SSO_LOG_LEVEL", "SSO_COMMAND_ADDR", "SSO_SECRET_KEY", "SSO_BOOTSTRAP_TOKEN"}},
		{"an issuer needs an audience", map[string]string{"SSO_CURSOR_KEY": key32, "SSO_OIDC_ISSUER": "http://x"},
			func(e Env) error { _, err := LoadQueryAPI(e); return err }, []string{"SSO_OIDC_AUDIENCE"}},
		{"the query API needs a cursor key when only KMS is configured", map[string]string{"SSO_KMS_KEY_ID": "k", "SSO_BOOTSTRAP_TOKEN": "t"},
			func(e Env) error { _, err := LoadQueryAPI(e); return err }, []string{"SSO_CURSOR_KEY"}},
		{"the query API needs its own cursor key even with the secret key there", map[string]string{"SSO_SECRET_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t"},
			func(e Env) error { _, err := LoadQueryAPI(e); return err }, []string{"SSO_CURSOR_KEY"}},
		{"the query API starts with a cursor key and no secret key", map[string]string{"SSO_CURSOR_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t"},
			func(e Env) error { _, err := LoadQueryAPI(e); return err }, nil},
		{"a short cursor key is refused", map[string]string{"SSO_CURSOR_KEY": "c2hvcnQ=", "SSO_BOOTSTRAP_TOKEN": "t"},
			func(e Env) error { _, err := LoadQueryAPI(e); return err }, []string{"SSO_CURSOR_KEY"}},
		{"waiter caps must be positive integers", map[string]string{"SSO_CURSOR_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t", "SSO_MIN_VERSION_WAITERS": "0", "SSO_MIN_VERSION_WAITERS_PER_TENANT": "many"},
			func(e Env) error { _, err := LoadQueryAPI(e); return err }, []string{"SSO_MIN_VERSION_WAITERS:", "SSO_MIN_VERSION_WAITERS_PER_TENANT"}},
		{"the command API needs an idempotency key when only KMS is configured", map[string]string{"SSO_KMS_KEY_ID": "k", "SSO_BOOTSTRAP_TOKEN": "t"},
			func(e Env) error { _, err := LoadCommandAPI(e); return err }, []string{"SSO_IDEMPOTENCY_KEY"}},
		{"the command API needs a SCIM token key when only KMS is configured", map[string]string{"SSO_KMS_KEY_ID": "k", "SSO_IDEMPOTENCY_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t"},
			func(e Env) error { _, err := LoadCommandAPI(e); return err }, []string{"SSO_SCIM_TOKEN_KEY"}},
		{"the command API starts with KMS, an idempotency key and a SCIM token key", map[string]string{"SSO_KMS_KEY_ID": "k", "SSO_IDEMPOTENCY_KEY": key32, "SSO_SCIM_TOKEN_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t"},
			func(e Env) error { _, err := LoadCommandAPI(e); return err }, nil},
		{"the console's client id needs an issuer", map[string]string{"SSO_CURSOR_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t", "SSO_CONSOLE_CLIENT_ID": "ssodir-console"},
			func(e Env) error { _, err := LoadQueryAPI(e); return err }, []string{"SSO_CONSOLE_CLIENT_ID"}},
		{"a projector's feed URL must be an http(s) base URL", map[string]string{"SSO_PROJECTOR_FEED_URL": "projector-1:8082"},
			func(e Env) error { _, err := LoadProjector(e); return err }, []string{"SSO_PROJECTOR_FEED_URL", "projector-1:8082"}},
		{"a park longer than the stream keeps records is refused", map[string]string{"SSO_SECRET_KEY": key32, "SSO_KEYCLOAK_PARK_MAX": "24h"},
			func(e Env) error { _, err := LoadKeycloakSync(e); return err }, []string{"SSO_KEYCLOAK_PARK_MAX"}},
		{"the progress feed's subscriber cap must be positive", map[string]string{"SSO_PROGRESS_MAX_SUBSCRIBERS": "0"},
			func(e Env) error { _, err := LoadProjector(e); return err }, []string{"SSO_PROGRESS_MAX_SUBSCRIBERS"}},
		{"the console's addresses must be http(s) base URLs", map[string]string{"SSO_CURSOR_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t",
			"SSO_CONSOLE_COMMAND_API": "directory.example.com:8080", "SSO_CONSOLE_PROJECTOR": "https://u:p@p.example.com",
			"SSO_CONSOLE_KEYCLOAK_SYNC": "https://k.example.com/?x=1", "SSO_CONSOLE_READ_TIMEOUT": "10ms"},
			func(e Env) error { _, err := LoadQueryAPI(e); return err },
			[]string{"SSO_CONSOLE_COMMAND_API", "SSO_CONSOLE_PROJECTOR", "SSO_CONSOLE_KEYCLOAK_SYNC", "SSO_CONSOLE_READ_TIMEOUT"}},
		{"a bad retention is refused", map[string]string{"SSO_ACTIVITY_RETENTION": "ninety days"},
			func(e Env) error { _, err := LoadProjector(e); return err }, []string{"SSO_ACTIVITY_RETENTION"}},
		{"stream knobs are checked", map[string]string{"SSO_STREAM_POLL": "2s", "SSO_STREAM_IDLE_POLL_MAX": "1s", "SSO_STREAM_LEASE_SCAN": "10ms", "SSO_STREAM_CONSUMERS": "0"},
			func(e Env) error { _, err := LoadProjector(e); return err }, []string{"SSO_STREAM_IDLE_POLL_MAX", "SSO_STREAM_LEASE_SCAN", "SSO_STREAM_CONSUMERS"}},
		{"provisioning knobs are checked", map[string]string{"SSO_SECRET_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t", "SSO_PROVISION_WAIT": "2m", "SSO_PROVISION_RESUME": "1ms"},
			func(e Env) error { _, err := LoadCommandAPI(e); return err }, []string{"SSO_PROVISION_WAIT", "SSO_PROVISION_RESUME"}},
		{"a table quota is a positive count", map[string]string{"SSO_SECRET_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t", "SSO_TABLE_QUOTA": "0"},
			func(e Env) error { _, err := LoadCommandAPI(e); return err }, []string{"SSO_TABLE_QUOTA"}},
		{"the delete share must be a fraction", map[string]string{"SSO_SECRET_KEY": key32, "SSO_RECONCILE_MAX_DELETE_SHARE": "2"},
			func(e Env) error { _, err := LoadKeycloakSync(e); return err }, []string{"SSO_RECONCILE_MAX_DELETE_SHARE"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.load(Map(c.env))
			if len(c.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %s: %v", w, err)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	p, err := LoadProjector(Map(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p.TablePrefix != "mbcsso_dev" || p.Addr != "127.0.0.1:8082" || p.ActivityRetention != 2160*time.Hour || p.LeaseDuration != 10*time.Second {
		t.Errorf("projector defaults: %+v", p)
	}
	c, err := LoadCommandAPI(Map(map[string]string{"SSO_SECRET_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t", "SSO_CORS_ORIGINS": "https://a, https://b"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ProvisionWait != 5*time.Second || c.ProvisionResume != 30*time.Second {
		t.Errorf("provisioning defaults: wait %v, resume %v", c.ProvisionWait, c.ProvisionResume)
	}
	if c.Addr != "127.0.0.1:8080" || c.HistoryRetention != 0 || len(c.CORSOrigins) != 2 || c.CORSOrigins[1] != "https://b" || c.IdempotencyKey != nil {
		t.Errorf("command API defaults: %+v", c)
	}
	k, err := LoadKeycloakSync(Map(map[string]string{"SSO_SECRET_KEY": key32, "SSO_CORS_ORIGINS": "http://127.0.0.1:8081"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stream{LeaseDuration: 10 * time.Second, PollInterval: 250 * time.Millisecond, IdlePollMax: time.Second,
		LeaseScanInterval: 30 * time.Second, Consumers: 2}); k.Stream != want || p.Stream != want {
		t.Errorf("stream defaults: keycloak-sync %+v, projector %+v, want %+v", k.Stream, p.Stream, want)
	}
	k2, err := LoadKeycloakSync(Map(map[string]string{"SSO_SECRET_KEY": key32, "SSO_STREAM_IDLE_POLL_MAX": "3s", "SSO_STREAM_LEASE_SCAN": "1m", "SSO_STREAM_CONSUMERS": "3"}))
	if err != nil || k2.IdlePollMax != 3*time.Second || k2.LeaseScanInterval != time.Minute || k2.Consumers != 3 {
		t.Errorf("stream settings read: %+v %v", k2.Stream, err)
	}
	if len(k.CORSOrigins) != 1 || k.CORSOrigins[0] != "http://127.0.0.1:8081" {
		t.Errorf("keycloak-sync CORS origins: %+v", k.CORSOrigins)
	}
}

func TestQueryAPINeverReadsTheSecretKey(t *testing.T) {
	q, err := LoadQueryAPI(Map(map[string]string{
		"SSO_CURSOR_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t", "SSO_SECRET_KEY": key32, "SSO_KMS_KEY_ID": "k",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if q.SecretKey != nil || q.KMSKeyID != "" {
		t.Errorf("the query API's configuration holds the key that opens passwords: %+v", q.Common)
	}
	if !q.SecretKeySet {
		t.Error("SecretKeySet is false with SSO_SECRET_KEY set, so the process cannot warn about it")
	}
	if q.MaxWaiters != 512 || q.MaxTenantWaiters != 128 {
		t.Errorf("waiter caps %d/%d, want the defaults 512/128", q.MaxWaiters, q.MaxTenantWaiters)
	}
	q, err = LoadQueryAPI(Map(map[string]string{"SSO_CURSOR_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t", "SSO_PROGRESS_TOKEN": "feed-secret"}))
	if err != nil || q.ProgressToken != "feed-secret" {
		t.Errorf("SSO_PROGRESS_TOKEN gave %q (%v)", q.ProgressToken, err)
	}
}

func TestConsoleSettings(t *testing.T) {
	q, err := LoadQueryAPI(Map(map[string]string{"SSO_CURSOR_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t"}))
	if err != nil || q.ConsoleCommandAPI != "" || q.ConsoleProjector != "" || q.ConsoleKeycloakSync != "" || q.ConsoleReadTimeout != 15*time.Second {
		t.Fatalf("console defaults: %+v %v", q, err)
	}
	q, err = LoadQueryAPI(Map(map[string]string{"SSO_CURSOR_KEY": key32, "SSO_BOOTSTRAP_TOKEN": "t",
		"SSO_CONSOLE_COMMAND_API": " https://directory.example.com:8080/ ", "SSO_CONSOLE_PROJECTOR": "http://127.0.0.1:8082",
		"SSO_CONSOLE_KEYCLOAK_SYNC": "https://ops.example.com/keycloak-sync", "SSO_CONSOLE_READ_TIMEOUT": "30s"}))
	if err != nil {
		t.Fatal(err)
	}
	if q.ConsoleCommandAPI != "https://directory.example.com:8080" || q.ConsoleProjector != "http://127.0.0.1:8082" ||
		q.ConsoleKeycloakSync != "https://ops.example.com/keycloak-sync" || q.ConsoleReadTimeout != 30*time.Second {
		t.Errorf("console settings: %q %q %q %v", q.ConsoleCommandAPI, q.ConsoleProjector, q.ConsoleKeycloakSync, q.ConsoleReadTimeout)
	}
}

func TestCPUProfileIsReadFromTheEnvironment(t *testing.T) {
	if got := CPUProfile(Map(map[string]string{"SSO_CPU_PROFILE": "/tmp/p"})); got != "/tmp/p" {
		t.Errorf("CPUProfile = %q, want /tmp/p", got)
	}
	if got := CPUProfile(Map(nil)); got != "" {
		t.Errorf("CPUProfile without the variable = %q, want empty", got)
	}
}

func TestProjectorWrites(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"on AWS, a conditional PutItem per view item", map[string]string{}, true},
		{"against DynamoDB Local, transactions of 25", map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://localhost:8000"}, false},
		{"set: puts", map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000", "SSO_PROJECTOR_WRITES": "puts"}, true},
		{"set: transactions", map[string]string{"SSO_PROJECTOR_WRITES": "transactions"}, false},
	} {
		cfg, err := LoadProjector(Map(c.env))
		if err != nil || cfg.SinglePuts != c.want {
			t.Errorf("%s: single puts %v (%v), want %v", c.name, cfg.SinglePuts, err, c.want)
		}
	}
	if _, err := LoadProjector(Map(map[string]string{"SSO_PROJECTOR_WRITES": "batches"})); err == nil || !strings.Contains(err.Error(), "SSO_PROJECTOR_WRITES") {
		t.Errorf("an unknown way of writing: %v", err)
	}
}

func TestSecretReferences(t *testing.T) {
	refs, err := LoadSecretRefs(Map(map[string]string{"SSO_CURSOR_KEY_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:c-AbCdEf"}))
	if err != nil || refs.Refs["SSO_CURSOR_KEY"] != "arn:aws:secretsmanager:eu-west-1:123456789012:secret:c-AbCdEf" || len(refs.Refs) != 1 {
		t.Errorf("refs %v, %v", refs.Refs, err)
	}
	_, err = LoadSecretRefs(Map(map[string]string{"SSO_CURSOR_KEY": key32, "SSO_CURSOR_KEY_SECRET_ARN": "arn:aws:secretsmanager:x", "SSO_IDEMPOTENCY_KEY_SECRET_ARN": "idem"}))
	if err == nil || !strings.Contains(err.Error(), "both set") || !strings.Contains(err.Error(), "SSO_IDEMPOTENCY_KEY_SECRET_ARN") {
		t.Errorf("a key given both ways and a reference that is no ARN: %v", err)
	}
	env := Map(map[string]string{"SSO_BOOTSTRAP_TOKEN": "t"}).WithValues(map[string]string{"SSO_CURSOR_KEY": key32})
	if _, err := LoadQueryAPI(env); err != nil {
		t.Errorf("the values read are the configuration's: %v", err)
	}
}

func TestTableSettings(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		want    Tables
		wantErr []string
	}{
		{"on AWS, tables get recovery and protection, tagged with the prefix as the stage",
			map[string]string{"SSO_TABLE_PREFIX": "mbcsso_prod"},
			Tables{Stage: "mbcsso_prod", PointInTimeRecovery: true, DeletionProtection: true}, nil},
		{"against DynamoDB Local, which has no backups, recovery is off by default",
			map[string]string{"AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:8000"},
			Tables{Stage: "mbcsso_dev", DeletionProtection: true}, nil},
		{"a stage's stack sets everything",
			map[string]string{"SSO_STAGE": "prod", "SSO_TABLE_PITR": "true", "SSO_TABLE_DELETION_PROTECTION": "false", "SSO_SYSTEM_TABLES": "existing",
				"SSO_TABLE_KMS_KEY": "arn:aws:kms:eu-west-1:123456789012:key/0b7c8f52-3d0a-4c7e-9a55-6f1e2d3c4b5a"},
			Tables{Stage: "prod", PointInTimeRecovery: true, SystemTablesExist: true, KMSKey: "arn:aws:kms:eu-west-1:123456789012:key/0b7c8f52-3d0a-4c7e-9a55-6f1e2d3c4b5a"}, nil},
		{"bad values are all reported",
			map[string]string{"SSO_STAGE": "prod*", "SSO_TABLE_PITR": "maybe", "SSO_TABLE_KMS_KEY": "alias/x", "SSO_SYSTEM_TABLES": "some"},
			Tables{}, []string{"SSO_STAGE", "SSO_TABLE_PITR", "SSO_TABLE_KMS_KEY", "SSO_SYSTEM_TABLES"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := LoadProjector(Map(c.env))
			if len(c.wantErr) > 0 {
				for _, w := range c.wantErr {
					if err == nil || !strings.Contains(err.Error(), w) {
						t.Errorf("error %v does not name %s", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Tables != c.want {
				t.Errorf("tables %+v, want %+v", cfg.Tables, c.want)
			}
		})
	}
}

func TestLambdaModeNeedsBothConsumersAndValidARNs(t *testing.T) {
	base := map[string]string{"SSO_SECRET_KEY": "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", "SSO_BOOTSTRAP_TOKEN": "t"}
	with := func(kv ...string) Env {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return Map(m)
	}
	const proj, sync = "arn:aws:lambda:eu-west-1:123456789012:function:ssodir-prod-projector", "arn:aws:lambda:eu-west-1:123456789012:function:ssodir-prod-keycloak-sync"
	c, err := LoadCommandAPI(with("SSO_LAMBDA_PROJECTOR_ARN", proj, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN", sync,
		"SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN", "arn:aws:sqs:eu-west-1:123456789012:projector-failures",
		"SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN", "arn:aws:sqs:eu-west-1:123456789012:keycloak-sync-failures"))
	if err != nil || !c.Lambda.Enabled() || c.Lambda.ProjectorARN != proj ||
		c.Lambda.ProjectorFailureARN != "arn:aws:sqs:eu-west-1:123456789012:projector-failures" ||
		c.Lambda.KeycloakSyncFailureARN != "arn:aws:sqs:eu-west-1:123456789012:keycloak-sync-failures" {
		t.Fatalf("%+v, %v", c.Lambda, err)
	}
	if c, err := LoadCommandAPI(with()); err != nil || c.Lambda.Enabled() {
		t.Errorf("unset: %+v, %v", c.Lambda, err)
	}
	for name, env := range map[string]Env{
		"only one consumer":      with("SSO_LAMBDA_PROJECTOR_ARN", proj),
		"not a function ARN":     with("SSO_LAMBDA_PROJECTOR_ARN", "projector", "SSO_LAMBDA_KEYCLOAK_SYNC_ARN", sync),
		"not a queue or a topic": with("SSO_LAMBDA_PROJECTOR_ARN", proj, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN", sync, "SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN", "queue"),
		"one queue for both": with("SSO_LAMBDA_PROJECTOR_ARN", proj, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN", sync,
			"SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN", "arn:aws:sqs:eu-west-1:123456789012:failures",
			"SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN", "arn:aws:sqs:eu-west-1:123456789012:failures"),
		"the shared destination of before": with("SSO_LAMBDA_PROJECTOR_ARN", proj, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN", sync,
			"SSO_LAMBDA_FAILURE_DESTINATION_ARN", "arn:aws:sqs:eu-west-1:123456789012:failures"),
	} {
		if _, err := LoadCommandAPI(env); err == nil || !strings.Contains(err.Error(), "SSO_LAMBDA_") {
			t.Errorf("%s: %v, want an error naming the variable", name, err)
		}
	}
}
