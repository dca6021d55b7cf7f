package config

import "regexp"

// Lambda is Lambda mode's settings of the command API (docs/aws.md, "Lambda mode"): with
// the two consumers' function ARNs set, provisioning creates one event source mapping per
// function on every new tenant's command table, and removes them when it drops the table.
type Lambda struct {
	// ProjectorARN and KeycloakSyncARN are SSO_LAMBDA_PROJECTOR_ARN and
	// SSO_LAMBDA_KEYCLOAK_SYNC_ARN; both unset: the long-running consumers read the streams.
	ProjectorARN    string
	KeycloakSyncARN string
	// ProjectorFailureARN and KeycloakSyncFailureARN are
	// SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN and
	// SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN: the SQS queue (or SNS topic) each
	// consumer's mappings send the description of records they gave up on to (optional).
	// Each consumer has its own, which its function reads (esm.Recovery): an SQS message
	// reaches only one consumer, so the two must differ.
	ProjectorFailureARN    string
	KeycloakSyncFailureARN string
	// Endpoint is AWS_ENDPOINT_URL_LAMBDA, the SDK's standard override, read here only
	// so that tests can point the control plane at a fake one.
	Endpoint string
}

// Enabled reports whether provisioning creates mappings.
func (l Lambda) Enabled() bool { return l.ProjectorARN != "" || l.KeycloakSyncARN != "" }

var (
	functionARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]{1,64}(:[A-Za-z0-9_$-]+)?$`)
	destinationRE = regexp.MustCompile(`^arn:aws[a-z-]*:(sqs|sns):[a-z0-9-]+:\d{12}:[A-Za-z0-9_.-]{1,256}$`)
)

func (r *reader) lambda() Lambda {
	l := Lambda{
		ProjectorARN:           r.str("SSO_LAMBDA_PROJECTOR_ARN", ""),
		KeycloakSyncARN:        r.str("SSO_LAMBDA_KEYCLOAK_SYNC_ARN", ""),
		ProjectorFailureARN:    r.str("SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN", ""),
		KeycloakSyncFailureARN: r.str("SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN", ""),
		Endpoint:               r.str("AWS_ENDPOINT_URL_LAMBDA", ""),
	}
	if r.str("SSO_LAMBDA_FAILURE_DESTINATION_ARN", "") != "" {
		r.fail("SSO_LAMBDA_FAILURE_DESTINATION_ARN: replaced by SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN and SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN, one queue per consumer")
	}
	for name, v := range map[string]string{"SSO_LAMBDA_PROJECTOR_ARN": l.ProjectorARN, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN": l.KeycloakSyncARN} {
		if v != "" && !functionARNRE.MatchString(v) {
			r.fail("%s: %q is not a Lambda function ARN", name, v)
		}
	}
	if (l.ProjectorARN == "") != (l.KeycloakSyncARN == "") {
		r.fail("SSO_LAMBDA_PROJECTOR_ARN and SSO_LAMBDA_KEYCLOAK_SYNC_ARN: set both (Lambda mode) or neither")
	}
	for name, v := range map[string]string{"SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN": l.ProjectorFailureARN,
		"SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN": l.KeycloakSyncFailureARN} {
		if v != "" && !destinationRE.MatchString(v) {
			r.fail("%s: %q is not an SQS queue or SNS topic ARN", name, v)
		}
	}
	if l.ProjectorFailureARN != "" && l.ProjectorFailureARN == l.KeycloakSyncFailureARN {
		r.fail("SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN and SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN: the same queue; give each consumer its own (a message reaches only one)")
	}
	return l
}

// InLambda reports whether the process runs in AWS Lambda (or its Runtime Interface
// Emulator): the runtime API's address is set for every function process.
func InLambda(env Env) bool { return env.Value("AWS_LAMBDA_RUNTIME_API") != "" }
