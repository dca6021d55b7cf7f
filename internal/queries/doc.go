// Package queries is ssodir's read side: it answers the query API from a tenant's read
// tables (docs/storage.md) and never writes. Every list is one DynamoDB Query per page on
// the table or one of its GSIs, continued by a signed, opaque cursor; single objects are
// GetItems. A tenant's current read tables come from its `{p}_Config` row, cached briefly so
// that a replay's switch to new tables is followed without a restart.
package queries
