package streams

import (
	"slices"
	"strings"
)

// leaseView is what a balance round decides on: a snapshot taken under the subscriber's
// lock, so that the decision itself is a pure function (planLeases) of it.
type leaseView struct {
	me string
	// byStream is every known lease row, by stream ARN and shard id.
	byStream map[string]map[string]leaseRow
	// listed is, for each followed stream listed at least once, its last DescribeStream
	// answer (shard → parent).
	listed map[string]map[string]string
	// alive is the set of live owners, this process included.
	alive map[string]bool
	// running holds the lease keys this process has a worker for (stopping or not).
	running map[string]bool
	// held counts the leases this process holds or is being handed: running workers not
	// stopping, plus handovers it asked for.
	held int
}

// leasePlan is a balance round's decision.
type leasePlan struct {
	// eligible are the shards that may be read now: unfinished, of a followed stream, with
	// the parent finished (or gone from both the stream and the lease table).
	eligible []leaseRow
	// counts is how many eligible leases each live peer holds.
	counts map[string]int
	// fair is this process's fair share of the eligible leases.
	fair int
	// take are the leases to acquire, at most fair-held of them: first those the lease
	// table says are ours but that have no worker (our acquire's answer was lost), then
	// free ones, then those of dead owners. Free and dead ones are in key order; the
	// caller shuffles them so that peers starting together do not race for the same.
	mine, free, dead []leaseRow
}

// planLeases decides a balance round from a snapshot.
func planLeases(v leaseView) leasePlan {
	var p leasePlan
	for arn, listed := range v.listed {
		for _, r := range v.byStream[arn] {
			if r.finished() || !parentDone(r, v.byStream[arn], listed) {
				continue
			}
			p.eligible = append(p.eligible, r)
		}
	}
	slices.SortFunc(p.eligible, func(a, b leaseRow) int { return strings.Compare(a.key(), b.key()) })
	p.counts = map[string]int{}
	for _, r := range p.eligible {
		if r.Owner != "" && r.Owner != v.me && v.alive[r.Owner] {
			p.counts[r.Owner]++
		}
	}
	liveOwners := max(1, len(v.alive))
	p.fair = (len(p.eligible) + liveOwners - 1) / liveOwners
	for _, r := range p.eligible {
		if v.running[r.key()] {
			continue
		}
		switch {
		case r.Owner == v.me:
			p.mine = append(p.mine, r)
		case r.Owner == "":
			p.free = append(p.free, r)
		case !v.alive[r.Owner]:
			p.dead = append(p.dead, r)
		}
	}
	return p
}

// want is the leases to acquire, given the free and dead ones in the order to try them.
func (p leasePlan) want(held int) []leaseRow {
	want := slices.Concat(p.mine, p.free, p.dead)
	return want[:min(len(want), max(0, p.fair-held))]
}
