package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/process"
	"github.com/ssodir/ssodir/internal/projector"
)

// replayFlags parses the replay subcommand's flags. The old generation's tables are
// dropped after the switch (once readers had SwitchWait to leave them) unless --keep-old:
// every generation kept is two tables of the account's quota (2,500 per region).
func replayFlags(args []string, stdout io.Writer) (system, tenant string, opts projector.ReplayOptions, err error) {
	var (
		dryRun, keepOld, dropOld bool
		segments, workers        int
	)
	system, tenant, err = tenantFlags("replay", args, stdout, func(fs *flag.FlagSet) {
		fs.BoolVar(&dryRun, "dry-run", false, "report what would be built, write nothing")
		fs.BoolVar(&keepOld, "keep-old", false, "keep the old tables after the switch (by default they are dropped once readers left them)")
		fs.BoolVar(&dropOld, "drop-old", false, "drop the old tables after the switch (the default; kept for scripts)")
		fs.IntVar(&segments, "segments", 0, "parallel scan segments of the command log (default: about 1,500 items each; a resumed replay keeps its own)")
		fs.IntVar(&workers, "workers", 0, "segments read and applied at a time (default 8)")
	})
	switch {
	case err != nil:
		return "", "", opts, err
	case system == "" || tenant == "":
		return "", "", opts, fmt.Errorf("replay: --system and --tenant are required")
	case segments < 0 || workers < 0:
		return "", "", opts, fmt.Errorf("replay: --segments and --workers must not be negative")
	case keepOld && dropOld:
		return "", "", opts, fmt.Errorf("replay: --keep-old and --drop-old contradict each other")
	}
	return system, tenant, projector.ReplayOptions{DryRun: dryRun, DropOld: !keepOld, Segments: segments, Workers: workers, Out: stdout}, nil
}

func (a *app) replay(ctx context.Context, args []string, stdout io.Writer) error {
	system, tenant, opts, err := replayFlags(args, stdout)
	if err != nil {
		return err
	}
	r := projector.NewReplayer(a.clients.DB, a.names, a.tenants, a.projector, events.NewRegistry(), a.log)
	opts.Tables = process.TableSettings(a.cfg.Common)
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = &barProgress{out: f}
	} else {
		opts.Progress = &lineProgress{out: stdout, every: 5 * time.Second}
	}
	start := time.Now()
	rep, err := r.Run(ctx, system, tenant, opts)
	if err != nil {
		return err
	}
	if !opts.DryRun {
		secs := time.Since(start).Seconds()
		fmt.Fprintf(stdout, "replay of %s/%s done in %.1fs (%.0f history records/s)\n", system, tenant, secs, float64(rep.HistoryRecords)/secs)
	}
	return nil
}

// barProgress draws a progress bar with counts, rate and ETA on a terminal.
type barProgress struct {
	out *os.File
	bar *progressbar.ProgressBar
}

func (p *barProgress) Start(phase string, total int64) {
	p.bar = progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(p.out), progressbar.OptionSetDescription(phase),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("items"),
		progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.out) }))
}
func (p *barProgress) Add(n int) { _ = p.bar.Add(n) }
func (p *barProgress) Finish()   { _ = p.bar.Finish() }

// lineProgress prints a plain progress line every so often (logs, CI, pipes).
type lineProgress struct {
	mu             sync.Mutex
	out            io.Writer
	every          time.Duration
	phase          string
	total, done    int64
	start, printed time.Time
}

func (p *lineProgress) Start(phase string, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase, p.total, p.done, p.start, p.printed = phase, total, 0, time.Now(), time.Now()
}

func (p *lineProgress) Add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += int64(n)
	if time.Since(p.printed) >= p.every {
		p.print()
	}
}

func (p *lineProgress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.print()
}

func (p *lineProgress) print() {
	p.printed = time.Now()
	rate := float64(p.done) / max(time.Since(p.start).Seconds(), 0.001)
	line := fmt.Sprintf("%s: %d items, %.0f/s", p.phase, p.done, rate)
	if p.total > 0 && rate > 0 && p.done < p.total {
		line += fmt.Sprintf(", about %d of %d, ETA %s", p.done, p.total, time.Duration(float64(p.total-p.done)/rate*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintln(p.out, line)
}
