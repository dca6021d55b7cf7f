package iampolicy

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestGlob(t *testing.T) {
	cases := []struct {
		pattern, value string
		want           bool
	}{
		{"table/p_*", "table/p_Config", true},
		{"table/p_*", "table/p_", true},
		{"table/p_*", "table/q_Config", false},
		{"table/p_*", "table/p", false},
		{"table/p_*_users", "table/p_s_t_users", true},
		{"table/p_*_users", "table/p_s_t_users_r1", false},
		{"table/p_*_users_r*", "table/p_s_t_users_r12", true},
		{"table/p_*", "table/p_s_t_users/index/UserEmailGSI", true}, // * crosses '/', as in IAM
		{"table/p_*/stream/*", "table/p_s_t_user_commands/stream/2026-11-26T10:00:00.000", true},
		{"table/p_*/stream/*", "table/p_s_t_user_commands", false},
		{"key/?bc", "key/abc", true},
		{"key/?bc", "key/bc", false},
		{"*", "", true},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"", "", true},
		{"", "x", false},
	}
	for _, c := range cases {
		if got := Glob(c.pattern, c.value); got != c.want {
			t.Errorf("Glob(%q, %q) = %v, want %v", c.pattern, c.value, got, c.want)
		}
	}
}

const doc = `{"Statement": [
 {"Sid": "Tables", "Effect": "Allow", "Action": ["dynamodb:GetItem", "dynamodb:Query"],
  "Resource": [{"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":dynamodb:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}, ":table/p_*"]]}]},
 {"Sid": "Key", "Effect": "Allow", "Action": "kms:Decrypt", "Resource": {"Fn::GetAtt": ["Key1", "Arn"]},
  "Condition": {"StringEquals": {"kms:ViaService": "dynamodb.eu-west-1.amazonaws.com"}}},
 {"Sid": "Mappings", "Effect": "Allow", "Action": "lambda:*EventSourceMapping", "Resource": "*",
  "Condition": {"ArnEquals": {"lambda:FunctionArn": [{"Fn::GetAtt": ["Fn1", "Arn"]}, {"Fn::GetAtt": ["Fn2", "Arn"]}]}}},
 {"Sid": "Maybe", "Effect": "Allow", "Action": "sqs:SendMessage", "Resource": {"Ref": "Queue"},
  "Condition": {"StringLikeIfExists": {"aws:SourceArn": "arn:aws:lambda:*"}}},
 {"Sid": "NoConfigWrites", "Effect": "Deny", "Action": "dynamodb:Query", "Resource": "arn:aws:dynamodb:eu-west-1:123456789012:table/p_secret"}
]}`

var values = Values{
	"AWS::Partition": "aws", "AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012",
	"GetAtt:Key1.Arn": "arn:aws:kms:eu-west-1:123456789012:key/k1",
	"GetAtt:Fn1.Arn":  "arn:aws:lambda:eu-west-1:123456789012:function:projector",
	"GetAtt:Fn2.Arn":  "arn:aws:lambda:eu-west-1:123456789012:function:sync",
	"Ref:Queue":       "https://sqs/q",
}

func TestAllowed(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	sts, err := Parse(m, values)
	if err != nil {
		t.Fatal(err)
	}
	table := "arn:aws:dynamodb:eu-west-1:123456789012:table/"
	cases := []struct {
		name string
		req  Request
		want bool
	}{
		{"an action on a table of the prefix", Request{Action: "dynamodb:GetItem", Resource: table + "p_Config"}, true},
		{"actions match case-insensitively", Request{Action: "DynamoDB:getitem", Resource: table + "p_Config"}, true},
		{"an action not listed", Request{Action: "dynamodb:PutItem", Resource: table + "p_Config"}, false},
		{"a table of another prefix", Request{Action: "dynamodb:GetItem", Resource: table + "q_Config"}, false},
		{"another account", Request{Action: "dynamodb:GetItem", Resource: "arn:aws:dynamodb:eu-west-1:999999999999:table/p_Config"}, false},
		{"an explicit deny wins over an allow", Request{Action: "dynamodb:Query", Resource: table + "p_secret"}, false},
		{"a condition met", Request{Action: "kms:Decrypt", Resource: "arn:aws:kms:eu-west-1:123456789012:key/k1",
			Context: map[string]string{"kms:ViaService": "dynamodb.eu-west-1.amazonaws.com"}}, true},
		{"a condition not met", Request{Action: "kms:Decrypt", Resource: "arn:aws:kms:eu-west-1:123456789012:key/k1",
			Context: map[string]string{"kms:ViaService": "s3.eu-west-1.amazonaws.com"}}, false},
		{"a condition's key absent", Request{Action: "kms:Decrypt", Resource: "arn:aws:kms:eu-west-1:123456789012:key/k1"}, false},
		{"a wildcard action with a condition on either function", Request{Action: "lambda:CreateEventSourceMapping", Resource: "*",
			Context: map[string]string{"lambda:FunctionArn": values["GetAtt:Fn2.Arn"]}}, true},
		{"a mapping for another function", Request{Action: "lambda:CreateEventSourceMapping", Resource: "*",
			Context: map[string]string{"lambda:FunctionArn": "arn:aws:lambda:eu-west-1:123456789012:function:other"}}, false},
		{"IfExists passes without the key", Request{Action: "sqs:SendMessage", Resource: "https://sqs/q"}, true},
		{"IfExists checks the key when there", Request{Action: "sqs:SendMessage", Resource: "https://sqs/q",
			Context: map[string]string{"aws:SourceArn": "arn:aws:events:x"}}, false},
	}
	for _, c := range cases {
		got, _, err := Allowed(sts, c.req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: allowed = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestWhatItCannotEvaluateIsAnError(t *testing.T) {
	for _, d := range []string{
		`{"Statement": [{"Effect": "Allow", "NotAction": "s3:*", "Resource": "*"}]}`,
		`{"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": {"Fn::Sub": "arn:${AWS::Partition}:s3:::b"}}]}`,
		`{"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": {"Ref": "Unknown"}}]}`,
		`{"Statement": [{"Effect": "Maybe", "Action": "s3:*", "Resource": "*"}]}`,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(m, values); err == nil {
			t.Errorf("Parse(%s) gave no error", d)
		}
	}
	st := []Statement{{Effect: "Allow", Actions: []string{"s3:GetObject"}, Resources: []string{"*"},
		Conditions: map[string]map[string][]string{"NumericLessThan": {"s3:max-keys": {"10"}}}}}
	if _, _, err := Allowed(st, Request{Action: "s3:GetObject", Resource: "x", Context: map[string]string{"s3:max-keys": "5"}}); err == nil ||
		!strings.Contains(err.Error(), "NumericLessThan") {
		t.Errorf("an unsupported operator gave %v, want an error naming it", err)
	}
}

const keyPolicy = `{"Statement": [
 {"Sid": "Root", "Effect": "Allow", "Principal": {"AWS": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::", {"Ref": "AWS::AccountId"}, ":root"]]}},
  "Action": "kms:*", "Resource": "*"},
 {"Sid": "CloudWatch", "Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"}, "Action": ["kms:Decrypt", "kms:GenerateDataKey*"], "Resource": "*",
  "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}, "ArnLike": {"aws:SourceArn": "arn:aws:cloudwatch:eu-west-1:123456789012:alarm:ssodir-prod-*"}}},
 {"Sid": "TLS", "Effect": "Deny", "Principal": {"AWS": "*"}, "Action": "kms:*", "Resource": "*", "Condition": {"Bool": {"aws:SecureTransport": "false"}}},
 {"Sid": "NoEncryptForOthers", "Effect": "Deny", "Principal": {"AWS": "arn:aws:iam::123456789012:role/other"}, "Action": "kms:Encrypt", "Resource": "*"}
]}`

func TestDecideWithAResourcePolicy(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal([]byte(keyPolicy), &m); err != nil {
		t.Fatal(err)
	}
	key, err := ParseResource(m, values)
	if err != nil {
		t.Fatal(err)
	}
	role := []Statement{{Sid: "Key", Effect: "Allow", Actions: []string{"kms:Decrypt", "kms:Encrypt"}, Resources: []string{"arn:aws:kms:eu-west-1:123456789012:key/k1"},
		Conditions: map[string]map[string][]string{"StringEquals": {"kms:ViaService": {"dynamodb.eu-west-1.amazonaws.com"}}}}}
	const keyARN = "arn:aws:kms:eu-west-1:123456789012:key/k1"
	tls := map[string]string{"aws:SecureTransport": "true"}
	via := func(service string) map[string]string {
		return map[string]string{"aws:SecureTransport": "true", "kms:ViaService": service + ".eu-west-1.amazonaws.com"}
	}
	alarm := func(account, name string) map[string]string {
		return map[string]string{"aws:SecureTransport": "true", "aws:SourceAccount": account, "aws:SourceArn": "arn:aws:cloudwatch:eu-west-1:" + account + ":alarm:" + name}
	}
	cases := []struct {
		name     string
		identity []Statement
		req      Request
		want     bool
	}{
		{"the key policy delegates to the role, which allows through DynamoDB", role,
			Request{Principal: "AWS:arn:aws:iam::123456789012:role/fn", Action: "kms:Decrypt", Resource: keyARN, Context: via("dynamodb")}, true},
		{"the role's kms:ViaService is another service", role,
			Request{Principal: "AWS:arn:aws:iam::123456789012:role/fn", Action: "kms:Decrypt", Resource: keyARN, Context: via("secretsmanager")}, false},
		{"delegation needs the identity policy", nil,
			Request{Principal: "AWS:arn:aws:iam::123456789012:role/fn", Action: "kms:Decrypt", Resource: keyARN, Context: via("dynamodb")}, false},
		{"a Deny of the key policy for one role wins over its identity policy", role,
			Request{Principal: "AWS:arn:aws:iam::123456789012:role/other", Action: "kms:Encrypt", Resource: keyARN, Context: via("dynamodb")}, false},
		{"without TLS", role,
			Request{Principal: "AWS:arn:aws:iam::123456789012:role/fn", Action: "kms:Decrypt", Resource: keyARN,
				Context: map[string]string{"aws:SecureTransport": "false", "kms:ViaService": "dynamodb.eu-west-1.amazonaws.com"}}, false},
		{"CloudWatch for an alarm of the stage", nil,
			Request{Principal: "Service:cloudwatch.amazonaws.com", Action: "kms:GenerateDataKey", Resource: keyARN, Context: alarm("123456789012", "ssodir-prod-Errors")}, true},
		{"CloudWatch for another stage's alarm", nil,
			Request{Principal: "Service:cloudwatch.amazonaws.com", Action: "kms:GenerateDataKey", Resource: keyARN, Context: alarm("123456789012", "ssodir-stg-Errors")}, false},
		{"CloudWatch for another account's alarm", nil,
			Request{Principal: "Service:cloudwatch.amazonaws.com", Action: "kms:Decrypt", Resource: keyARN, Context: alarm("999999999999", "ssodir-prod-Errors")}, false},
		{"another service", nil,
			Request{Principal: "Service:events.amazonaws.com", Action: "kms:Decrypt", Resource: keyARN, Context: tls}, false},
	}
	for _, c := range cases {
		got, by, err := Decide(c.identity, key, c.req, "123456789012", true)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: allowed = %v (by %v), want %v", c.name, got, by, c.want)
		}
	}
	// Not a key: a resource policy that names the account leaves the decision to the
	// identity policy, and without any resource policy the identity policy decides.
	queue := []Statement{{Sid: "TLS", Effect: "Deny", Principals: []string{"*"}, Actions: []string{"sqs:*"}, Resources: []string{"*"},
		Conditions: map[string]map[string][]string{"Bool": {"aws:SecureTransport": {"false"}}}}}
	send := []Statement{{Sid: "Send", Effect: "Allow", Actions: []string{"sqs:SendMessage"}, Resources: []string{"arn:aws:sqs:eu-west-1:123456789012:q"}}}
	req := Request{Principal: "AWS:arn:aws:iam::123456789012:role/fn", Action: "sqs:SendMessage", Resource: "arn:aws:sqs:eu-west-1:123456789012:q", Context: tls}
	for _, c := range []struct {
		name               string
		identity, resource []Statement
		ctx                map[string]string
		want               bool
	}{
		{"the role allows, the queue's policy denies only without TLS", send, queue, tls, true},
		{"without TLS", send, queue, map[string]string{"aws:SecureTransport": "false"}, false},
		{"the role does not allow", nil, queue, tls, false},
		{"no resource policy", send, nil, tls, true},
	} {
		r := req
		r.Context = c.ctx
		if got, by, err := Decide(c.identity, c.resource, r, "123456789012", false); err != nil || got != c.want {
			t.Errorf("%s: allowed = %v (by %v, %v), want %v", c.name, got, by, err, c.want)
		}
	}
}

func TestPrincipalsBelongInResourcePoliciesOnly(t *testing.T) {
	for _, c := range []struct {
		doc      string
		resource bool
	}{
		{`{"Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "s3:*", "Resource": "*"}]}`, false},
		{`{"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}`, true},
		{`{"Statement": [{"Effect": "Allow", "Principal": {"Federated": "x"}, "Action": "s3:*", "Resource": "*"}]}`, true},
		{`{"Statement": [{"Effect": "Allow", "NotPrincipal": {"AWS": "*"}, "Action": "s3:*", "Resource": "*"}]}`, true},
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(c.doc), &m); err != nil {
			t.Fatal(err)
		}
		if _, err := parse(m, values, c.resource); err == nil {
			t.Errorf("parse(%s, resource=%v) gave no error", c.doc, c.resource)
		}
	}
}
