// Package dynamo holds ssodir's DynamoDB code: table names and schemas, tenant rows, the
// write-side command store, the command-log record codec, and the translation of SDK
// errors into internal/apperr errors. docs/storage.md describes every item layout.
package dynamo
