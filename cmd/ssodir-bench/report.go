package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// result is one scenario (or one variant of it, such as a concurrency) with its baseline,
// measured over several repetitions. Figures and baseline use the same keys where they
// measure the same thing (per_s, p50_ms, p99_ms, max_ms, wall_s), and ratios are
// figure / baseline for every shared key.
type result struct {
	Name         string             `json:"name"`
	What         string             `json:"what"`
	Unit         string             `json:"unit"`
	BaselineWhat string             `json:"baseline_what"`
	BaselineUnit string             `json:"baseline_unit"`
	Figures      map[string]float64 `json:"figures"`
	Baseline     map[string]float64 `json:"baseline"`
	Ratios       map[string]float64 `json:"ratios"`
	Target       *target            `json:"target,omitempty"`
	Repetitions  []repetition       `json:"repetitions"`
	Spread       spreads            `json:"spread"`
	Notes        []string           `json:"notes,omitempty"`
}

// repetition is what one repetition measured; figures are medians over them.
type repetition struct {
	Figures  map[string]float64 `json:"figures"`
	Baseline map[string]float64 `json:"baseline"`
}

// spreads are the smallest and largest value of every figure over the repetitions.
type spreads struct {
	Figures  map[string]minMax `json:"figures"`
	Baseline map[string]minMax `json:"baseline"`
}

type minMax struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// target is the goal for a result: Value (in "ratios" or "figures") at least Min
// or at most Max.
type target struct {
	Of    string   `json:"of"`
	Key   string   `json:"key"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
	Value float64  `json:"value"`
	Met   bool     `json:"met"`
}

func atLeast(key string, v float64) *target { return &target{Of: "ratios", Key: key, Min: &v} }
func atMost(key string, v float64) *target  { return &target{Of: "figures", Key: key, Max: &v} }

func (r *result) add(figures, baseline map[string]float64) {
	for _, m := range []map[string]float64{figures, baseline} {
		for k, v := range m {
			m[k] = round(v, 3)
		}
	}
	r.Repetitions = append(r.Repetitions, repetition{Figures: figures, Baseline: baseline})
}

// finish computes medians, spreads, ratios and whether the target is met.
func (r *result) finish() *result {
	var figs, bases []map[string]float64
	for _, rep := range r.Repetitions {
		figs, bases = append(figs, rep.Figures), append(bases, rep.Baseline)
	}
	r.Figures, r.Spread.Figures = medians(figs)
	r.Baseline, r.Spread.Baseline = medians(bases)
	r.Ratios = map[string]float64{}
	for k, f := range r.Figures {
		if b, ok := r.Baseline[k]; ok && b != 0 {
			r.Ratios[k] = round(f/b, 3)
		}
	}
	if t := r.Target; t != nil {
		src := r.Ratios
		if t.Of == "figures" {
			src = r.Figures
		}
		t.Value = src[t.Key]
		t.Met = (t.Min == nil || t.Value >= *t.Min) && (t.Max == nil || t.Value <= *t.Max)
	}
	return r
}

func medians(reps []map[string]float64) (map[string]float64, map[string]minMax) {
	med, spread := map[string]float64{}, map[string]minMax{}
	keys := map[string]bool{}
	for _, m := range reps {
		for k := range m {
			keys[k] = true
		}
	}
	for k := range keys {
		var vs []float64
		for _, m := range reps {
			if v, ok := m[k]; ok && !math.IsNaN(v) {
				vs = append(vs, v)
			}
		}
		if len(vs) == 0 {
			continue
		}
		slices.Sort(vs)
		m := vs[len(vs)/2]
		if len(vs)%2 == 0 {
			m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
		}
		med[k] = round(m, 3)
		spread[k] = minMax{Min: round(vs[0], 3), Max: round(vs[len(vs)-1], 3)}
	}
	return med, spread
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// report is the JSON document bench-results.json.
type report struct {
	Machine      machine          `json:"machine"`
	Scale        string           `json:"scale"`
	StartedAt    string           `json:"started_at"`
	DurationS    float64          `json:"duration_s"`
	Scenarios    []*result        `json:"scenarios"`
	RSSPeakBytes map[string]int64 `json:"rss_peak_bytes"`
}

type machine struct {
	Cores  int    `json:"cores"`
	Go     string `json:"go"`
	OS     string `json:"os"`
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
	// LoadAvg is the 1-minute load average at the start and the end of the run: other
	// work on the machine shows here, and makes the figures noisier.
	LoadAvg [2]float64 `json:"load_avg_1m"`
}

// loadAvg is the machine's 1-minute load average.
func loadAvg() float64 {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func thisMachine() machine {
	m := machine{Cores: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH, LoadAvg: [2]float64{loadAvg()}}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(data), "\n")
		m.Memory = strings.Join(strings.Fields(strings.TrimPrefix(line, "MemTotal:")), " ")
	}
	return m
}

func (r *report) writeJSON(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// shown are the keys the table prints, in order.
var shown = []string{"per_s", "p50_ms", "p99_ms", "max_ms", "wall_s", "reads_per_batch", "reads_per_record", "items"}

func describe(m map[string]float64, unit string) string {
	var parts []string
	for _, k := range shown {
		v, ok := m[k]
		if !ok {
			continue
		}
		switch {
		case k == "per_s":
			parts = append(parts, fmt.Sprintf("%s %s", human(v), unit))
		case k == "wall_s":
			parts = append(parts, fmt.Sprintf("%.1f s", v))
		case k == "items":
			parts = append(parts, fmt.Sprintf("%s items", human(v)))
		default:
			parts = append(parts, fmt.Sprintf("%s %.1f", strings.TrimSuffix(k, "_ms"), v))
		}
	}
	return strings.Join(parts, ", ")
}

func human(v float64) string {
	if v >= 10000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

// writeTable prints the results as a table: figures (medians), the baseline, the ratios,
// the target and the spread of the main figure over the repetitions.
func (r *report) writeTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tfigure (median; ms)\tbaseline (median; ms)\tratio\ttarget\tspread (min–max)\n")
	for _, s := range r.Scenarios {
		key := "per_s"
		if _, ok := s.Figures[key]; !ok {
			key = "p99_ms"
		}
		if _, ok := s.Figures["items"]; ok {
			key = "items"
		}
		ratio := "–"
		if v, ok := s.Ratios[key]; ok {
			ratio = fmt.Sprintf("%.2f (%s)", v, key)
		}
		tgt := ""
		if t := s.Target; t != nil {
			verdict := "met"
			if !t.Met {
				verdict = "MISSED"
			}
			bound := fmt.Sprintf("≥ %.2f", deref(t.Min))
			if t.Max != nil {
				bound = fmt.Sprintf("≤ %g", *t.Max)
			}
			tgt = fmt.Sprintf("%s %s %s", t.Key, bound, verdict)
		}
		sp := s.Spread.Figures[key]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s–%s\n", s.Name, describe(s.Figures, s.Unit), describe(s.Baseline, s.BaselineUnit),
			ratio, tgt, human(sp.Min), human(sp.Max))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nCPU ms per operation (median), ssodir run → raw baseline:\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range r.Scenarios {
		if line := cpuLine(s.Figures, s.Baseline); line != "" {
			fmt.Fprintf(tw, "%s\t%s\n", s.Name, line)
		}
	}
	tw.Flush()
	names := slices.Sorted(maps.Keys(r.RSSPeakBytes))
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d MiB", n, r.RSSPeakBytes[n]>>20))
	}
	fmt.Fprintf(w, "\npeak RSS: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(w, "machine: %d cores, %s, %s, load %.1f → %.1f; scale %s; %d repetitions per figure; %.0f s\n",
		r.Machine.Cores, r.Machine.CPU, r.Machine.Go, r.Machine.LoadAvg[0], r.Machine.LoadAvg[1], r.Scale, repsOf(r), r.DurationS)
}

// cpuLine lists each process's CPU per operation in a scenario: the services, then the
// processes both runs have (DynamoDB Local, the bench) as "figure → baseline".
func cpuLine(figures, baseline map[string]float64) string {
	const prefix = "cpu_ms_per_op."
	var own, shared []string
	for _, k := range slices.Sorted(maps.Keys(figures)) {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		if b, ok := baseline[k]; ok {
			shared = append(shared, fmt.Sprintf("%s %.3f → %.3f", name, figures[k], b))
		} else {
			own = append(own, fmt.Sprintf("%s %.3f", name, figures[k]))
		}
	}
	return strings.Join(append(own, shared...), ", ")
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func repsOf(r *report) int {
	n := 0
	for _, s := range r.Scenarios {
		n = max(n, len(s.Repetitions))
	}
	return n
}

// quantity writes a count for a scenario name: 100000 → "100k", 1000000 → "1M".
func quantity(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}
