package main

import (
	"archive/zip"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
)

// A synthesis of the test stage: one (with cdk-nag) serves every test of the package
// (it costs 10-20 s); busSynthesis, the same stage naming testBus, serves the least
// privilege test, whose end-to-end run publishes to that bus (test/e2e).
type synthesized struct {
	once     sync.Once
	stage    *Stage
	template assertions.Template
	json     map[string]any
	dir      string
	err      error
}

var synthesis, busSynthesis synthesized

const testStage = "prod"

// testBus is the EventBridge bus the end-to-end tests' Lambda stage publishes to
// (test/e2e, lambda_changesout_test.go).
const testBus = "directory-changes"

func TestMain(m *testing.M) {
	// Node 20 is what the machines have; jsii warns about it on every start.
	os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	code := m.Run()
	jsii.Close()
	for _, sy := range []*synthesized{&synthesis, &busSynthesis} {
		if sy.dir != "" {
			_ = os.RemoveAll(sy.dir)
		}
	}
	os.Exit(code)
}

// synth is the test stage's synthesized stack, with placeholder function zips (each with
// an executable bootstrap): the tests check the stack, not the binaries.
func synth(t *testing.T) (*Stage, assertions.Template, map[string]any) {
	t.Helper()
	return synthesis.of(t, StageProps{Stage: testStage})
}

// synthBus is the test stage naming testBus, as the end-to-end tests ran it.
func synthBus(t *testing.T) (*Stage, assertions.Template, map[string]any) {
	t.Helper()
	return busSynthesis.of(t, StageProps{Stage: testStage, EventBus: testBus})
}

func (sy *synthesized) of(t *testing.T, props StageProps) (*Stage, assertions.Template, map[string]any) {
	t.Helper()
	sy.once.Do(func() {
		dir, err := os.MkdirTemp("", "ssodir-deploy-assets")
		if err != nil {
			sy.err = err
			return
		}
		sy.dir = dir
		for _, service := range Services {
			if err := placeholderZip(filepath.Join(dir, service+"-arm64.zip")); err != nil {
				sy.err = err
				return
			}
		}
		app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(dir, "cdk.out"))})
		props.AssetDir = dir
		stage, err := NewStage(app, props)
		if err != nil {
			sy.err = err
			return
		}
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
		sy.stage = stage
		sy.template = assertions.Template_FromStack(stage.Stack, nil)
		sy.json = *sy.template.ToJSON()
	})
	if sy.err != nil {
		t.Fatal(sy.err)
	}
	return sy.stage, sy.template, sy.json
}

func placeholderZip(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := zip.NewWriter(f)
	h := &zip.FileHeader{Name: "bootstrap", Method: zip.Deflate}
	h.SetMode(0o755)
	out, err := w.CreateHeader(h)
	if err == nil {
		_, err = out.Write([]byte("#!/bin/sh\nexit 1\n"))
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// lid is a construct's logical id in the template.
func lid(s *Stage, c constructs.IConstruct) string {
	return *s.Stack.GetLogicalId(c.Node().DefaultChild().(awscdk.CfnElement))
}

// has runs an assertion of the CDK's assertions package, which panics on failure, as a
// test error.
func has(t *testing.T, what string, assert func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	assert()
}

// resources are the template's resources of a type, by logical id.
func resources(tmpl map[string]any, typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tmpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

func functionEnv(t *testing.T, tmpl map[string]any, service string) map[string]any {
	t.Helper()
	for _, r := range resources(tmpl, "AWS::Lambda::Function") {
		p := props(r)
		if p["FunctionName"] == "ssodir-"+testStage+"-"+service {
			return p["Environment"].(map[string]any)["Variables"].(map[string]any)
		}
	}
	t.Fatalf("no function for %s", service)
	return nil
}

func TestFourArmFunctionsWithTheirLogGroups(t *testing.T) {
	_, tmpl, j := synth(t)
	fns := resources(j, "AWS::Lambda::Function")
	var names []string
	for _, r := range fns {
		p := props(r)
		names = append(names, p["FunctionName"].(string))
		if got := fmt.Sprint(p["Architectures"]); got != "[arm64]" {
			t.Errorf("%s: architectures %s, want arm64", p["FunctionName"], got)
		}
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v handler %v, want provided.al2023 with bootstrap", p["FunctionName"], p["Runtime"], p["Handler"])
		}
		lc, _ := p["LoggingConfig"].(map[string]any)
		if lc == nil || lc["LogGroup"] == nil {
			t.Errorf("%s: no log group of its own", p["FunctionName"])
		}
	}
	sort.Strings(names)
	if want := "[ssodir-prod-command-api ssodir-prod-keycloak-sync ssodir-prod-projector ssodir-prod-query-api]"; fmt.Sprint(names) != want {
		t.Errorf("functions %v, want %s", names, want)
	}
	for _, service := range Services {
		has(t, service+" log group", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), map[string]any{
				"LogGroupName": "/aws/lambda/ssodir-prod-" + service, "RetentionInDays": 90})
		})
	}
}

func TestSystemTablesHaveRecoveryTheStagesKeyAndTags(t *testing.T) {
	s, tmpl, j := synth(t)
	tables := resources(j, "AWS::DynamoDB::Table")
	var names []string
	for _, r := range tables {
		names = append(names, props(r)["TableName"].(string))
	}
	sort.Strings(names)
	n := dynamo.Names{Prefix: "mbcsso_prod"}
	want := []string{n.Config(), n.DeadLetters(), n.KeycloakSyncStatus(), n.StreamLeases(), n.Idempotency(), n.ScimTokens(), n.Erasures(), changefeed.TableName(n)}
	sort.Strings(want)
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("system tables %v, want %v", names, want)
	}
	key := lid(s, s.DataKey)
	for _, name := range want {
		has(t, name, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
				"TableName":                        name,
				"BillingMode":                      "PAY_PER_REQUEST",
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
				"SSESpecification": map[string]any{"SSEEnabled": true, "SSEType": "KMS",
					"KMSMasterKeyId": map[string]any{"Fn::GetAtt": []any{key, "Arn"}}},
				"Tags": assertions.Match_ArrayWith(&[]any{map[string]any{"Key": "ssodir:stage", "Value": "prod"}}),
			})
		})
	}
	has(t, "idempotency TTL", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"TableName": n.Idempotency(), "TimeToLiveSpecification": map[string]any{"AttributeName": "expires_at", "Enabled": true}})
	})
	// Attempt counts and their markers in the dead-letter table expire (internal/deadletters).
	has(t, "dead letters TTL", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"TableName": n.DeadLetters(), "TimeToLiveSpecification": map[string]any{"AttributeName": "expires_at", "Enabled": true}})
	})
	// Every table's TTL is the one internal/dynamo gives it, and only those have one.
	ttl := map[string]string{}
	specs := append([]dynamo.TableSpec{dynamo.ConfigTable(n.Config()), dynamo.IdempotencyTable(n.Idempotency()), dynamo.ScimTokensTable(n.ScimTokens()),
		dynamo.KeycloakSyncStatusTable(n.KeycloakSyncStatus()), dynamo.ErasuresTable(n.Erasures()), changefeed.Table(changefeed.TableName(n))},
		dynamo.StreamTables(n.StreamLeases(), n.DeadLetters())...)
	for _, spec := range specs {
		ttl[*spec.Input.TableName] = spec.TTLAttr
	}
	for _, r := range tables {
		p := props(r)
		name := p["TableName"].(string)
		got := ""
		if spec, ok := p["TimeToLiveSpecification"].(map[string]any); ok && spec["Enabled"] == true {
			got, _ = spec["AttributeName"].(string)
		}
		if got != ttl[name] {
			t.Errorf("%s: TTL on %q, want %q (internal/dynamo)", name, got, ttl[name])
		}
	}
	// The keys are those of internal/dynamo, which reads and writes the tables.
	has(t, "Config keys", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"TableName": n.Config(), "KeySchema": []any{
				map[string]any{"AttributeName": "system_id", "KeyType": "HASH"}, map[string]any{"AttributeName": "tenant_id", "KeyType": "RANGE"}}})
	})
}

func TestTenantTablesSettingsAreTheCommandAPIsConfiguration(t *testing.T) {
	s, _, j := synth(t)
	key := lid(s, s.DataKey)
	for _, service := range []string{CommandAPI, Projector} {
		env := functionEnv(t, j, service)
		for k, want := range map[string]any{
			"SSO_STAGE": "prod", "SSO_TABLE_PREFIX": "mbcsso_prod", "SSO_TABLE_PITR": "true", "SSO_TABLE_DELETION_PROTECTION": "true",
			"SSO_SYSTEM_TABLES": "existing", "SSO_TABLE_KMS_KEY": map[string]any{"Fn::GetAtt": []any{key, "Arn"}},
		} {
			if fmt.Sprint(env[k]) != fmt.Sprint(want) {
				t.Errorf("%s: %s = %v, want %v", service, k, env[k], want)
			}
		}
	}
}

func TestKeysRotateAndNoSecretIsInTheTemplate(t *testing.T) {
	s, tmpl, j := synth(t)
	has(t, "keys", func() {
		tmpl.ResourcePropertiesCountIs(jsii.String("AWS::KMS::Key"), map[string]any{"EnableKeyRotation": true}, jsii.Number(2))
	})
	secretsKey := lid(s, s.SecretsKey)
	for _, service := range []string{CommandAPI, KeycloakSync} {
		if got := fmt.Sprint(functionEnv(t, j, service)["SSO_KMS_KEY_ID"]); got != fmt.Sprint(map[string]any{"Fn::GetAtt": []any{secretsKey, "Arn"}}) {
			t.Errorf("%s: SSO_KMS_KEY_ID = %s, want the secrets key", service, got)
		}
	}
	for id, r := range resources(j, "AWS::SecretsManager::Secret") {
		p := props(r)
		if p["SecretString"] != nil || p["GenerateSecretString"] == nil {
			t.Errorf("secret %s is not generated by Secrets Manager: %v", id, p)
		}
	}
	// No function holds a secret in its environment, only references to secrets.
	for _, service := range Services {
		env := functionEnv(t, j, service)
		for k := range env {
			switch k {
			case "SSO_SECRET_KEY", "SSO_CURSOR_KEY", "SSO_IDEMPOTENCY_KEY", "SSO_BOOTSTRAP_TOKEN":
				t.Errorf("%s: %s in the environment", service, k)
			}
		}
		if _, ok := env["SSO_KMS_KEY_ID"]; ok && (service == QueryAPI || service == Projector) {
			t.Errorf("%s holds the key that opens passwords", service)
		}
	}
	if ref := fmt.Sprint(functionEnv(t, j, QueryAPI)["SSO_CURSOR_KEY_SECRET_ARN"]); !strings.Contains(ref, "Ref:CursorKey") {
		t.Errorf("query API's SSO_CURSOR_KEY_SECRET_ARN = %s, want the cursor key secret", ref)
	}
	if ref := fmt.Sprint(functionEnv(t, j, CommandAPI)["SSO_SCIM_TOKEN_KEY_SECRET_ARN"]); !strings.Contains(ref, "Ref:ScimTokenKey") {
		t.Errorf("command API's SSO_SCIM_TOKEN_KEY_SECRET_ARN = %s, want the SCIM token key secret", ref)
	}
	if ref := fmt.Sprint(functionEnv(t, j, CommandAPI)["SSO_IDEMPOTENCY_KEY_SECRET_ARN"]); !strings.Contains(ref, "Ref:IdempotencyKey") {
		t.Errorf("command API's SSO_IDEMPOTENCY_KEY_SECRET_ARN = %s, want the idempotency key secret", ref)
	}
}

func TestOIDCIssuerAndAudienceAreParameters(t *testing.T) {
	_, _, j := synth(t)
	params := j["Parameters"].(map[string]any)
	for _, p := range []string{"OidcIssuer", "OidcAudience", "ConsoleClientId"} {
		if _, ok := params[p]; !ok {
			t.Errorf("no parameter %s", p)
		}
	}
	for _, service := range []string{CommandAPI, QueryAPI} {
		env := functionEnv(t, j, service)
		if fmt.Sprint(env["SSO_OIDC_ISSUER"]) != fmt.Sprint(map[string]any{"Ref": "OidcIssuer"}) ||
			fmt.Sprint(env["SSO_OIDC_AUDIENCE"]) != fmt.Sprint(map[string]any{"Ref": "OidcAudience"}) {
			t.Errorf("%s: issuer %v audience %v, want the parameters", service, env["SSO_OIDC_ISSUER"], env["SSO_OIDC_AUDIENCE"])
		}
	}
}

func TestBackgroundWorkIsScheduledWithItsTask(t *testing.T) {
	s, tmpl, _ := synth(t)
	for _, sc := range schedules {
		fn := lid(s, s.Functions[sc.service])
		has(t, sc.service+" "+sc.task, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
				"State": "ENABLED",
				"Targets": []any{assertions.Match_ObjectLike(&map[string]any{
					"Arn":   map[string]any{"Fn::GetAtt": []any{fn, "Arn"}},
					"Input": fmt.Sprintf(`{"ssodir_task":"%s"}`, sc.task),
				})},
			})
		})
	}
}

// Dead letters a throttle or a short outage made wait minutes, not a quarter of an hour: the
// re-drives run every minute (keycloak-sync) and every 5 minutes (projector).
func TestDeadLettersAreRedrivenEveryFewMinutes(t *testing.T) {
	s, tmpl, _ := synth(t)
	for service, rate := range map[string]string{KeycloakSync: "rate(1 minute)", Projector: "rate(5 minutes)"} {
		has(t, service+" redrive-dead-letters "+rate, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
				"ScheduleExpression": rate,
				"Targets": []any{assertions.Match_ObjectLike(&map[string]any{
					"Arn":   map[string]any{"Fn::GetAtt": []any{lid(s, s.Functions[service]), "Arn"}},
					"Input": `{"ssodir_task":"redrive-dead-letters"}`,
				})},
			})
		})
	}
}

func TestTheAPIsLogAndThrottle(t *testing.T) {
	_, tmpl, j := synth(t)
	has(t, "two HTTP APIs", func() { tmpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Api"), jsii.Number(2)) })
	stages := resources(j, "AWS::ApiGatewayV2::Stage")
	if len(stages) != 2 {
		t.Fatalf("%d API stages, want 2", len(stages))
	}
	for id, r := range stages {
		p := props(r)
		if p["AccessLogSettings"] == nil {
			t.Errorf("%s: no access log", id)
		}
		rs, _ := p["DefaultRouteSettings"].(map[string]any)
		if rs["ThrottlingRateLimit"] == nil || rs["ThrottlingBurstLimit"] == nil {
			t.Errorf("%s: no throttling", id)
		}
	}
	if origin := fmt.Sprint(functionEnv(t, j, CommandAPI)["SSO_CORS_ORIGINS"]); !strings.Contains(origin, "QueryApiHttp") {
		t.Errorf("command API's SSO_CORS_ORIGINS = %s, want the query API's (the console's) origin", origin)
	}
	outputs := j["Outputs"].(map[string]any)
	for _, o := range []string{"CommandApiUrl", "QueryApiUrl", "ConsoleUrl", "AlarmTopicArn"} {
		if outputs[o] == nil {
			t.Errorf("no output %s", o)
		}
	}
}

func TestMappingsAreMadeByTheCommandAPIForTheTwoConsumers(t *testing.T) {
	s, _, j := synth(t)
	env := functionEnv(t, j, CommandAPI)
	fnArn := func(service string) string {
		return fmt.Sprint(map[string]any{"Fn::GetAtt": []any{lid(s, s.Functions[service]), "Arn"}})
	}
	queue := func(service string) string {
		return fmt.Sprint(map[string]any{"Fn::GetAtt": []any{lid(s, s.FailureQueues[service]), "Arn"}})
	}
	if queue(Projector) == queue(KeycloakSync) {
		t.Fatal("the two consumers share a failure queue: a message would reach only one")
	}
	for k, want := range map[string]string{envProjectorARN: fnArn(Projector), envKeycloakSyncARN: fnArn(KeycloakSync),
		envFailureARN[Projector]: queue(Projector), envFailureARN[KeycloakSync]: queue(KeycloakSync)} {
		if fmt.Sprint(env[k]) != want {
			t.Errorf("%s = %v, want %s", k, env[k], want)
		}
	}
	// The stack's only mappings are the failure queues' (the streams' are made per tenant by
	// provisioning): each queue feeds its own consumer, which reports the messages it could
	// not handle, and the queue hides a message being handled for longer than the function runs.
	esms := resources(j, "AWS::Lambda::EventSourceMapping")
	if len(esms) != len(Consumers) {
		t.Errorf("%d event source mappings in the stack, want one per failure queue", len(esms))
	}
	for _, c := range Consumers {
		found := false
		for _, r := range esms {
			p := props(r)
			if fmt.Sprint(p["EventSourceArn"]) != queue(c) {
				continue
			}
			found = true
			if fmt.Sprint(p["FunctionName"]) != fmt.Sprint(map[string]any{"Ref": lid(s, s.Functions[c])}) ||
				fmt.Sprint(p["FunctionResponseTypes"]) != "[ReportBatchItemFailures]" || p["StartingPosition"] != nil {
				t.Errorf("%s's failure queue mapping %v", c, p)
			}
		}
		if !found {
			t.Errorf("no mapping reads %s's failure queue", c)
		}
		q := props(resources(j, "AWS::SQS::Queue")[lid(s, s.FailureQueues[c])])
		timeout := props(resources(j, "AWS::Lambda::Function")[lid(s, s.Functions[c])])["Timeout"].(float64)
		if v, _ := q["VisibilityTimeout"].(float64); v < timeout {
			t.Errorf("%s's failure queue hides a message %v s, less than the function's timeout %v s", c, v, timeout)
		}
		// Its role reaches that queue and no other.
		for _, g := range s.Grants[c] {
			for _, a := range g.Actions {
				if strings.HasPrefix(a, "sqs:") && (len(g.Resources) != 1 || fmt.Sprint(s.Stack.Resolve(g.Resources[0])) != queue(c)) {
					t.Errorf("%s's grant %s: %s on %v, want its own failure queue only", c, g.Sid, a, g.Resources)
				}
			}
		}
	}
}

func TestAlarmsOnWhatAnOperatorMustActOn(t *testing.T) {
	s, tmpl, j := synth(t)
	alarms := resources(j, "AWS::CloudWatch::Alarm")
	byName := map[string]map[string]any{}
	for _, r := range alarms {
		p := props(r)
		byName[p["AlarmName"].(string)] = p
		if actions, _ := p["AlarmActions"].([]any); len(actions) != 1 {
			t.Errorf("%s: actions %v, want the alarm topic", p["AlarmName"], p["AlarmActions"])
		}
	}
	for name, metric := range map[string]string{
		"ProjectorIteratorAge": "IteratorAge", "KeycloakSyncIteratorAge": "IteratorAge",
		"ProjectorDeadLetters": "DeadLetters", "KeycloakSyncDeadLetters": "DeadLetters", "ParkedTenant": "ParkedTenants",
		"ProjectorFailedBatches": "NumberOfMessagesSent", "KeycloakSyncFailedBatches": "NumberOfMessagesSent",
		"ProjectorFailuresUnrepaired": "ApproximateAgeOfOldestMessage", "KeycloakSyncFailuresUnrepaired": "ApproximateAgeOfOldestMessage",
		"CommandApi5xx": "5xx", "QueryApi5xx": "5xx",
		"CommandApiErrors": "Errors", "QueryApiErrors": "Errors", "ProjectorErrors": "Errors", "KeycloakSyncErrors": "Errors",
		"CommandApiThrottles": "Throttles", "QueryApiThrottles": "Throttles", "ProjectorThrottles": "Throttles", "KeycloakSyncThrottles": "Throttles",
		"ThrottledConfig": "", "ThrottledIdempotency": "",
		"MappingsNotPolling": "MappingsNotPolling", "MappingCheckMissing": "MappingChecks", "TableQuota": "StageTables",
	} {
		p, ok := byName["ssodir-prod-"+name]
		if !ok {
			t.Errorf("no alarm %s", name)
			continue
		}
		if metric != "" && p["MetricName"] != metric {
			t.Errorf("%s: metric %v, want %s", name, p["MetricName"], metric)
		}
	}
	// Each consumer's failure alarms watch its own queue.
	for _, c := range Consumers {
		q := map[string]any{"QueueName": map[string]any{"Fn::GetAtt": []any{lid(s, s.FailureQueues[c]), "QueueName"}}}
		for _, name := range []string{id(c) + "FailedBatches", id(c) + "FailuresUnrepaired"} {
			if d, _ := byName["ssodir-prod-"+name]["Dimensions"].([]any); len(d) != 1 || fmt.Sprint(d[0].(map[string]any)["Value"]) != fmt.Sprint(q["QueueName"]) {
				t.Errorf("%s: dimensions %v, want %s's failure queue", name, d, c)
			}
		}
	}
	// Missing data: an idle stage publishes no IteratorAge (not breaching), but the mapping
	// check must run (breaching).
	for name, want := range map[string]string{"ProjectorIteratorAge": "notBreaching", "MappingCheckMissing": "breaching", "MappingsNotPolling": "notBreaching"} {
		if got := byName["ssodir-prod-"+name]["TreatMissingData"]; got != want {
			t.Errorf("%s: missing data %v, want %s", name, got, want)
		}
	}
	for _, m := range []string{"DeadLetters", "ParkedTenants", "MappingsNotPolling", "MappingChecks"} {
		has(t, m+" metric filter", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Logs::MetricFilter"), map[string]any{
				"MetricTransformations": []any{assertions.Match_ObjectLike(&map[string]any{"MetricName": m, "MetricNamespace": "ssodir/prod"})}})
		})
	}
	has(t, "dashboard", func() { tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1)) })
	has(t, "encrypted alarm topic", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::SNS::Topic"), map[string]any{"KmsMasterKeyId": assertions.Match_AnyValue()})
	})
}

// The command API refuses a tenant past the stage's counted table quota, the same quota
// whose 80 % the TableQuota alarm warns at.
func TestTheCommandAPICountsTheTableQuotaTheAlarmWatches(t *testing.T) {
	_, _, j := synth(t)
	env := functionEnv(t, j, CommandAPI)
	if got := fmt.Sprint(env["SSO_TABLE_QUOTA"]); got != fmt.Sprint(accountTableQuota) {
		t.Errorf("SSO_TABLE_QUOTA = %s, want the account's default quota %d", got, accountTableQuota)
	}
}
