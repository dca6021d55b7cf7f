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
