// Command ssodir-bench measures ssodir against the DynamoDB Local it runs on: every
// scenario is measured together with a raw baseline — the same DynamoDB Local, the same
// item shapes, the same concurrency, issued directly with the AWS SDK — and reported as a
// ratio to it. It builds the services, starts them as processes, prints a table and writes
// the same figures as JSON. See README.md, "Performance".
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ssodir-bench:", err)
		os.Exit(1)
	}
}

// scenario measures one row group of the table.
type scenario struct {
	name string
	run  func(ctx context.Context, b *bench, sc scale) ([]*result, error)
}

var scenarios = []scenario{
	{"create", benchCreate},
	{"update", benchUpdate},
	{"lag", benchLag},
	{"reads", benchReads},
	{"catchup", benchCatchup},
	{"replay", benchReplay},
	{"keycloak", benchKeycloak},
	{"import", benchImport},
	{"scim", benchSCIM},
	{"tenants", benchTenants},
	{"capacity", benchCapacity},
	{"erasure", benchErasure},
	{"deadletters", benchDeadLetters},
	{"asof", benchAsOf},
	{"events", benchEvents},
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ssodir-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scaleName := fs.String("scale", "full", "full, small (a tenth, under 3 minutes) or tiny (smoke test)")
	out := fs.String("out", "bench-results.json", "where to write the JSON results")
	only := fs.String("only", "", "comma-separated scenarios to run (default all: "+names()+")")
	reps := fs.Int("reps", 0, "repetitions per figure (default: the scale's)")
	deadline := fs.Duration("deadline", 0, "fail a scenario that has not finished after this long (default: the scale's: full 2h, small 15m, tiny 5m)")
	replayUsers := fs.Int("replay-users", 0, "users of the replay scenario, 10 history records each (default: the scale's)")
	eraseOthers := fs.Int("erase-others", 0, "items of other users in the erase scenario's tenant (default: the scale's: 20,000; tiny 1,000)")
	webhookRate := fs.Float64("webhook-rate", 0, "changes a second of the events scenario's webhook latency (default: the issue's 100; tiny 20): a lower rate shows what the machine sustains within the target")
	countRequests := fs.Bool("count-requests", false, "the events scenario's webhook latency also counts, through a proxy, the requests and written items a change costs the command API and the projector, by operation and table (the proxy costs the bench CPU: its latency is then not comparable)")
	binDir := fs.String("bin", "", "build the services into this directory and keep them (for perf's symbols; default: a temporary one)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the bench process (in-process replay and reconcile included)")
	serviceProfiles := fs.String("service-profiles", "", "write a CPU profile of every service process into this directory (<service>.<pid>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	sc, err := scaleNamed(*scaleName)
	if err != nil {
		return err
	}
	if *reps > 0 {
		sc.Reps = *reps
	}
	if *deadline > 0 {
		sc.Deadline = *deadline
	}
	if *replayUsers > 0 {
		sc.ReplayUsers = *replayUsers
	}
	if *eraseOthers > 0 {
		sc.EraseOthers = *eraseOthers
	}
	if *webhookRate > 0 {
		sc.WebhookRate = *webhookRate
	}
	sc.CountRequests = *countRequests
	selected := scenarios
	if *only != "" {
		want := strings.Split(*only, ",")
		selected = nil
		for _, s := range scenarios {
			if slices.Contains(want, s.name) {
				selected = append(selected, s)
			}
		}
		if len(selected) != len(want) {
			return fmt.Errorf("-only %q: known scenarios are %s", *only, names())
		}
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	started := time.Now()
	profiles := ""
	if *serviceProfiles != "" {
		if profiles, err = filepath.Abs(*serviceProfiles); err != nil {
			return err
		}
	}
	b, err := newBench(ctx, stderr, *binDir)
	if err != nil {
		return err
	}
	b.profiles = profiles
	b.jvm = dynamotest.Options{FullJIT: sc.Name != "tiny"}
	defer b.close()
	rep := &report{Machine: thisMachine(), Scale: sc.Name, StartedAt: started.UTC().Format(time.RFC3339)}
	for _, s := range selected {
		t := time.Now()
		b.logf("== %s (%s scale)", s.name, sc.Name)
		results, err := runScenario(ctx, s, b, sc)
		if err != nil {
			return err
		}
		for _, r := range results {
			rep.Scenarios = append(rep.Scenarios, r.finish())
		}
		b.logf("   %s done in %.0fs", s.name, time.Since(t).Seconds())
	}
	b.record("ssodir-bench", selfPeak())
	if b.shared != nil {
		b.record("dynamodb-local", jvmPeak(b.shared))
	}
	b.mu.Lock()
	rep.RSSPeakBytes = b.peak
	b.mu.Unlock()
	rep.DurationS = round(time.Since(started).Seconds(), 1)
	rep.Machine.LoadAvg[1] = loadAvg()
	rep.writeTable(stdout)
	return rep.writeJSON(*out)
}

// runScenario runs s with sc.Deadline as its deadline. A scenario that does not return
// by then — a request that never gets an answer, a service that never exits — is left
// behind: the run fails at once with a message (the services it started are killed with
// the bench, Pdeathsig) rather than waiting for ever.
func runScenario(ctx context.Context, s scenario, b *bench, sc scale) ([]*result, error) {
	if sc.Deadline <= 0 {
		results, err := s.run(ctx, b, sc)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", s.name, err)
		}
		return results, nil
	}
	expired := fmt.Errorf("scenario %s did not finish within its deadline of %s (-deadline)", s.name, sc.Deadline)
	ctx, cancel := context.WithTimeoutCause(ctx, sc.Deadline, expired)
	defer cancel()
	type outcome struct {
		results []*result
		err     error
	}
	done := make(chan outcome, 1)
	go func() {
		results, err := s.run(ctx, b, sc)
		done <- outcome{results, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			if context.Cause(ctx) == expired {
				return nil, fmt.Errorf("%w: %w", expired, o.err)
			}
			return nil, fmt.Errorf("scenario %s: %w", s.name, o.err)
		}
		return o.results, nil
	case <-ctx.Done():
		if cause := context.Cause(ctx); cause != expired {
			return nil, fmt.Errorf("scenario %s: %w", s.name, cause)
		}
		// Give a scenario that honours its context a moment to return its own error.
		select {
		case o := <-done:
			if o.err != nil {
				return nil, fmt.Errorf("%w: %w", expired, o.err)
			}
			return o.results, nil
		case <-time.After(scenarioGrace):
			return nil, fmt.Errorf("%w; it is still waiting, abandoned", expired)
		}
	}
}

// scenarioGrace is how long a scenario past its deadline may take to return.
const scenarioGrace = 10 * time.Second

func names() string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.name)
	}
	return strings.Join(n, ",")
}
