package servicetest

import (
	"testing"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// Local is the DynamoDB Local Main started, for a test that needs its tables but none of
// the services (an operator's command that works on DynamoDB directly).
func Local(t testing.TB) *dynamotest.Local {
	t.Helper()
	if local == nil {
		t.Fatal("servicetest: Main did not run (call servicetest.Main from TestMain)")
	}
	return local
}
