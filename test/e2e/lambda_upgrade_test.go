package e2e

import (
	"testing"

	"github.com/ssodir/ssodir/internal/mappings/mappingstest"
)

// TestAnUpgradeMovesExistingMappingsToTheConsumersOwnQueues: a stage upgraded from the
// version whose mappings all gave up records to one shared StreamFailures queue (which the
// upgrade deletes). The command API function's scheduled check-mappings reads every
// mapping and updates each one an older version made to this version's settings, so the
// tenants provisioned before the upgrade send what ESM gives up on to each consumer's own
// queue, which that consumer reads.
func TestAnUpgradeMovesExistingMappingsToTheConsumersOwnQueues(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cp := mappingstest.New()
	t.Cleanup(cp.Close)
	fn := e.startFunction("command-api", "SSO_LAMBDA_PROJECTOR_ARN="+e2eProjectorARN, "SSO_LAMBDA_KEYCLOAK_SYNC_ARN="+e2eSyncARN,
		"SSO_LAMBDA_PROJECTOR_FAILURE_DESTINATION_ARN="+e2eProjectorFailuresARN,
		"SSO_LAMBDA_KEYCLOAK_SYNC_FAILURE_DESTINATION_ARN="+e2eSyncFailuresARN, "AWS_ENDPOINT_URL_LAMBDA="+cp.URL)
	api := fn.gateway(t)
	provision(t, api, "lam", "before")

	// The tenant's mappings, as the older version made them.
	const shared = "arn:aws:sqs:us-east-1:123456789012:ssodir-prod-StreamFailures"
	ms := cp.Mappings()
	if len(ms) != 2 {
		t.Fatalf("%d mappings, want 2", len(ms))
	}
	for _, m := range ms {
		cp.SetOnFailure(m.UUID, shared)
	}

	fn.task(t, "check-mappings")
	want := map[string]string{e2eProjectorARN: e2eProjectorFailuresARN, e2eSyncARN: e2eSyncFailuresARN}
	for _, m := range cp.Mappings() {
		if m.OnFailure != want[m.FunctionArn] {
			t.Errorf("mapping of %s gives up to %q after check-mappings, want %q", m.FunctionArn, m.OnFailure, want[m.FunctionArn])
		}
	}
	if n := cp.Updates(); n != 2 {
		t.Errorf("%d mappings updated, want 2", n)
	}
	// Once they are this version's, the check changes nothing.
	fn.task(t, "check-mappings")
	if n := cp.Updates(); n != 2 {
		t.Errorf("%d mappings updated after a second check, want still 2", n)
	}
}
