package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress reports how far an import is: a bar on a terminal, plain lines otherwise (a log
// or a CI job), at most every few seconds and at the end.
type progress interface {
	Add(n int)
	Finish()
}

func newProgress(w io.Writer, terminal bool, total int, what string) progress {
	if terminal {
		return &barProgress{bar: progressbar.NewOptions(total, progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(what), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
			progressbar.OptionSetItsString(what), progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))}
	}
	return &lineProgress{w: w, total: total, what: what, start: time.Now(), last: time.Now()}
}

type barProgress struct{ bar *progressbar.ProgressBar }

func (p *barProgress) Add(n int) { _ = p.bar.Add(n) }
func (p *barProgress) Finish()   { _ = p.bar.Finish() }

type lineProgress struct {
	w     io.Writer
	what  string
	total int
	start time.Time

	mu   sync.Mutex
	done int
	last time.Time
}

func (p *lineProgress) Add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		p.print()
	}
}

func (p *lineProgress) print() {
	rate := float64(p.done) / max(time.Since(p.start).Seconds(), 0.001)
	fmt.Fprintf(p.w, "%s: %d/%d (%.0f/s)\n", p.what, p.done, p.total, rate)
}

func (p *lineProgress) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.print()
}
