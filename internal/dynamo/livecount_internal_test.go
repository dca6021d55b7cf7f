package dynamo

import (
	"maps"
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
