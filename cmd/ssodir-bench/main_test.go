package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTinyRun runs every scenario end to end at the tiny scale — real DynamoDB Local, the
// built services as processes, the raw baselines — and checks that each produced figures,
// a baseline and ratios, in the table and in valid JSON. It checks no performance figure:
// a benchmark never fails the test suite.
func TestTinyRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts DynamoDB Local and the services")
	}
	out := filepath.Join(t.TempDir(), "bench-results.json")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-scale", "tiny", "-out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("results are not the documented JSON: %v", err)
	}
	if rep.Scale != "tiny" || rep.Machine.Cores < 1 || rep.Machine.Go == "" {
		t.Errorf("scale %q, machine %+v", rep.Scale, rep.Machine)
	}
	want := []string{"create users c=1", "create users c=8", "update users",
		"lag 25% load, X-Min-Version", "lag 25% load, polling", "lag 75% load, X-Min-Version", "lag 75% load, polling",
		"lag 25% load, X-Min-Version, SSO_STREAM_POLL", "lag 25% load, polling, SSO_STREAM_POLL",
		"lag 75% load, X-Min-Version, SSO_STREAM_POLL", "lag 75% load, polling, SSO_STREAM_POLL",
		"GET one user", "list by email", "name prefix", "user's groups", "3-page walk", "projector catch-up", "projector writes", "replay", "keycloak reconcile",
		"keycloak reconcile of an unchanged", "keycloak reconcile of a", "import users n=40 c=8", "import users n=40 c=8, one of 3 groups",
		"import users n=40 c=8, all 3 groups", "scim sync", "scim walk", "tenants, 4 idle", "capacity", "erase a user",
		"erasure filter", "dead-letter reads", "as-of members", "as-of members", "events feed walk", "events webhook latency"}
	if len(rep.Scenarios) != len(want) {
		t.Errorf("%d results, want %d", len(rep.Scenarios), len(want))
	}
	for i, s := range rep.Scenarios {
		if i < len(want) && !strings.HasPrefix(s.Name, want[i]) {
			t.Errorf("result %d is %q, want %q", i, s.Name, want[i])
		}
		if len(s.Figures) == 0 || len(s.Baseline) == 0 || len(s.Ratios) == 0 || len(s.Repetitions) != 1 {
			t.Errorf("%s: figures %v, baseline %v, ratios %v, %d repetitions", s.Name, s.Figures, s.Baseline, s.Ratios, len(s.Repetitions))
		}
		for k, v := range s.Figures {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Errorf("%s: figure %s = %v", s.Name, k, v)
			}
		}
		if _, ok := s.Spread.Figures[k(s)]; !ok {
			t.Errorf("%s: no spread of %s", s.Name, k(s))
		}
		if !strings.Contains(stdout.String(), s.Name) {
			t.Errorf("the table lacks %q:\n%s", s.Name, stdout.String())
		}
	}
	for _, s := range rep.Scenarios {
		if !strings.HasPrefix(s.Name, "events webhook latency") {
			continue
		}
		for _, f := range []string{"throughput_per_s", "projector_in_flight", "projector_apply_ms"} {
			if s.Figures[f] <= 0 {
				t.Errorf("%s: %s = %v, want the window's measure", s.Name, f, s.Figures[f])
			}
		}
	}
	for _, p := range []string{"command-api", "query-api", "projector", "keycloak-sync", "dynamodb-local", "ssodir-bench"} {
		if rep.RSSPeakBytes[p] <= 0 {
			t.Errorf("no peak RSS of %s: %v", p, rep.RSSPeakBytes)
		}
	}
}

// k is a result's main figure: a rate, for latencies the p99, for capacity a create's,
// for the SCIM walk its last page's items.
func k(s *result) string {
	if strings.HasPrefix(s.Name, "erasure filter") {
		return "reads_per_record"
	}
	if strings.HasPrefix(s.Name, "erase") {
		return "wall_s"
	}
	if strings.HasPrefix(s.Name, "dead-letter") {
		return "reads_per_batch"
	}
	if strings.HasPrefix(s.Name, "scim walk") {
		return "items"
	}
	if strings.HasPrefix(s.Name, "as-of") {
		return "walk_ms"
	}
	for _, key := range []string{"per_s", "p99_ms"} {
		if _, ok := s.Figures[key]; ok {
			return key
		}
	}
	return "create.command-api.wcu"
}

// TestPipelineFigures: given a window of 1,000 changes whose last arrived 20 s after its
// start, while the projector's handlers spent 600 s on 5,000 records, when its pipeline
// figures are taken, then it sustained 50 changes/s, held 30 records at once and took
// 120 ms a record; a window of no time has none.
func TestPipelineFigures(t *testing.T) {
	got := pipelineFigures(1000, 20*time.Second, applyMeter{seconds: 100, records: 2000}, applyMeter{seconds: 700, records: 7000})
	want := map[string]float64{"throughput_per_s": 50, "projector_in_flight": 30, "projector_apply_ms": 120}
	if !maps.Equal(got, want) {
		t.Errorf("figures %v, want %v", got, want)
	}
	if got := pipelineFigures(10, 0, applyMeter{}, applyMeter{}); len(got) != 0 {
		t.Errorf("a window of no time: %v", got)
	}
}

// TestThreadTimeSinceLeavesOutThreadsThatEnded: given compiler threads 1 and 2 at 5 s and
// 3 s, then thread 2 ended (the JVM ends idle compiler threads), thread 1 at 6 s and a new
// thread 3 at 1 s, the time since is 2 s (1 s of thread 1, all of thread 3), never less
// than nothing: the difference of the sums, -1 s, was what TestTinyRun once read as a
// negative jit_ms_per_op.
func TestThreadTimeSinceLeavesOutThreadsThatEnded(t *testing.T) {
	before := threadTimes{1: 5 * time.Second, 2: 3 * time.Second}
	after := threadTimes{1: 6 * time.Second, 3: time.Second}
	if got := after.since(before); got != 2*time.Second {
		t.Errorf("since = %v, want 2s", got)
	}
	if got := (threadTimes{}).since(before); got != 0 {
		t.Errorf("every thread ended: since = %v, want 0", got)
	}
}

func TestCPULine(t *testing.T) {
	got := cpuLine(
		map[string]float64{"per_s": 100, "cpu_ms_per_op.query-api": 0.25, "cpu_ms_per_op.dynamodb-local": 1.5, "cpu_ms_per_op.ssodir-bench": 0.1},
		map[string]float64{"per_s": 120, "cpu_ms_per_op.dynamodb-local": 1.25, "cpu_ms_per_op.ssodir-bench": 0.3},
	)
	want := "query-api 0.250, dynamodb-local 1.500 → 1.250, ssodir-bench 0.100 → 0.300"
	if got != want {
		t.Fatalf("cpuLine = %q, want %q", got, want)
	}
	if got := cpuLine(map[string]float64{"per_s": 1}, nil); got != "" {
		t.Fatalf("cpuLine without CPU figures = %q, want empty", got)
	}
}

// A scenario that waits for ever, even after its context ends (a connection to a double
// that never answers), fails the run with a message once its deadline passes.
func TestScenarioDeadline(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	s := scenario{name: "stuck", run: func(ctx context.Context, b *bench, sc scale) ([]*result, error) {
		<-hang
		return nil, nil
	}}
	errc := make(chan error, 1)
	go func() {
		_, err := runScenario(context.Background(), s, nil, scale{Deadline: 50 * time.Millisecond})
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "scenario stuck did not finish within its deadline of 50ms") {
			t.Fatalf("err = %v, want the deadline named", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("runScenario waited on a hung scenario")
	}

	// One that honours its context returns its own error with the deadline's message.
	s.run = func(ctx context.Context, b *bench, sc scale) ([]*result, error) {
		<-ctx.Done()
		return nil, errors.New("GET /users: context deadline exceeded")
	}
	_, err := runScenario(context.Background(), s, nil, scale{Deadline: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "deadline of 50ms") || !strings.Contains(err.Error(), "GET /users") {
		t.Fatalf("err = %v", err)
	}
}
