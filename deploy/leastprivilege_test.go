package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/deploy/iampolicy"
	"github.com/ssodir/ssodir/internal/awscalls"
)

// The test stage's partition, region and account: the template's pseudo parameters and
// the recorded calls' placeholders both become these.
const (
	testPartition = "aws"
	testRegion    = "eu-west-1"
	testAccount   = "123456789012"
)

// testValues resolves the template's intrinsics to the names the stage's resources would
// have. The two keys get the ids the end-to-end tests use for them (test/e2e/stage_test.go:
// key/secrets-key is SSO_KMS_KEY_ID, key/data-key the tables' key), the secrets their ARNs.
func testValues(t *testing.T, tmpl map[string]any) iampolicy.Values {
	t.Helper()
	v := iampolicy.Values{"AWS::Partition": testPartition, "AWS::Region": testRegion, "AWS::AccountId": testAccount,
		"AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "ssodir-" + testStage,
		"Ref:OidcIssuer": "https://keycloak.example.com/realms/admin", "Ref:OidcAudience": "ssodir", "Ref:ConsoleClientId": ""}
	arn := func(service, rest string) string {
		return "arn:" + testPartition + ":" + service + ":" + testRegion + ":" + testAccount + ":" + rest
	}
	for id, raw := range tmpl["Resources"].(map[string]any) {
		r := raw.(map[string]any)
		p := props(r)
		switch r["Type"] {
		case "AWS::KMS::Key":
			name := "data-key"
			if strings.HasPrefix(id, "SecretsKey") {
				name = "secrets-key"
			}
			v["GetAtt:"+id+".Arn"] = arn("kms", "key/"+name)
			v["Ref:"+id] = name
		case "AWS::Lambda::Function":
			v["GetAtt:"+id+".Arn"] = arn("lambda", "function:"+p["FunctionName"].(string))
			v["Ref:"+id] = p["FunctionName"].(string)
		case "AWS::SQS::Queue":
			v["GetAtt:"+id+".Arn"] = arn("sqs", id)
			v["Ref:"+id] = "https://sqs." + testRegion + ".amazonaws.com/" + testAccount + "/" + id
		case "AWS::SecretsManager::Secret":
			v["Ref:"+id] = arn("secretsmanager", "secret:"+p["Name"].(string)+"-AbCdEf")
		case "AWS::Logs::LogGroup":
			v["GetAtt:"+id+".Arn"] = arn("logs", "log-group:"+p["LogGroupName"].(string)+":*")
		case "AWS::DynamoDB::Table":
			v["Ref:"+id] = p["TableName"].(string)
			v["GetAtt:"+id+".Arn"] = arn("dynamodb", "table/"+p["TableName"].(string))
		case "AWS::ApiGatewayV2::Api":
			v["Ref:"+id] = strings.ToLower(id[:10])
			v["GetAtt:"+id+".ApiEndpoint"] = "https://" + strings.ToLower(id[:10]) + ".execute-api." + testRegion + ".amazonaws.com"
		case "AWS::SNS::Topic":
			v["Ref:"+id] = arn("sns", id)
		case "AWS::IAM::Role":
			v["GetAtt:"+id+".Arn"] = "arn:" + testPartition + ":iam::" + testAccount + ":role/" + id
		}
	}
	return v
}

// policies are each service's role's statements, resolved.
func policies(t *testing.T, s *Stage, tmpl map[string]any, v iampolicy.Values) map[string][]iampolicy.Statement {
	t.Helper()
	roles := map[string]string{}
	for _, service := range Services {
		roles[lid(s, s.Functions[service].Role())] = service
	}
	out := map[string][]iampolicy.Statement{}
	for id, r := range resources(tmpl, "AWS::IAM::Policy") {
		p := props(r)
		sts, err := iampolicy.Parse(p["PolicyDocument"].(map[string]any), v)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		for _, role := range p["Roles"].([]any) {
			service, ok := roles[fmt.Sprint(role.(map[string]any)["Ref"])]
			if !ok {
				t.Fatalf("policy %s is on a role %v that no function has", id, role)
			}
			out[service] = append(out[service], sts...)
		}
	}
	return out
}

// recorded is every AWS call the services made in the end-to-end tests: from
// SSODIR_AWS_CALL_LOG, where `make test` has them record, or else from a run of
// test/e2e made here (minutes).
func recorded(t *testing.T) []awscalls.Call {
	t.Helper()
	dir := os.Getenv("SSODIR_AWS_CALL_LOG")
	if dir == "" {
		dir = t.TempDir()
		t.Logf("SSODIR_AWS_CALL_LOG is not set: running the end-to-end tests to record the services' calls into %s", dir)
		cmd := exec.Command("go", "test", "-count=1", "-timeout", "30m", "./test/e2e")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "SSODIR_AWS_CALL_LOG="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("end-to-end tests: %v\n%s", err, out)
		}
	}
	calls, err := awscalls.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	t.Logf("%d distinct calls recorded by %d processes in %s", len(calls), len(files), dir)
	return calls
}

// request is a recorded call as the stage would make it.
func request(c awscalls.Call) iampolicy.Request {
	r := strings.NewReplacer(awscalls.Partition, testPartition, awscalls.Region, testRegion, awscalls.Account, testAccount,
		awscalls.Prefix, "mbcsso_"+testStage)
	req := iampolicy.Request{Action: c.Action, Resource: r.Replace(c.Resource), Context: map[string]string{}}
	for k, v := range c.Context {
		req.Context[k] = r.Replace(v)
	}
	return req
}

// Least privilege, both ways: every call a service made in the end-to-end tests is allowed
// by its function's policy and the resource's own policy, as are the calls AWS makes with
// the function's role for it (sufficient; resourcepolicies_test.go), and every action a policy allows was made by that
// service in some test, or its grant says why no test can make it (necessary).
func TestPoliciesAllowExactlyWhatTheServicesDo(t *testing.T) {
	s, _, j := synthBus(t)
	v := testValues(t, j)
	pol := policies(t, s, j, v)
	calls := recorded(t)

	byService := map[string][]awscalls.Call{}
	for _, c := range calls {
		switch {
		case strings.HasSuffix(c.Service, "-admin"):
			// An operator's command (replay, reconcile, dead-letters): the operator's
			// credentials, not a function's role (docs/aws.md lists what they need).
			continue
		case !slices.Contains(Services, c.Service):
			t.Errorf("a call by %q, which is no function of the stage: %+v", c.Service, c)
			continue
		}
		byService[c.Service] = append(byService[c.Service], c)
	}
	for _, service := range Services {
		if len(byService[service]) == 0 {
			t.Errorf("%s recorded no call: the end-to-end tests did not run with the recorder", service)
		}
	}

	// Sufficient: each call by its role's policy and the policy of the resource it acts on
	// (a key's, the failure queue's), and so are the calls AWS makes for it with its role.
	rp := readPolicies(t, s, j, v)
	for _, d := range rp.denied(t, byService) {
		t.Error(d)
	}

	// Necessary.
	for _, service := range Services {
		for _, g := range s.Grants[service] {
			if g.Reason != "" {
				continue
			}
			var st *iampolicy.Statement
			for i := range pol[service] {
				if pol[service][i].Sid == g.Sid {
					st = &pol[service][i]
				}
			}
			if st == nil {
				t.Errorf("%s: grant %s is not in the template", service, g.Sid)
				continue
			}
			for _, action := range st.Actions {
				used := slices.ContainsFunc(byService[service], func(c awscalls.Call) bool {
					if !iampolicy.Glob(strings.ToLower(action), strings.ToLower(c.Action)) {
						return false
					}
					ok, err := st.Matches(request(c))
					return err == nil && ok
				})
				if !used {
					t.Errorf("%s's grant %s allows %s, which no test recorded it making: remove it, or give the grant a Reason", service, g.Sid, action)
				}
			}
		}
	}
}
