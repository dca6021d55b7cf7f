package dynamo

import (
	"strings"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// Error texts of this package reach the services' logs, which name users by id only
// (STYLE.md): an item key or an aggregate in them is written by these, with a user's name
// replaced by a keyed hash (identity.LogKey); group keys and fixed sort keys stay.

// logID is a partition key (`user#<name>`, `group#<key>`, `email#…`) for a log line.
func logID(id string) string { return identity.LogKey(id) }

// logSK is a sort key for a log line: `config`, `config#<version>` and plain keys as
// they are, one that names someone (`member#<name>`, `group#<key>` pointers) hashed.
func logSK(sk string) string {
	if sk == SKConfig || IsHistorySK(sk) || !strings.ContainsAny(sk, "#:") {
		return sk
	}
	return identity.LogKey(sk)
}

// logAgg is an aggregate of kind and key for a log line.
func logAgg(kind events.AggregateKind, key string) string {
	return identity.LogKey(AggregateID(kind, key))
}

// logUser is a user's partition for a log line.
func logUser(username string) string { return identity.LogKey(UserID(username)) }

// LogItemKey is an item's key, `<id>/<sk>`, for an error text or a log line of another
// package: names hashed as logID and logSK do.
func LogItemKey(id, sk string) string { return logID(id) + "/" + logSK(sk) }
