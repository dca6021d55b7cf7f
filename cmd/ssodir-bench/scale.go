package main

import (
	"fmt"
	"time"
)

// scale sizes a run. full is the sizes; small is a tenth of them with shorter
// windows; tiny is seconds per scenario, for the smoke test.
type scale struct {
	Name string
	// Reps is how often every figure and its baseline are measured.
	Reps int
	// Warmup is spent on the scenario's operations before anything is measured (a cold JVM
	// is half as fast); Window is one measuring window of a rate scenario.
	Warmup, Window time.Duration
	// CreateConcurrency are the concurrencies of the create scenario.
	CreateConcurrency []int
	// UpdateUsers are seeded for the update scenario.
	UpdateUsers int
	// ReadUsers and ReadGroups are the read model of the read scenarios; every user is in
	// two groups.
	ReadUsers, ReadGroups int
	// CatchupCommands are accepted while the projector is stopped.
	CatchupCommands int
	// ReplayUsers each have ReplayHistory history records (full: the 100,000 users
	// and 1,000,000 records; DynamoDB Local grows to about 9 GiB of native memory for them).
	// small replays a hundredth, not a tenth: a tenth alone takes over two of its three
	// minutes. -replay-users sets it.
	ReplayUsers, ReplayHistory int
	// KeycloakUsers are reconciled into an empty realm, in KeycloakGroups groups.
	KeycloakUsers, KeycloakGroups int
	// LagSamplesPerS is how many commands per second have their lag followed (following
	// every one would load the query API with polls).
	LagSamplesPerS float64
	// Tenants are the tenant counts of the tenants scenario. DynamoDB Local here holds
	// about 250 tenants (750 tables, 21 GSIs each) before table creation and its heap
	// make a run take too long for a 2-core machine; full stops there.
	Tenants []int
	// Deadline bounds each scenario: past it the run fails with a message naming the
	// scenario instead of waiting on a request or a process that never answers.
	// -deadline sets it.
	Deadline time.Duration
	// EraseOthers are the items of other users in the tenant of the erase scenario (the
	// issue's 20,000); -erase-others sets it.
	EraseOthers int
	// WebhookRate overrides the events scenario's webhook rate (-webhook-rate; 0: webhookRate).
	WebhookRate float64
	// CountRequests puts a tally between DynamoDB Local and the services of the webhook
	// latency (-count-requests).
	CountRequests bool
	// FreshDB starts a DynamoDB Local per scenario (DYNAMODB-LOCAL.md, trap 1); the tiny
	// scale shares one to stay fast.
	FreshDB bool
}

var scales = map[string]scale{
	"full": {
		Name: "full", Reps: 3, Warmup: 3 * time.Second, Window: 5 * time.Second,
		CreateConcurrency: []int{1, 8, 32}, UpdateUsers: 2000,
		ReadUsers: 10000, ReadGroups: 100, CatchupCommands: 20000,
		ReplayUsers: 100000, ReplayHistory: 10, KeycloakUsers: 10000, KeycloakGroups: 50,
		LagSamplesPerS: 40, Tenants: []int{100, 250}, FreshDB: true, Deadline: 2 * time.Hour, EraseOthers: 20000,
	},
	"small": {
		Name: "small", Reps: 3, Warmup: 2 * time.Second, Window: 600 * time.Millisecond,
		CreateConcurrency: []int{1, 8, 32}, UpdateUsers: 400,
		ReadUsers: 1000, ReadGroups: 10, CatchupCommands: 2000,
		ReplayUsers: 1000, ReplayHistory: 10, KeycloakUsers: 1000, KeycloakGroups: 5,
		LagSamplesPerS: 40, Tenants: []int{100}, FreshDB: true, Deadline: 15 * time.Minute, EraseOthers: 20000,
	},
	"tiny": {
		Name: "tiny", Reps: 1, Warmup: 100 * time.Millisecond, Window: 300 * time.Millisecond,
		CreateConcurrency: []int{1, 8}, UpdateUsers: 16,
		ReadUsers: 70, ReadGroups: 3, CatchupCommands: 20,
		ReplayUsers: 20, ReplayHistory: 3, KeycloakUsers: 20, KeycloakGroups: 2,
		LagSamplesPerS: 20, Tenants: []int{4}, FreshDB: false, Deadline: 5 * time.Minute, EraseOthers: 1000,
	},
}

func scaleNamed(name string) (scale, error) {
	s, ok := scales[name]
	if !ok {
		return scale{}, fmt.Errorf("unknown scale %q (full, small or tiny)", name)
	}
	return s, nil
}
