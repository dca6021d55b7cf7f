package main

import (
	"strings"

	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Every exception to cdk-nag's AwsSolutions rules, each with the rule, the resources it
// applies to, and why (the tests fail on any error that is not suppressed here).
func (s *Stage) suppressions() {
	for _, service := range Services {
		var wildcards []any
		seen := map[string]bool{}
		for _, g := range s.Grants[service] {
			for _, r := range g.Resources {
				finding := nagResource(*r)
				if strings.Contains(finding, "*") && !seen[finding] && !strings.Contains(finding, "log-group") {
					seen[finding] = true
					wildcards = append(wildcards, "Resource::"+finding)
				}
			}
		}
		if len(wildcards) == 0 {
			continue
		}
		cdknag.NagSuppressions_AddResourceSuppressions(s.Functions[service].Role(), &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-IAM5"),
			Reason: jsii.String("Tables are created at run time, one set per tenant, all named <prefix>_…: the role is limited to the stage's prefix " +
				"(and, for creating and dropping, to the names only tenant tables have), their indexes and streams. " +
				"Resource * only where IAM has no resource for the action: dynamodb:ListStreams, lambda:ListEventSourceMappings, and " +
				"lambda:Create/Get/Update/DeleteEventSourceMapping, which are limited by lambda:FunctionArn to the stage's two consumers."),
			AppliesTo: &wildcards,
		}}, jsii.Bool(true))
	}
	for _, secret := range []any{s.CursorKey, s.IdempotencyKey, s.ScimTokenKey, s.WebhookKey} {
		cdknag.NagSuppressions_AddResourceSuppressions(secret, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-SMG4"),
			Reason: jsii.String("A service reads its key once at start and keeps no older key: an automatic rotation would make every cursor " +
				"handed out before it (query API), every Idempotency-Key replay of the last 24 h (command API), or every SCIM token (command API), or every webhook's secret (command API, projector) fail. " +
				"Rotate on purpose: put a new secret value, then redeploy the functions (docs/aws.md)."),
		}}, jsii.Bool(true))
	}
	for _, c := range Consumers {
		cdknag.NagSuppressions_AddResourceSuppressions(s.FailureQueues[c], &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-SQS3"),
			Reason: jsii.String("This queue is itself the failure destination of the " + c + "'s stream mappings, read by the " + c +
				" (which repairs the tenant); a message it cannot repair must come again until it can, not move on: " +
				"an alarm fires on every message sent here, and on one left unrepaired for 15 minutes."),
		}}, jsii.Bool(true))
	}
	for _, service := range []string{CommandAPI, QueryAPI} {
		cdknag.NagSuppressions_AddResourceSuppressions(s.APIs[service], &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-APIG4"),
			Reason: jsii.String("The service authorises every request itself (API.md, Authentication): OIDC JWTs with scopes and tenants, " +
				"and tenants' SCIM tokens, which an API Gateway authorizer cannot check; /healthz, /readyz, /openapi.json and /console/ are open by contract " +
				"(/metrics is not served by the functions: internal/lambdafn)."),
		}}, jsii.Bool(true))
	}
}

// nagResource is how cdk-nag prints a resource: tokens of the partition, region and account
// as <AWS::…>.
func nagResource(r string) string {
	for _, p := range []struct{ token, name string }{{"AWS.Partition", "AWS::Partition"}, {"AWS.Region", "AWS::Region"}, {"AWS.AccountId", "AWS::AccountId"}} {
		for {
			i := strings.Index(r, "${Token["+p.token)
			if i < 0 {
				break
			}
			j := strings.Index(r[i:], "]}")
			r = r[:i] + "<" + p.name + ">" + r[i+j+2:]
		}
	}
	return r
}
