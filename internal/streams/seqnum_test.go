package streams

import "testing"

func TestSequenceNumbersCompareAsIntegers(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"9", "10", -1},
		{"000000000000000000030", "29", 1},
		{"100000000000000000000", "100000000000000000000", 0},
		{"4421584500000000017450439091", "4421584500000000017450439092", -1},
		{"99999999999999999999999999999999999999", "100000000000000000000", 1},
		{"000000000000000000000", "0", 0},
	} {
		if got := compareSeq(c.a, c.b); got != c.want {
			t.Errorf("compareSeq(%s, %s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := compareSeq(c.b, c.a); got != -c.want {
			t.Errorf("compareSeq(%s, %s) = %d, want %d", c.b, c.a, got, -c.want)
		}
	}
}

func TestPaddedSequenceNumbersSortLikeTheNumbers(t *testing.T) {
	if !(padSeq("99") < padSeq("100")) {
		t.Errorf("padded 99 sorts after padded 100: %s, %s", padSeq("99"), padSeq("100"))
	}
	if len(padSeq("1")) != seqLen {
		t.Errorf("padSeq(1) has length %d, want %d", len(padSeq("1")), seqLen)
	}
}
