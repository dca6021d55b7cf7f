package mappings_test

import (
	"testing"

	"github.com/ssodir/ssodir/internal/mappings"
	"github.com/ssodir/ssodir/internal/mappings/mappingstest"
)

// oldQueue is the shared failure queue of an older version, which an upgrade deletes.
const oldQueue = "arn:aws:sqs:eu-west-1:123456789012:ssodir-prod-StreamFailures"

// upgraded makes a stage's mappings as the older version did (every function's records
// given up to the shared queue), and returns the fake and the new version's Mappings.
func upgraded(t *testing.T, streams ...string) (*mappingstest.Fake, *mappings.Mappings) {
	t.Helper()
	f := mappingstest.New()
	t.Cleanup(f.Close)
	old := mappings.New(client(f), mappings.Config{Functions: []string{projectorARN, syncARN},
		FailureDestinations: map[string]string{projectorARN: oldQueue, syncARN: oldQueue}})
	for _, s := range streams {
		if err := old.Ensure(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	return f, mappings.New(client(f), mappings.Config{Functions: []string{projectorARN, syncARN},
		FailureDestinations: map[string]string{projectorARN: projectorQueue, syncARN: syncQueue}})
}

func wantQueues(t *testing.T, f *mappingstest.Fake, n int) {
	t.Helper()
	ms := f.Mappings()
	if len(ms) != n {
		t.Fatalf("%d mappings, want %d", len(ms), n)
	}
	for _, m := range ms {
		want := map[string]string{projectorARN: projectorQueue, syncARN: syncQueue}[m.FunctionArn]
		if m.OnFailure != want {
			t.Errorf("mapping of %s to %s gives up to %q, want %q", m.EventSourceArn, m.FunctionArn, m.OnFailure, want)
		}
	}
}

// A stage upgraded from the version with one shared StreamFailures queue: Ensure, finding a
// tenant's mappings exist, moves them to each consumer's own queue in place, and leaves
// alone a mapping that already has this version's settings.
func TestEnsureUpdatesAMappingAnOlderVersionMade(t *testing.T) {
	s := streamARN("p_s_t_user_commands", 0)
	f, m := upgraded(t, s)
	if err := m.Ensure(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	wantQueues(t, f, 2)
	if n := f.Updates(); n != 2 {
		t.Fatalf("%d updates, want 2", n)
	}
	if err := m.Ensure(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	if n := f.Updates(); n != 2 {
		t.Errorf("%d updates after ensuring mappings with this version's settings, want none more", n)
	}
}

// The mappings of tenants nobody provisions again follow the upgrade through the scheduled
// check, which reads every mapping anyway; a mapping Lambda is still creating is left for
// the next check.
func TestTheCheckUpdatesEveryMappingAnOlderVersionMade(t *testing.T) {
	const tenants = 3
	var streams []string
	for i := range tenants {
		streams = append(streams, streamARN("p_s_t_user_commands", i))
	}
	f, m := upgraded(t, streams...)
	busy := f.Mappings()[0]
	f.SetState(busy.UUID, "Creating", "")
	c, err := m.Check(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if c.Mappings != 2*tenants || c.Updated != 2*tenants-1 {
		t.Fatalf("checked %+v, want %d mappings and %d updated", c, 2*tenants, 2*tenants-1)
	}
	f.SetState(busy.UUID, "Enabled", "")
	if c, err = m.Check(t.Context()); err != nil || c.Updated != 1 {
		t.Fatalf("second check %+v, %v: want the one left updated", c, err)
	}
	wantQueues(t, f, 2*tenants)
	if c, err = m.Check(t.Context()); err != nil || c.Updated != 0 {
		t.Fatalf("third check %+v, %v: want nothing to update", c, err)
	}
}
