package streams

import (
	"slices"
	"testing"
)

func TestPlanLeases(t *testing.T) {
	row := func(arn, shard, parent, owner, checkpoint string) leaseRow {
		return leaseRow{StreamARN: arn, ShardID: shard, Parent: parent, Owner: owner, Checkpoint: checkpoint}
	}
	byStream := func(rows ...leaseRow) map[string]map[string]leaseRow {
		m := map[string]map[string]leaseRow{}
		for _, r := range rows {
			if m[r.StreamARN] == nil {
				m[r.StreamARN] = map[string]leaseRow{}
			}
			m[r.StreamARN][r.ShardID] = r
		}
		return m
	}
	shards := func(rs []leaseRow) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.StreamARN+"/"+r.ShardID)
		}
		return out
	}
	cases := []struct {
		name             string
		view             leaseView
		eligible         []string
		fair             int
		mine, free, dead []string
		want             []string
	}{
		{
			name: "a lone process takes every free shard",
			view: leaseView{me: "a", alive: map[string]bool{"a": true},
				byStream: byStream(row("s1", "x", "", "", ""), row("s1", "y", "", "", "")),
				listed:   map[string]map[string]string{"s1": {"x": "", "y": ""}}},
			eligible: []string{"s1/x", "s1/y"}, fair: 2, free: []string{"s1/x", "s1/y"}, want: []string{"s1/x", "s1/y"},
		},
		{
			name: "two live processes share four shards two and two",
			view: leaseView{me: "a", alive: map[string]bool{"a": true, "b": true},
				byStream: byStream(row("s1", "1", "", "b", ""), row("s1", "2", "", "b", ""), row("s1", "3", "", "", ""), row("s1", "4", "", "", "")),
				listed:   map[string]map[string]string{"s1": {}}},
			eligible: []string{"s1/1", "s1/2", "s1/3", "s1/4"}, fair: 2, free: []string{"s1/3", "s1/4"}, want: []string{"s1/3", "s1/4"},
		},
		{
			name: "a finished shard and a child whose parent is unfinished are not eligible",
			view: leaseView{me: "a", alive: map[string]bool{"a": true},
				byStream: byStream(row("s1", "done", "", "", shardEnd), row("s1", "parent", "", "", "123"), row("s1", "child", "parent", "", "")),
				listed:   map[string]map[string]string{"s1": {"parent": "", "child": "parent"}}},
			eligible: []string{"s1/parent"}, fair: 1, free: []string{"s1/parent"}, want: []string{"s1/parent"},
		},
		{
			name: "a child whose parent is neither listed nor known may be read",
			view: leaseView{me: "a", alive: map[string]bool{"a": true},
				byStream: byStream(row("s1", "child", "trimmed", "", "")),
				listed:   map[string]map[string]string{"s1": {"child": "trimmed"}}},
			eligible: []string{"s1/child"}, fair: 1, free: []string{"s1/child"}, want: []string{"s1/child"},
		},
		{
			name: "shards of a stream not followed (or not yet listed) are left alone",
			view: leaseView{me: "a", alive: map[string]bool{"a": true},
				byStream: byStream(row("gone", "x", "", "", "")),
				listed:   map[string]map[string]string{}},
			fair: 0,
		},
		{
			name: "ours without a worker first, then free, then a dead owner's, up to the fair share",
			view: leaseView{me: "a", alive: map[string]bool{"a": true, "b": true},
				byStream: byStream(row("s1", "1", "", "dead", ""), row("s1", "2", "", "", ""), row("s1", "3", "", "a", ""),
					row("s1", "4", "", "b", ""), row("s1", "5", "", "b", ""), row("s1", "6", "", "b", "")),
				listed: map[string]map[string]string{"s1": {}}},
			eligible: []string{"s1/1", "s1/2", "s1/3", "s1/4", "s1/5", "s1/6"}, fair: 3,
			mine: []string{"s1/3"}, free: []string{"s1/2"}, dead: []string{"s1/1"}, want: []string{"s1/3", "s1/2", "s1/1"},
		},
		{
			name: "leases with a worker are not taken again, and what is held counts against the share",
			view: leaseView{me: "a", alive: map[string]bool{"a": true}, running: map[string]bool{shardKey("s1", "1"): true}, held: 1,
				byStream: byStream(row("s1", "1", "", "a", ""), row("s1", "2", "", "", "")),
				listed:   map[string]map[string]string{"s1": {}}},
			eligible: []string{"s1/1", "s1/2"}, fair: 2, free: []string{"s1/2"}, want: []string{"s1/2"},
		},
		{
			name: "a process at its share takes nothing",
			view: leaseView{me: "a", alive: map[string]bool{"a": true, "b": true}, held: 1,
				byStream: byStream(row("s1", "1", "", "a", ""), row("s1", "2", "", "", "")),
				listed:   map[string]map[string]string{"s1": {}}, running: map[string]bool{shardKey("s1", "1"): true}},
			eligible: []string{"s1/1", "s1/2"}, fair: 1, free: []string{"s1/2"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := planLeases(c.view)
			check := func(what string, got []leaseRow, want []string) {
				t.Helper()
				if !slices.Equal(shards(got), want) {
					t.Errorf("%s: %v, want %v", what, shards(got), want)
				}
			}
			check("eligible", p.eligible, c.eligible)
			check("mine", p.mine, c.mine)
			check("free", p.free, c.free)
			check("dead", p.dead, c.dead)
			check("want", p.want(c.view.held), c.want)
			if p.fair != c.fair {
				t.Errorf("fair %d, want %d", p.fair, c.fair)
			}
		})
	}
}
