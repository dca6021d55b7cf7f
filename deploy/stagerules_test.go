package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"

	"github.com/ssodir/ssodir/deploy/iampolicy"
)

// What holds data is kept when the stack is deleted or the resource replaced, but not when
// the stack's first creation fails: CloudFormation then deletes it, and a retry does not
// fail on "already exists" (RetainExceptOnCreate). The stack's tables have no deletion
// protection, which would make that rollback fail.
func TestDataIsKeptExceptWhenTheFirstCreationFails(t *testing.T) {
	_, _, j := synth(t)
	want := map[string]int{"AWS::DynamoDB::Table": 8, "AWS::SecretsManager::Secret": 4, "AWS::KMS::Key": 2, "AWS::Logs::LogGroup": 6}
	for typ, n := range want {
		rs := resources(j, typ)
		if len(rs) != n {
			t.Errorf("%d %s, want %d", len(rs), typ, n)
		}
		for id, r := range rs {
			if r["DeletionPolicy"] != "RetainExceptOnCreate" || r["UpdateReplacePolicy"] != "Retain" {
				t.Errorf("%s: DeletionPolicy %v, UpdateReplacePolicy %v; want RetainExceptOnCreate, Retain", id, r["DeletionPolicy"], r["UpdateReplacePolicy"])
			}
			if typ == "AWS::DynamoDB::Table" && props(r)["DeletionProtectionEnabled"] == true {
				t.Errorf("%s: deletion protection would stop the rollback of a failed first creation", id)
			}
		}
	}
}

// The consumers have concurrency of their own, which a flood on the APIs cannot take; the
// APIs are capped; together they leave Lambda's 100 unreserved in an account of 1,000.
func TestConcurrencyIsReservedForTheConsumersAndCappedForTheAPIs(t *testing.T) {
	_, _, j := synth(t)
	total := 0
	for _, r := range resources(j, "AWS::Lambda::Function") {
		p := props(r)
		name := p["FunctionName"].(string)
		service := strings.TrimPrefix(name, "ssodir-"+testStage+"-")
		n, ok := p["ReservedConcurrentExecutions"].(float64)
		if !ok {
			t.Errorf("%s: no reserved concurrency", name)
			continue
		}
		if int(n) != DefaultConcurrency[service] {
			t.Errorf("%s: reserved concurrency %v, want %d", name, n, DefaultConcurrency[service])
		}
		total += int(n)
	}
	if total > 900 {
		t.Errorf("the functions reserve %d, more than the 900 of an account with the default 1,000", total)
	}
	if DefaultConcurrency[Projector] < DefaultConcurrency[CommandAPI] || DefaultConcurrency[KeycloakSync] < DefaultConcurrency[CommandAPI] {
		t.Errorf("the consumers reserve less than an API: %v", DefaultConcurrency)
	}
	if c, err := parseConcurrency("projector=400, query-api=300"); err != nil || c[Projector] != 400 || c[QueryAPI] != 300 || len(c) != 2 {
		t.Errorf("parseConcurrency: %v, %v", c, err)
	}
	for _, bad := range []string{"projector", "projector=x", "worker=3"} {
		if _, err := parseConcurrency(bad); err == nil {
			t.Errorf("parseConcurrency(%q) gave no error", bad)
		}
	}
	p := StageProps{Stage: "x", Concurrency: map[string]int{Projector: 0}}
	if err := p.defaults(); err == nil {
		t.Error("a concurrency of 0 was accepted")
	}
}

// A scheduled task is not retried, by EventBridge or by Lambda's asynchronous invocation,
// and a tick is dropped once the next one is due: a retried reconcile would overlap the
// next round.
func TestScheduledTasksAreNeverRetried(t *testing.T) {
	s, _, j := synth(t)
	for id, r := range resources(j, "AWS::Events::Rule") {
		for _, target := range props(r)["Targets"].([]any) {
			rp, _ := target.(map[string]any)["RetryPolicy"].(map[string]any)
			if rp == nil || rp["MaximumRetryAttempts"] != float64(0) {
				t.Errorf("%s: target retry policy %v, want MaximumRetryAttempts 0", id, rp)
			}
		}
	}
	configs := map[string]map[string]any{}
	for _, r := range resources(j, "AWS::Lambda::EventInvokeConfig") {
		p := props(r)
		configs[fmt.Sprint(p["FunctionName"])] = p
	}
	every := map[string]float64{}
	for _, sc := range schedules {
		if m, ok := every[sc.service]; !ok || sc.every < m {
			every[sc.service] = sc.every
		}
	}
	for service, minutes := range every {
		p, ok := configs[fmt.Sprint(map[string]any{"Ref": lid(s, s.Functions[service])})]
		if !ok {
			t.Errorf("%s: no asynchronous invocation config (Lambda would retry a failed task twice)", service)
			continue
		}
		if p["MaximumRetryAttempts"] != float64(0) || p["MaximumEventAgeInSeconds"] != minutes*60 {
			t.Errorf("%s: retries %v, event age %v; want 0 and %v s", service, p["MaximumRetryAttempts"], p["MaximumEventAgeInSeconds"], minutes*60)
		}
	}
}

// No stage's names fall under another's patterns: a stage name has no separator and a
// prefix exactly one '_', so prod's roles (mbcsso_prod_*) reach no table of any other stage.
func TestStageNamesAndPrefixesDoNotOverlap(t *testing.T) {
	for _, bad := range []string{"prod-eu", "prod_eu", "Prod", "1prod", "", "abcdefghijklmnopq"} {
		p := StageProps{Stage: bad}
		if err := p.defaults(); err == nil {
			t.Errorf("stage %q accepted", bad)
		}
	}
	for _, bad := range []string{"mbcsso", "mbcsso_prod_eu", "mbcsso-prod", "_prod", "mbcsso_"} {
		p := StageProps{Stage: "prod", Prefix: bad}
		if err := p.defaults(); err == nil {
			t.Errorf("prefix %q accepted", bad)
		}
	}
	// Every pair of valid stages: neither's table pattern matches the other's tables.
	stages := []StageProps{{Stage: "prod"}, {Stage: "prodeu"}, {Stage: "prod2"}, {Stage: "p"}, {Stage: "stg", Prefix: "mbcsso_prod2"}, {Stage: "x", Prefix: "other_prod"}}
	for i := range stages {
		if err := stages[i].defaults(); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range stages {
		for _, b := range stages {
			if a.Prefix == b.Prefix {
				continue
			}
			for _, table := range []string{b.Prefix + "_Config", b.Prefix + "_eu_t1_users", b.Prefix + "_t_1_user_commands"} {
				if iampolicy.Glob(a.Prefix+"_*", table) {
					t.Errorf("stage %s's pattern %s_* matches %s, a table of stage %s", a.Stage, a.Prefix, table, b.Stage)
				}
			}
			if iampolicy.Glob("ssodir-"+a.Stage+"-*", "ssodir-"+b.Stage+"-Errors") && a.Stage != b.Stage {
				t.Errorf("stage %s's alarms pattern matches stage %s's", a.Stage, b.Stage)
			}
		}
	}
	if _, err := NewStage(awscdk.NewApp(nil), StageProps{Stage: "prod-eu", AssetDir: t.TempDir()}); err == nil {
		t.Error("NewStage made a stage prod-eu")
	}
}
