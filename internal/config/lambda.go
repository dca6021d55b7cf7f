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
	// FailureDestinationARN is SSO_LAMBDA_FAILURE_DESTINATION_ARN: an SQS queue or SNS
	// topic the mappings send the description of a batch that kept failing to, after the
	// function itself has stored its records as dead letters or could not (optional).
	FailureDestinationARN string
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
		ProjectorARN:          r.str("SSO_LAMBDA_PROJECTOR_ARN", ""),
		KeycloakSyncARN:       r.str("SSO_LAMBDA_KEYCLOAK_SYNC_ARN", ""),
		FailureDestinationARN: r.str("SSO_LAMBDA_FAILURE_DESTINATION_ARN", ""),
		Endpoint:              r.str("AWS_ENDPOINT_URL_LAMBDA", ""),
	}
	for name, v := range map[string]string{"SSO_LAMBDA_PROJECTOR_ARN": l.ProjectorARN, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN": l.KeycloakSyncARN} {
		if v != "" && !functionARNRE.MatchString(v) {
			r.fail("%s: %q is not a Lambda function ARN", name, v)
		}
	}
	if (l.ProjectorARN == "") != (l.KeycloakSyncARN == "") {
		r.fail("SSO_LAMBDA_PROJECTOR_ARN and SSO_LAMBDA_KEYCLOAK_SYNC_ARN: set both (Lambda mode) or neither")
	}
	if l.FailureDestinationARN != "" && !destinationRE.MatchString(l.FailureDestinationARN) {
		r.fail("SSO_LAMBDA_FAILURE_DESTINATION_ARN: %q is not an SQS queue or SNS topic ARN", l.FailureDestinationARN)
	}
	return l
}

// InLambda reports whether the process runs in AWS Lambda (or its Runtime Interface
// Emulator): the runtime API's address is set for every function process.
func InLambda(env Env) bool { return env.Value("AWS_LAMBDA_RUNTIME_API") != "" }
