package config

import "strings"

// SecretVariables may be given by reference: <name>_SECRET_ARN names an AWS Secrets
// Manager secret whose string is the value, read once at start (a stage on AWS keeps no
// secret in a function's environment: docs/aws.md).
var SecretVariables = []string{"SSO_SECRET_KEY", "SSO_IDEMPOTENCY_KEY", "SSO_SCIM_TOKEN_KEY", "SSO_CURSOR_KEY", "SSO_BOOTSTRAP_TOKEN", "SSO_WEBHOOK_KEY"}

// SecretRefSuffix makes a secret variable's reference: SSO_CURSOR_KEY_SECRET_ARN.
const SecretRefSuffix = "_SECRET_ARN"

// SecretRefs are the secret references of an environment, read before the rest of the
// configuration (which then sees the secrets' values).
type SecretRefs struct {
	// Refs maps a secret variable to the secret's ARN.
	Refs map[string]string
	// AWSCallLog and TablePrefix are what the call recorder needs (Common).
	AWSCallLog, TablePrefix string
}

// LoadSecretRefs reads the references; a variable given both ways is refused.
func LoadSecretRefs(env Env) (SecretRefs, error) {
	r := &reader{env: env}
	refs := SecretRefs{Refs: map[string]string{}, AWSCallLog: r.str("SSO_AWS_CALL_LOG", ""), TablePrefix: r.str("SSO_TABLE_PREFIX", "mbcsso_dev")}
	for _, name := range SecretVariables {
		arn := r.str(name+SecretRefSuffix, "")
		if arn == "" {
			continue
		}
		if !strings.HasPrefix(arn, "arn:") {
			r.fail("%s%s: %q is not a secret's ARN", name, SecretRefSuffix, arn)
		}
		if r.str(name, "") != "" {
			r.fail("%s and %s%s are both set: give the secret one way", name, name, SecretRefSuffix)
		}
		refs.Refs[name] = arn
	}
	return refs, r.err()
}

// WithValues is env with the given variables set (the secrets a process read).
func (e Env) WithValues(values map[string]string) Env {
	return func(name string) (string, bool) {
		if v, ok := values[name]; ok {
			return v, true
		}
		return e(name)
	}
}

// CPUProfile is SSO_CPU_PROFILE, where a service writes a CPU profile ("" for none). It is
// read apart from a service's configuration: profiling starts before, and survives, a
// configuration that fails to load.
func CPUProfile(env Env) string {
	v, _ := env("SSO_CPU_PROFILE")
	return v
}
