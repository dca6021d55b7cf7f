package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/deploy/iampolicy"
	"github.com/ssodir/ssodir/internal/awscalls"
)

// stagePolicies are every policy of the stage that decides a call, resolved: each
// function's role's, and each resource's own (a key's, a topic's, a queue's).
type stagePolicies struct {
	s        *Stage
	values   iampolicy.Values
	identity map[string][]iampolicy.Statement // by service
	roles    map[string]string                // service → role ARN
	resource map[string][]iampolicy.Statement // resource ARN → its policy
	keys     map[string]bool                  // the ARNs of keys: their policy must allow
	tmpl     map[string]any
}

// Resource types whose policies the check reads; a resource policy of any other type in the
// template fails it, so that no policy goes unevaluated. (AWS::Lambda::Permission, who may
// invoke a function, is the functions' own trigger wiring: no call of theirs depends on it.)
var resourcePolicyTypes = map[string]bool{"AWS::KMS::Key": true, "AWS::SNS::TopicPolicy": true, "AWS::SQS::QueuePolicy": true}

func readPolicies(t *testing.T, s *Stage, tmpl map[string]any, v iampolicy.Values) stagePolicies {
	t.Helper()
	p := stagePolicies{s: s, values: v, identity: policies(t, s, tmpl, v), roles: map[string]string{},
		resource: map[string][]iampolicy.Statement{}, keys: map[string]bool{}, tmpl: tmpl}
	for _, service := range Services {
		arn, err := v.Resolve(map[string]any{"Fn::GetAtt": []any{lid(s, s.Functions[service].Role()), "Arn"}})
		if err != nil {
			t.Fatal(err)
		}
		p.roles[service] = arn
	}
	parse := func(id string, doc any) []iampolicy.Statement {
		d, _ := doc.(map[string]any)
		sts, err := iampolicy.ParseResource(d, v)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return sts
	}
	for id, raw := range tmpl["Resources"].(map[string]any) {
		r := raw.(map[string]any)
		typ, _ := r["Type"].(string)
		pr := props(r)
		switch typ {
		case "AWS::KMS::Key":
			arn := v["GetAtt:"+id+".Arn"]
			p.keys[arn] = true
			p.resource[arn] = append(p.resource[arn], parse(id, pr["KeyPolicy"])...)
		case "AWS::SNS::TopicPolicy":
			sts := parse(id, pr["PolicyDocument"])
			for _, topic := range pr["Topics"].([]any) {
				arn, err := v.Resolve(topic)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				p.resource[arn] = append(p.resource[arn], sts...)
			}
		case "AWS::SQS::QueuePolicy":
			sts := parse(id, pr["PolicyDocument"])
			for _, q := range pr["Queues"].([]any) {
				ref, _ := q.(map[string]any)["Ref"].(string)
				arn, ok := v["GetAtt:"+ref+".Arn"]
				if !ok {
					t.Fatalf("%s: queue %v", id, q)
				}
				p.resource[arn] = append(p.resource[arn], sts...)
			}
		default:
			if strings.HasSuffix(typ, "Policy") && typ != "AWS::IAM::Policy" && !resourcePolicyTypes[typ] {
				t.Fatalf("%s: a resource policy of type %s, which the least-privilege check does not evaluate", id, typ)
			}
		}
	}
	return p
}

// call is a request to decide and who makes it.
type call struct {
	service string // a function, or "" for an AWS service on its own behalf
	req     iampolicy.Request
	why     string
}

// decide is IAM's decision on c.
func (p stagePolicies) decide(c call) (bool, []string, error) {
	req := c.req
	ctx := map[string]string{"aws:SecureTransport": "true"}
	var identity []iampolicy.Statement
	if c.service != "" {
		req.Principal = "AWS:" + p.roles[c.service]
		ctx["aws:PrincipalArn"], ctx["aws:PrincipalAccount"] = p.roles[c.service], testAccount
		identity = p.identity[c.service]
	}
	for k, val := range c.req.Context {
		ctx[k] = val
	}
	req.Context = ctx
	return iampolicy.Decide(identity, p.resource[req.Resource], req, testAccount, p.keys[req.Resource])
}

// denied lists every call the stage's policies refuse: the recorded ones, those AWS makes
// with a function's role because of them, and CloudWatch's for every alarm action.
func (p stagePolicies) denied(t *testing.T, byService map[string][]awscalls.Call) []string {
	t.Helper()
	var calls []call
	for _, service := range sortedKeys(byService) {
		for _, c := range byService[service] {
			calls = append(calls, call{service: service, req: request(c), why: "recorded (" + c.Operation + ")"})
		}
	}
	calls = append(calls, p.onBehalf(t, byService)...)
	calls = append(calls, p.alarmActions(t)...)
	seen := map[string]bool{}
	var out []string
	for _, c := range calls {
		ok, _, err := p.decide(c)
		if err != nil {
			t.Fatal(err)
		}
		if d := fmt.Sprintf("%s: %s on %s %v is not allowed: %s", orAWS(c.service), c.req.Action, c.req.Resource, c.req.Context, c.why); !ok && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

func orAWS(service string) string {
	if service == "" {
		return "an AWS service"
	}
	return service
}

// onBehalf are the calls AWS makes with a function's role for what the function did, which
// the recorder cannot see: DynamoDB using the table key (kms:ViaService dynamodb), Secrets
// Manager decrypting a secret (kms:ViaService secretsmanager), and the event source
// mappings' poller sending a failed batch to the failure queue.
func (p stagePolicies) onBehalf(t *testing.T, byService map[string][]awscalls.Call) []call {
	t.Helper()
	dataKey := p.values["GetAtt:"+lid(p.s, p.s.DataKey)+".Arn"]
	secretKeys := map[string]string{}
	for id, r := range resources(p.tmpl, "AWS::SecretsManager::Secret") {
		if k := props(r)["KmsKeyId"]; k != nil {
			arn, err := p.values.Resolve(k)
			if err != nil {
				t.Fatal(err)
			}
			secretKeys[p.values["Ref:"+id]] = arn
		}
	}
	via := func(service string) map[string]string {
		return map[string]string{"kms:ViaService": service + "." + testRegion + ".amazonaws.com"}
	}
	tablePrefix := ":table/" + p.s.Props.Prefix + "_"
	var out []call
	for _, service := range sortedKeys(byService) {
		for _, c := range byService[service] {
			req := request(c)
			add := func(action, key string, ctx map[string]string, why string) {
				out = append(out, call{service: service, req: iampolicy.Request{Action: action, Resource: key, Context: ctx}, why: why + " for " + c.Action + " on " + req.Resource})
			}
			switch {
			case c.Action == "dynamodb:CreateTable" && strings.Contains(req.Resource, tablePrefix):
				grant := via("dynamodb")
				grant["kms:GrantIsForAWSResource"] = "true"
				add("kms:CreateGrant", dataKey, grant, "DynamoDB's grant on the table key")
				add("kms:DescribeKey", dataKey, via("dynamodb"), "DynamoDB's check of the table key")
			case strings.HasPrefix(c.Action, "dynamodb:") && strings.Contains(req.Resource, tablePrefix) && !strings.Contains(req.Resource, "/stream/"):
				add("kms:Decrypt", dataKey, via("dynamodb"), "DynamoDB's use of the table key")
			case c.Action == "secretsmanager:GetSecretValue" && secretKeys[req.Resource] != "":
				add("kms:Decrypt", secretKeys[req.Resource], via("secretsmanager"), "Secrets Manager's decryption of the secret")
			}
		}
	}
	for _, service := range Consumers {
		queue := p.queue(service)
		out = append(out, call{service: service, req: iampolicy.Request{Action: "sqs:SendMessage", Resource: queue},
			why: "the stream mappings' poller sends what it gave up on to the consumer's failure queue with the function's role"})
		for _, action := range failureQueueReads {
			out = append(out, call{service: service, req: iampolicy.Request{Action: action, Resource: queue},
				why: "the failure queue's mapping reads it for the consumer with the function's role"})
		}
	}
	return out
}

// failureQueueReads are what Lambda's SQS poller does with a function's role.
var failureQueueReads = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}

// queue is the ARN of a consumer's failure queue.
func (p stagePolicies) queue(service string) string {
	return p.values["GetAtt:"+lid(p.s, p.s.FailureQueues[service])+".Arn"]
}

// Each consumer sends to and reads its own failure queue, and cannot touch the other's: an
// SQS message reaches one consumer only, and the other's repair is not its business.
func TestEachConsumerUsesItsOwnFailureQueueOnly(t *testing.T) {
	s, _, j := synth(t)
	p := readPolicies(t, s, j, testValues(t, j))
	for _, service := range Consumers {
		for _, other := range Consumers {
			for _, action := range append([]string{"sqs:SendMessage"}, failureQueueReads...) {
				ok, _, err := p.decide(call{service: service, req: iampolicy.Request{Action: action, Resource: p.queue(other)}})
				if err != nil {
					t.Fatal(err)
				}
				if ok != (service == other) {
					t.Errorf("%s: %s on %s's failure queue allowed: %v", service, action, other, ok)
				}
			}
		}
		// Nothing but these three and SendMessage: no purge, no change of the queue.
		for _, action := range []string{"sqs:PurgeQueue", "sqs:SetQueueAttributes", "sqs:DeleteQueue", "sqs:ChangeMessageVisibility"} {
			if ok, _, _ := p.decide(call{service: service, req: iampolicy.Request{Action: action, Resource: p.queue(service)}}); ok {
				t.Errorf("%s may %s its failure queue", service, action)
			}
		}
	}
	// Over plain HTTP the queue's own policy refuses even its consumer.
	c := call{service: Projector, req: iampolicy.Request{Action: "sqs:ReceiveMessage", Resource: p.queue(Projector),
		Context: map[string]string{"aws:SecureTransport": "false"}}}
	if ok, _, _ := p.decide(c); ok {
		t.Error("the projector may read its failure queue without TLS")
	}
}

// alarmActions are CloudWatch's calls when each alarm goes off: sns:Publish on each topic it
// names, and the topic's key (SNS encrypts the message with it for CloudWatch), each from
// that alarm (aws:SourceAccount, aws:SourceArn).
func (p stagePolicies) alarmActions(t *testing.T) []call {
	t.Helper()
	topicKeys := map[string]string{}
	for id, r := range resources(p.tmpl, "AWS::SNS::Topic") {
		if k := props(r)["KmsMasterKeyId"]; k != nil {
			arn, err := p.values.Resolve(k)
			if err != nil {
				t.Fatal(err)
			}
			topicKeys[p.values["Ref:"+id]] = arn
		}
	}
	var out []call
	alarms := resources(p.tmpl, "AWS::CloudWatch::Alarm")
	if len(alarms) == 0 {
		t.Fatal("no alarm in the template")
	}
	for id, r := range alarms {
		pr := props(r)
		name, _ := pr["AlarmName"].(string)
		actions, _ := pr["AlarmActions"].([]any)
		if len(actions) == 0 {
			t.Errorf("alarm %s notifies no one", name)
		}
		ctx := map[string]string{"aws:SourceAccount": testAccount,
			"aws:SourceArn": "arn:" + testPartition + ":cloudwatch:" + testRegion + ":" + testAccount + ":alarm:" + name}
		for _, a := range actions {
			topic, err := p.values.Resolve(a)
			if err != nil || !strings.Contains(topic, ":sns:") {
				t.Fatalf("alarm %s: action %v is no topic of the stack (%v)", id, a, err)
			}
			why := "alarm " + name + " notifies " + topic
			out = append(out, call{req: iampolicy.Request{Principal: "Service:cloudwatch.amazonaws.com", Action: "sns:Publish", Resource: topic, Context: ctx}, why: why})
			if key := topicKeys[topic]; key != "" {
				for _, action := range []string{"kms:GenerateDataKey", "kms:Decrypt"} {
					out = append(out, call{req: iampolicy.Request{Principal: "Service:cloudwatch.amazonaws.com", Action: action, Resource: key, Context: ctx}, why: why + " (its key)"})
				}
			}
		}
	}
	return out
}

// Every alarm action reaches the topic: the topic's own policy (which EnforceSSL makes, and
// which replaces SNS's default) lets CloudWatch publish for this stage's alarms, and the
// data key, which encrypts the topic, lets CloudWatch use it, on the same conditions.
func TestEveryAlarmCanNotifyItsTopic(t *testing.T) {
	s, _, j := synth(t)
	v := testValues(t, j)
	p := readPolicies(t, s, j, v)
	calls := p.alarmActions(t)
	for _, c := range calls {
		if ok, _, err := p.decide(c); err != nil || !ok {
			t.Errorf("%s on %s is refused (%v): %s", c.req.Action, c.req.Resource, err, c.why)
		}
	}
	// The conditions are what keeps another stage's or account's alarms out.
	for _, c := range calls[:1] {
		for _, other := range []map[string]string{
			{"aws:SourceAccount": testAccount, "aws:SourceArn": "arn:aws:cloudwatch:" + testRegion + ":" + testAccount + ":alarm:ssodir-stg-Errors"},
			{"aws:SourceAccount": "999999999999", "aws:SourceArn": "arn:aws:cloudwatch:" + testRegion + ":999999999999:alarm:ssodir-prod-Errors"},
			{},
		} {
			c.req.Context = other
			if ok, _, _ := p.decide(c); ok {
				t.Errorf("CloudWatch may publish for %v", other)
			}
		}
	}
}

// The proof fails on a resource policy that refuses what a function does: each policy of the
// stack, given a deliberately denying statement, makes the check report the call it refuses
// (a recorded call, a call AWS makes with the function's role, an alarm's).
func TestAResourcePolicyThatDeniesACallFailsTheProof(t *testing.T) {
	s, _, j := synth(t)
	recordedCalls := map[string][]awscalls.Call{
		CommandAPI: {
			{Service: CommandAPI, Operation: "Decrypt", Action: "kms:Decrypt", Resource: "arn:" + awscalls.Partition + ":kms:" + awscalls.Region + ":" + awscalls.Account + ":key/secrets-key"},
			{Service: CommandAPI, Operation: "GetSecretValue", Action: "secretsmanager:GetSecretValue",
				Resource: "arn:" + awscalls.Partition + ":secretsmanager:" + awscalls.Region + ":" + awscalls.Account + ":secret:ssodir/prod/idempotency-key-AbCdEf"},
		},
		QueryAPI: {{Service: QueryAPI, Operation: "GetItem", Action: "dynamodb:GetItem",
			Resource: "arn:" + awscalls.Partition + ":dynamodb:" + awscalls.Region + ":" + awscalls.Account + ":table/" + awscalls.Prefix + "_Config"}},
	}
	// As synthesized, the stack allows all of them.
	if d := readPolicies(t, s, j, testValues(t, j)).denied(t, recordedCalls); len(d) != 0 {
		t.Fatalf("the stack refuses: %v", d)
	}
	deny := func(sid, principal, action string, cond map[string]any) map[string]any {
		st := map[string]any{"Sid": sid, "Effect": "Deny", "Principal": map[string]any{"AWS": principal}, "Action": action, "Resource": "*"}
		if cond != nil {
			st["Condition"] = cond
		}
		return st
	}
	cases := []struct {
		name   string
		change func(tmpl map[string]any)
		want   string // in a denial
	}{
		{"the secrets key refuses the command API's decryption", func(tmpl map[string]any) {
			addStatement(t, tmpl, lid(s, s.SecretsKey), "KeyPolicy", deny("NoDecrypt", "*", "kms:Decrypt", nil))
		}, "command-api: kms:Decrypt on arn:aws:kms:eu-west-1:123456789012:key/secrets-key"},
		{"the data key refuses DynamoDB's use of it (kms:ViaService)", func(tmpl map[string]any) {
			addStatement(t, tmpl, lid(s, s.DataKey), "KeyPolicy", deny("NotThroughDynamoDB", "*", "kms:Decrypt",
				map[string]any{"StringEquals": map[string]any{"kms:ViaService": "dynamodb." + testRegion + ".amazonaws.com"}}))
		}, "query-api: kms:Decrypt on arn:aws:kms:eu-west-1:123456789012:key/data-key"},
		{"the data key refuses Secrets Manager's use of it (kms:ViaService)", func(tmpl map[string]any) {
			addStatement(t, tmpl, lid(s, s.DataKey), "KeyPolicy", deny("NotThroughSecretsManager", "*", "kms:Decrypt",
				map[string]any{"StringEquals": map[string]any{"kms:ViaService": "secretsmanager." + testRegion + ".amazonaws.com"}}))
		}, "Secrets Manager's decryption of the secret"},
		{"the projector's failure queue refuses its mappings' sends", func(tmpl map[string]any) {
			addStatement(t, tmpl, queuePolicyOf(t, s, tmpl, Projector), "PolicyDocument", deny("NoSend", "*", "sqs:SendMessage", nil))
		}, "projector: sqs:SendMessage"},
		{"keycloak-sync's failure queue refuses its reads", func(tmpl map[string]any) {
			addStatement(t, tmpl, queuePolicyOf(t, s, tmpl, KeycloakSync), "PolicyDocument", deny("NoReceive", "*", "sqs:ReceiveMessage", nil))
		}, "keycloak-sync: sqs:ReceiveMessage"},
		{"the alarm topic without CloudWatch's statement (SNS's default replaced)", func(tmpl map[string]any) {
			removeStatement(t, tmpl, policyOf(t, tmpl, "AWS::SNS::TopicPolicy"), "PolicyDocument", "CloudWatchAlarmsPublish")
		}, "an AWS service: sns:Publish"},
		{"the data key without CloudWatch's statement", func(tmpl map[string]any) {
			removeStatement(t, tmpl, lid(s, s.DataKey), "KeyPolicy", "CloudWatchAlarmsPublish")
		}, "an AWS service: kms:GenerateDataKey"},
	}
	for _, c := range cases {
		tmpl := deepCopy(t, j)
		c.change(tmpl)
		denied := readPolicies(t, s, tmpl, testValues(t, tmpl)).denied(t, recordedCalls)
		if !slices.ContainsFunc(denied, func(d string) bool { return strings.Contains(d, c.want) }) {
			t.Errorf("%s: the check reports %v, want a denial of %q", c.name, denied, c.want)
		}
	}
}

func deepCopy(t *testing.T, tmpl map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func policyOf(t *testing.T, tmpl map[string]any, typ string) string {
	t.Helper()
	rs := resources(tmpl, typ)
	if len(rs) != 1 {
		t.Fatalf("%d resources %s, want 1", len(rs), typ)
	}
	for id := range rs {
		return id
	}
	return ""
}

// queuePolicyOf is the id of the policy of a consumer's failure queue.
func queuePolicyOf(t *testing.T, s *Stage, tmpl map[string]any, service string) string {
	t.Helper()
	q := lid(s, s.FailureQueues[service])
	for id, r := range resources(tmpl, "AWS::SQS::QueuePolicy") {
		for _, ref := range props(r)["Queues"].([]any) {
			if ref.(map[string]any)["Ref"] == q {
				return id
			}
		}
	}
	t.Fatalf("no policy of %s's failure queue", service)
	return ""
}

func document(t *testing.T, tmpl map[string]any, id, field string) map[string]any {
	t.Helper()
	r, _ := tmpl["Resources"].(map[string]any)[id].(map[string]any)
	doc, _ := props(r)[field].(map[string]any)
	if doc == nil {
		t.Fatalf("%s has no %s", id, field)
	}
	return doc
}

func addStatement(t *testing.T, tmpl map[string]any, id, field string, st map[string]any) {
	t.Helper()
	doc := document(t, tmpl, id, field)
	doc["Statement"] = append(doc["Statement"].([]any), st)
}

func removeStatement(t *testing.T, tmpl map[string]any, id, field, sid string) {
	t.Helper()
	doc := document(t, tmpl, id, field)
	sts := doc["Statement"].([]any)
	n := len(sts)
	sts = slices.DeleteFunc(sts, func(st any) bool { return st.(map[string]any)["Sid"] == sid })
	if len(sts) == n {
		t.Fatalf("%s: no statement %s", id, sid)
	}
	doc["Statement"] = sts
}
