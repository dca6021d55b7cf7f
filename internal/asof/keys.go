// Package asof answers "who was in group G at instant T" and "which groups was user U in
// at T" exactly, from an interval index the projector keeps beside the read model
// (docs/history.md).
//
// Every membership is an interval [from, to) of epoch milliseconds: from is the instant
// of the change that added the member, to the instant of the change that removed it
// (absent while it lasts). The intervals live in the tenant's `_users` table under keys
// of their own (`asof#…`), in a centered interval tree over time: an interval is stored
// at exactly one node of a binary tree over [0, 2^42) ms — the highest node whose
// midpoint it contains — twice, once sorted by start and once by end. The members at T
// are then, at each node on the path from the root to T's leaf, the items sorted by start
// with start <= T (when T is left of the node's midpoint) or those sorted by end with end
// > T (when it is right of it): every item a read touches is part of the answer, however
// long the group's history. Levels a group never used are skipped (a `levels` item names
// the used ones).
//
// Users are named by the erasure ledger's hash of their id, never
// by username or id: an erasure removes the one item that maps the hash to the person
// (`life`), and what stays shows as an erased member.
package asof

import (
	"fmt"
	"time"

	"github.com/ssodir/ssodir/internal/identity"
)

// Depth is the tree's height: the root covers [0, 2^Depth) ms, about 139 years from 1970.
const Depth = 42

// Open is the end of an interval that has not ended.
const Open = int64(1) << Depth

// KeyPrefix begins the partition key of every item of the index.
const KeyPrefix = "asof#"

// MetaID / CoverageSK: the item that says from when the index is complete.
const (
	MetaID     = KeyPrefix + "meta"
	CoverageSK = "coverage"
)

// Hash is how the index names a user: the erasure ledger's hash of the user's id
// (identity.ErasedIDHash), so that an erasure that knows only the ledger finds it.
func Hash(userID string) string { return identity.ErasedIDHash(userID) }

// Millis is t in epoch milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

func ms13(v int64) string { return fmt.Sprintf("%013d", v) }

// node is the tree node an interval [a, b) is stored at: its level and its index at that
// level (the node covers [index<<level, (index+1)<<level)).
func node(a, b int64) (level int, index int64) {
	lo := int64(0)
	for l := Depth; l > 0; l-- {
		mid := lo + int64(1)<<(l-1)
		switch {
		case b <= mid:
			// entirely left of the midpoint
		case a > mid:
			lo = mid
		default:
			return l, lo >> l
		}
	}
	return 0, lo
}

// step is one node on the path from the root to instant t, and which of its two orders
// holds t's answers there.
type step struct {
	level int
	index int64
	// byStart: t is left of the midpoint, so the answers are the items with start <= t;
	// otherwise those with end > t.
	byStart bool
}

// path is the root-to-leaf path of t, root first.
func path(t int64) []step {
	out := make([]step, 0, Depth+1)
	lo := int64(0)
	for l := Depth; l > 0; l-- {
		mid := lo + int64(1)<<(l-1)
		s := step{level: l, index: lo >> l, byStart: t < mid}
		out = append(out, s)
		if t >= mid {
			lo = mid
		}
	}
	return append(out, step{level: 0, index: lo})
}

// Partitions of the index. g = group id, h = user hash.
func groupNode(g string, level int, index int64) string {
	return fmt.Sprintf("asof#g#%s#%d.%d", g, level, index)
}
func userNode(h string, level int, index int64) string {
	return fmt.Sprintf("asof#u#%s#%d.%d", h, level, index)
}
func groupRoot(g string) string { return "asof#g#" + g }
func userRoot(h string) string  { return "asof#u#" + h }

// userLife / groupLife: the one item per user (group) that names it.
func userLife(h string) string  { return "asof#uid#" + h }
func groupLife(g string) string { return "asof#gid#" + g }

// userName / groupName: which user (group) held a name, and when.
func userName(username string) string { return "asof#uname#" + username }
func groupName(key string) string     { return "asof#gname#" + key }

const (
	lifeSK   = "life"
	levelsSK = "levels"
	pairPfx  = "m#"
)

// startSK / endSK: an interval's two sort keys at its node; other is the other side's id
// (the user hash under a group, the group id under a user).
func startSK(a, b int64, other string) string { return "s#" + ms13(a) + "#" + ms13(b) + "#" + other }
func endSK(a, b int64, other string) string   { return "e#" + ms13(b) + "#" + ms13(a) + "#" + other }
