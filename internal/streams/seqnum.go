package streams

import "strings"

// seqLen is the longest sequence number DynamoDB Streams hands out (21 to 40 digits).
const seqLen = 40

// compareSeq orders two sequence numbers as the unsigned integers they are. They are
// decimal strings of varying length (DynamoDB Local hands out 21 digits from one counter
// shared by all tables, AWS up to 40), so a plain string comparison would put "9" after
// "10". Comparing the digit strings by length first is the big-integer comparison
// without allocating a big.Int per record.
func compareSeq(a, b string) int {
	a = strings.TrimLeft(a, "0")
	b = strings.TrimLeft(b, "0")
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return strings.Compare(a, b)
}

// padSeq left-pads a sequence number with zeros so that, in a sort key, string order is
// sequence order.
func padSeq(s string) string {
	if len(s) >= seqLen {
		return s
	}
	return strings.Repeat("0", seqLen-len(s)) + s
}

// validSeq reports whether s looks like a sequence number; anything else (a fake, a
// corrupted checkpoint) is rejected before it reaches GetShardIterator, because DynamoDB
// Local answers a made-up sequence number with HTTP 500.
func validSeq(s string) bool {
	if s == "" || len(s) > seqLen {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
