// Package dynamo holds ssodir's DynamoDB code: table names and schemas, tenant rows, the
// write-side command store, the command-log record codec, and the translation of SDK
// errors into internal/apperr errors (the SDK's error types themselves are read only in
// its sdkerr package). docs/storage.md describes every item layout; docs/architecture.md
// which package owns which rule.
package dynamo
