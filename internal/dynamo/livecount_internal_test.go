package dynamo

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// TestLiveCountItems: only id lookups count; a change that writes and removes the same
// id's lookup (a rename's shape) moves nothing, and moves on one shard are one update.
func TestLiveCountItems(t *testing.T) {
	id := func(kind events.AggregateKind, v string) commands.Lookup {
		return commands.Lookup{Kind: kind, By: commands.LookupByID, Value: v, ID: v, Key: "k-" + v}
	}
	ext := commands.Lookup{Kind: events.KindUser, By: commands.LookupByExternalID, Value: "e", ID: "u1", Key: "k"}
	cases := []struct {
		name     string
		put, del []commands.Lookup
		want     map[string]string
	}{
		{"create", []commands.Lookup{id(events.KindUser, "u1"), ext}, nil, map[string]string{shardOf(events.KindUser, "u1"): "1"}},
		{"delete", nil, []commands.Lookup{id(events.KindGroup, "g1"), ext}, map[string]string{shardOf(events.KindGroup, "g1"): "-1"}},
		{"external id moved", []commands.Lookup{ext}, []commands.Lookup{ext}, map[string]string{}},
		{"same id written and removed", []commands.Lookup{id(events.KindUser, "u1")}, []commands.Lookup{id(events.KindUser, "u1")}, map[string]string{}},
	}
	for _, c := range cases {
		got := map[string]string{}
		for _, it := range liveCountItems("t", c.put, c.del) {
			u := it.Update
			got[getS(u.Key, "id")] = u.ExpressionAttributeValues[":d"].(*types.AttributeValueMemberN).Value
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("%s: updates %v, want %v", c.name, got, c.want)
		}
	}
}

func shardOf(kind events.AggregateKind, id string) string {
	return getS(liveShardKey(kind, liveShard(id)), "id")
}

// TestIDBlocks: the blocks cut the ids' order into ranges: a UUID's block is its first
// three hex digits, an id of any other shape falls into the range its characters sort
// into, and a block's ids are those from its start on; a change's shard update counts the
// blocks of the ids it writes and removes.
func TestIDBlocks(t *testing.T) {
	if b := idBlock("abc12345-0000-4000-8000-000000000000"); b != 0xabc || blockStart(b) != "abc" {
		t.Errorf("a UUID's block: %x (%s), want abc", b, blockStart(b))
	}
	ids := []string{"", "-x", "0", "000", "00g", "09Z", "0a", "ABC", "Zed", "a", "abc", "abcd", "abd", "fff", "fffz", "g", "\xff"}
	slices.Sort(ids)
	prev := 0
	for _, id := range ids {
		b := idBlock(id)
		if b < prev || b < 0 || b >= idBlocks {
			t.Errorf("%q: block %d after %d: the blocks do not follow the order", id, b, prev)
		}
		if b > 0 && blockStart(b) > id || b+1 < idBlocks && blockStart(b+1) <= id {
			t.Errorf("%q: block %d (from %q) does not hold it", id, b, blockStart(b))
		}
		prev = b
	}

	u := commands.Lookup{Kind: events.KindUser, By: commands.LookupByID, Value: "abc1", ID: "abc1", Key: "k"}
	v := commands.Lookup{Kind: events.KindUser, By: commands.LookupByID, Value: "11c2", ID: "11c2", Key: "k2"}
	items := liveCountItems("t", []commands.Lookup{u}, []commands.Lookup{v})
	if len(items) != 1 || liveShard(u.ID) != liveShard(v.ID) {
		t.Fatalf("two ids of one shard (%d, %d): %d updates, want 1", liveShard(u.ID), liveShard(v.ID), len(items))
	}
	up := items[0].Update
	got := map[string]string{}
	for name, attr := range up.ExpressionAttributeNames {
		if strings.HasPrefix(name, "#b") {
			got[attr] = up.ExpressionAttributeValues[":"+name[1:]].(*types.AttributeValueMemberN).Value
		}
	}
	want := map[string]string{"babc": "1", "b11c": "-1"}
	if !maps.Equal(got, want) || up.ExpressionAttributeValues[":d"].(*types.AttributeValueMemberN).Value != "0" {
		t.Errorf("block updates %v (n by %v) in %q, want %v (n by 0)", got, up.ExpressionAttributeValues[":d"], *up.UpdateExpression, want)
	}
}
