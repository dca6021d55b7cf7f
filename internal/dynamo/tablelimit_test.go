package dynamo

import "testing"

// DynamoDB's LimitExceededException messages, as AWS has given them: only those that name
// the account's count of tables are the table quota.
func TestIsTableCountLimitTellsTheQuotaFromConcurrentOperations(t *testing.T) {
	for msg, quota := range map[string]bool{
		"Subscriber limit exceeded: There is a limit of 256 tables per subscriber":                                             true,
		"Subscriber limit exceeded: Only 2500 tables can be created in this region for this account":                           true,
		"Subscriber limit exceeded: Only 10 tables can be created, updated, or deleted simultaneously":                         false,
		"Subscriber limit exceeded: You have exceeded the maximum number of indexed tables that can be created simultaneously": false,
		"Subscriber limit exceeded: Only 1 online index can be created or deleted simultaneously per table":                    false,
		"Too many concurrent table operations":                                                                                 false,
		"":                                                                                                                     false,
	} {
		if got := IsTableCountLimit(msg); got != quota {
			t.Errorf("IsTableCountLimit(%q) = %v, want %v", msg, got, quota)
		}
	}
}
