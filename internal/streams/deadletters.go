package streams

import "context"

// DeadLetterStore keeps the records a consumer gives up, and the records parked behind
// them to keep an aggregate's order (internal/deadletters implements it; Lambda mode
// shares the same store).
type DeadLetterStore interface {
	// Add stores rec as a dead letter after attempts: one that failed itself (behind
	// empty), or one parked behind its aggregate's first dead letter (behind is that one's
	// sequence number).
	Add(ctx context.Context, rec Record, attempts int, reason, behind string) error
	// FirstOf is the sequence number of an aggregate's first dead letter, if it has any.
	FirstOf(ctx context.Context, system, tenant, table, aggregate string) (seq string, found bool, err error)
	// BlockedIn reads which aggregates of a table have dead letters (each with its first
	// one's sequence number) and about how many dead letters they hold.
	BlockedIn(ctx context.Context, system, tenant, table string) (map[string]string, int, error)
}

// PadSequenceNumber left-pads a sequence number with zeros so that, in a sort key, string
// order is sequence order.
func PadSequenceNumber(s string) string { return padSeq(s) }

// CompareSequenceNumbers orders two sequence numbers of one shard (-1, 0, 1).
func CompareSequenceNumbers(a, b string) int { return compareSeq(a, b) }
