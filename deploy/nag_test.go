package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// cdk-nag's AwsSolutions rules find no error that is not suppressed, and every suppression
// names its rule, what it applies to (for wildcards: each one) and why.
func TestNoUnsuppressedAwsSolutionsError(t *testing.T) {
	s, _, j := synth(t)
	errs := assertions.Annotations_FromStack(s.Stack).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
	for _, e := range *errs {
		t.Errorf("%s: %v", *e.Id, e.Entry.Data)
	}
	suppressed := 0
	for id, r := range j["Resources"].(map[string]any) {
		md, _ := r.(map[string]any)["Metadata"].(map[string]any)
		nag, _ := md["cdk_nag"].(map[string]any)
		rules, _ := nag["rules_to_suppress"].([]any)
		for _, raw := range rules {
			rule := raw.(map[string]any)
			suppressed++
			ruleID, _ := rule["id"].(string)
			reason, _ := rule["reason"].(string)
			if !strings.HasPrefix(ruleID, "AwsSolutions-") || len(reason) < 40 {
				t.Errorf("%s: suppression %v without a rule or a reason", id, rule)
			}
			if ruleID == "AwsSolutions-IAM5" {
				applies, _ := rule["applies_to"].([]any)
				if len(applies) == 0 {
					t.Errorf("%s: a wildcard suppression that names no wildcard", id)
				}
				for _, a := range applies {
					if w := fmt.Sprint(a); !strings.Contains(w, "mbcsso_prod_") && w != "Resource::*" {
						t.Errorf("%s: wildcard %s is neither the stage's tables nor a resource-less action", id, w)
					}
				}
			}
		}
	}
	if suppressed == 0 {
		t.Error("no suppression found: the test reads the wrong metadata")
	}
}
