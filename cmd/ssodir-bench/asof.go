package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/queries"
	"github.com/ssodir/ssodir/internal/queries/querytest"
)

// The as-of scenario: one group with asOfChanges membership changes among asOfUsers users
// (each change adds a user who is out or removes one who is in, so about half are members
// at any instant), a minute apart.
const (
	asOfUsers   = 1000
	asOfChanges = 10_000
	asOfLimit   = 100
)

// benchAsOf compares reading a group's members at an instant (GET …/members?as_of=,
// queries.Service.GroupMembersAsOf: the interval index) with reading its current members
// (GET …/members, queries.Service.GroupMembers: the read model's GroupMemberGSI), both
// walked page by page to the end, in-process against the same DynamoDB Local. Target: the
// as-of walk within 2× the current list's, however long the group's history.
func benchAsOf(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	e, err := b.newEnv(ctx, false)
	if err != nil {
		return nil, err
	}
	defer e.close()
	f, err := querytest.Setup(ctx, e.db, e.names, benchSystem, benchTenant)
	if err != nil {
		return nil, err
	}
	changes, users := asOfChanges, asOfUsers
	switch sc.Name {
	case "small": // a tenth, as the scale says
		changes, users = asOfChanges/10, asOfUsers/5
	case "tiny":
		changes, users = 500, 100
	}
	t := time.Now()
	es := []events.Envelope{f.CreateGroup("audited", "")}
	for i := range users {
		es = append(es, f.CreateUser(events.User{Username: fmt.Sprintf("member%04d", i)}))
	}
	in := map[int]bool{}
	rng := rand.New(rand.NewPCG(38, 38))
	var times []time.Time
	for range changes {
		u := rng.IntN(users)
		name := fmt.Sprintf("member%04d", u)
		if in[u] {
			es = append(es, f.RemoveMember("audited", name))
		} else {
			es = append(es, f.AddMember("audited", name))
		}
		in[u] = !in[u]
		times = append(times, es[len(es)-1].OccurredAt)
	}
	p := projections.New(e.db, projections.Options{})
	x := asof.New(e.db)
	for chunk := range slices.Chunk(es, 500) {
		if err := p.ApplyBatch(ctx, f.Tables(), chunk); err != nil {
			return nil, err
		}
		if err := x.ApplyBatch(ctx, f.Tables().Users, chunk); err != nil {
			return nil, err
		}
	}
	if err := asof.MarkCoverage(ctx, e.db, f.Tables().Users, asof.Millis(querytest.Start)); err != nil {
		return nil, err
	}
	b.logf("   seeded a group with %d membership changes among %d users (%d members now) in %.0fs", changes, users, len(in)-countFalse(in), time.Since(t).Seconds())

	svc, err := queries.New(e.db, e.names, bytes.Repeat([]byte{38}, 32), queries.Options{})
	if err != nil {
		return nil, err
	}
	walkCurrent := func(ctx context.Context) (int, error) {
		n, cursor := 0, ""
		for {
			page, err := svc.GroupMembers(ctx, benchSystem, benchTenant, "audited", queries.PageRequest{Limit: asOfLimit, Cursor: cursor})
			if err != nil {
				return 0, err
			}
			n += len(page.Items)
			if page.NextCursor == nil {
				return n, nil
			}
			cursor = *page.NextCursor
		}
	}
	walkAt := func(at time.Time) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			n, cursor := 0, ""
			for {
				page, err := svc.GroupMembersAsOf(ctx, benchSystem, benchTenant, "audited", at, queries.PageRequest{Limit: asOfLimit, Cursor: cursor})
				if err != nil {
					return 0, err
				}
				n += len(page.Items)
				if page.Next == nil {
					return n, nil
				}
				cursor = *page.Next
			}
		}
	}
	reps := max(sc.Reps, 1) * 5
	var results []*result
	for _, c := range []struct {
		name string
		at   time.Time
	}{
		{"after the last change", times[len(times)-1]},
		{"halfway through the history", times[len(times)/2]},
	} {
		r := &result{
			Name: fmt.Sprintf("as-of members, %s changes, %s", quantity(changes), c.name), Unit: "ms", BaselineUnit: "ms",
			What:         fmt.Sprintf("queries.Service.GroupMembersAsOf in-process, every page of %d (the interval index), one walk", asOfLimit),
			BaselineWhat: fmt.Sprintf("queries.Service.GroupMembers in-process, every page of %d (the current members, GroupMemberGSI), one walk", asOfLimit),
			Target:       &target{Of: "ratios", Key: "walk_ms", Max: ptr(2.0)},
			Notes:        []string{"walk_ms is the median of the repetition's walks, as-of and current walks alternating in pairs; members counts what each walk returned"},
		}
		for range sc.Reps {
			fig, base, err := timeWalkPairs(ctx, reps, walkAt(c.at), walkCurrent)
			if err != nil {
				return nil, err
			}
			r.add(fig, base)
		}
		results = append(results, r)
	}
	return results, nil
}

func countFalse(m map[int]bool) int {
	n := 0
	for _, v := range m {
		if !v {
			n++
		}
	}
	return n
}

// timeWalkPairs walks a and b n times each, in pairs whose order alternates (a then b,
// then b then a), so that both see the same moments of a loaded machine, and reports each
// side's median walk and its size.
func timeWalkPairs(ctx context.Context, n int, a, b func(context.Context) (int, error)) (map[string]float64, map[string]float64, error) {
	walks := [2]func(context.Context) (int, error){a, b}
	var lats [2][]time.Duration
	var members [2]int
	for i := range n {
		for j := range 2 {
			side := j
			if i%2 == 1 {
				side = 1 - j
			}
			t := time.Now()
			k, err := walks[side](ctx)
			if err != nil {
				return nil, nil, err
			}
			lats[side] = append(lats[side], time.Since(t))
			members[side] = k
		}
	}
	var out [2]map[string]float64
	for side := range 2 {
		slices.Sort(lats[side])
		out[side] = map[string]float64{"walk_ms": ms(lats[side][len(lats[side])/2]), "members": float64(members[side])}
	}
	return out[0], out[1], nil
}
