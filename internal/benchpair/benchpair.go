package benchpair

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Op runs one operation. seq is unique within the process (a fresh order
// per call).
type Op func(ctx context.Context, seq int64) error

// Case is one client of a comparison.
type Case struct {
	Name string
	// New prepares a fresh instance for one round, outside the timing (a
	// fake server, a store, a client), and returns its operation and a
	// clean-up, called after the round's measurement of this case.
	New func(ctx context.Context) (Op, func(), error)
}

// Config says how a comparison runs.
type Config struct {
	Rounds   int   // rounds (samples); every case runs once per round
	Ops      int   // measured operations per case and round
	Warmup   int   // untimed operations per instance before measuring
	Parallel int   // concurrent callers
	Seed     int64 // seeds the per-round shuffle (Order)
	// Timeout bounds one case's measurement in a round; 0 means none.
	Timeout time.Duration
	// Pauses lets operations call Pause: the time they spend in it is
	// left out of their latency and of the wall time (it costs each
	// operation an allocation, so it is off by default).
	Pauses bool
}

type pauseKey struct{}

// Pause sleeps for d (or until ctx ends) and, in a run with
// Config.Pauses, leaves the time slept out of the operation's latency and
// of the case's wall time: an operation can wait as a real one would
// between two steps without the wait being measured.
func Pause(ctx context.Context, d time.Duration) {
	t := time.Now()
	tm := time.NewTimer(d)
	select {
	case <-tm.C:
	case <-ctx.Done():
		tm.Stop()
	}
	if p, ok := ctx.Value(pauseKey{}).(*time.Duration); ok {
		*p += time.Since(t)
	}
}

// Sample is what one case measured in one round.
type Sample struct {
	Case     string
	Round    int
	Position int // where in the round's shuffled order it ran
	Ops      int
	Wall     time.Duration
	CPU      time.Duration
	Allocs   uint64
	Bytes    uint64
	Lat      []time.Duration // sorted
	Load     [3]float64
}

var seq atomic.Int64

// Seq returns a number unique in the process, for a case that needs one
// outside an Op.
func Seq() int64 { return seq.Add(1) }

// Run runs the comparison and returns every sample, in round order.
func Run(ctx context.Context, cfg Config, cases []Case) ([]Sample, error) {
	if cfg.Rounds < 1 || cfg.Ops < 1 || cfg.Parallel < 1 {
		return nil, errors.New("benchpair: Rounds, Ops and Parallel must be positive")
	}
	var out []Sample
	for r := range cfg.Rounds {
		for pos, i := range Order(len(cases), cfg.Seed, r) {
			s, err := runOne(ctx, cfg, cases[i])
			if err != nil {
				return out, fmt.Errorf("benchpair: round %d, %s: %w", r, cases[i].Name, err)
			}
			s.Round, s.Position = r, pos
			out = append(out, s)
		}
	}
	return out, nil
}

func runOne(ctx context.Context, cfg Config, c Case) (Sample, error) {
	op, cleanup, err := c.New(ctx)
	if err != nil {
		return Sample{}, err
	}
	defer cleanup()
	if cfg.Warmup > 0 {
		if _, _, err := drive(ctx, op, cfg.Warmup, min(cfg.Parallel, cfg.Warmup), cfg.Pauses); err != nil {
			return Sample{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	mctx := ctx
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		mctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	runtime.GC() // no garbage of the previous case is collected on this one's time
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	cpu0 := processCPU()
	t0 := time.Now()
	lat, paused, err := drive(mctx, op, cfg.Ops, cfg.Parallel, cfg.Pauses)
	wall := time.Since(t0)
	if cfg.Parallel == 1 {
		wall -= paused // with parallel callers the pauses overlap: wall time stays as measured
	}
	cpu1 := processCPU()
	runtime.ReadMemStats(&m1)
	if err != nil {
		return Sample{}, err
	}
	slices.Sort(lat)
	return Sample{
		Case: c.Name, Ops: cfg.Ops, Wall: wall, CPU: cpu1 - cpu0,
		Allocs: m1.Mallocs - m0.Mallocs, Bytes: m1.TotalAlloc - m0.TotalAlloc,
		Lat: lat, Load: LoadAvg(),
	}, nil
}

// drive runs n operations with par concurrent callers and returns their
// latencies (less their pauses, with pauses) and the pauses' total; the
// first error stops it.
func drive(ctx context.Context, op Op, n, par int, pauses bool) ([]time.Duration, time.Duration, error) {
	var (
		next    atomic.Int64
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, n)
		total   time.Duration
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	for range par {
		wg.Go(func() {
			local := make([]time.Duration, 0, n/par+1)
			var mine time.Duration
			for next.Add(1) <= int64(n) {
				octx, paused := ctx, time.Duration(0)
				if pauses {
					octx = context.WithValue(ctx, pauseKey{}, &paused)
				}
				t := time.Now()
				if err := op(octx, seq.Add(1)); err != nil {
					errOnce.Do(func() { first = err })
					next.Store(int64(n)) // stop the others
					break
				}
				local = append(local, time.Since(t)-paused)
				mine += paused
			}
			mu.Lock()
			lat = append(lat, local...)
			total += mine
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, total, first
}

// processCPU is the CPU time (user + system) used by this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// LoadAvg is the 1, 5 and 15 minute load average from /proc/loadavg
// (zeros where it cannot be read).
func LoadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		l[i], _ = strconv.ParseFloat(f, 64)
	}
	return l
}

// WriteBench prints one Go benchmark line per sample, named
// Benchmark<prefix>/<case>: ns/op is wall time per operation, cpu-ns/op the
// process's CPU time per operation, then B/op, allocs/op, p50-ns and
// p99-ns of one operation, and load1 (the one-minute load average when the
// sample ended).
func WriteBench(w io.Writer, prefix string, samples []Sample) {
	for _, s := range samples {
		fmt.Fprintf(w, "Benchmark%s/%s\t%d\t%.0f ns/op\t%.0f cpu-ns/op\t%.0f B/op\t%.1f allocs/op\t%.0f p50-ns\t%.0f p99-ns\t%.2f load1\n",
			prefix, s.Case, s.Ops, WallPerOp(s), CPUPerOp(s), BytesPerOp(s), AllocsPerOp(s), P50(s), P99(s), s.Load[0])
	}
}

// WriteRatios prints, per round, one line BenchmarkRatio<prefix>/<case>
// for every case but the baseline: its wall time and CPU time per operation
// ÷ the baseline's in the same round (wall-x, cpu-x), its throughput ÷ the
// baseline's (ops-x), and the load of the round.
func WriteRatios(w io.Writer, prefix, baseline string, samples []Sample) {
	byRound := map[int]map[string]Sample{}
	for _, s := range samples {
		if byRound[s.Round] == nil {
			byRound[s.Round] = map[string]Sample{}
		}
		byRound[s.Round][s.Case] = s
	}
	rounds := make([]int, 0, len(byRound))
	for r := range byRound {
		rounds = append(rounds, r)
	}
	slices.Sort(rounds)
	for _, r := range rounds {
		b, ok := byRound[r][baseline]
		if !ok {
			continue
		}
		for _, name := range caseNames(samples) {
			s, ok := byRound[r][name]
			if !ok || name == baseline {
				continue
			}
			fmt.Fprintf(w, "BenchmarkRatio%s/%s\t1\t%.4f wall-x\t%.4f cpu-x\t%.4f ops-x\t%.2f load1\n",
				prefix, name, WallPerOp(s)/WallPerOp(b), CPUPerOp(s)/CPUPerOp(b), OpsPerSec(s)/OpsPerSec(b), s.Load[0])
		}
	}
}

// caseNames lists the cases of samples, sorted.
func caseNames(samples []Sample) []string {
	var names []string
	for _, s := range samples {
		if !slices.Contains(names, s.Case) {
			names = append(names, s.Case)
		}
	}
	slices.Sort(names)
	return names
}

// CaseNames lists the cases of samples, sorted.
func CaseNames(samples []Sample) []string { return caseNames(samples) }

// Fmt formats a summary as "median (lo – hi)" with the given verb.
func (s Summary) Fmt(verb string) string {
	return fmt.Sprintf(verb+" ("+verb+" – "+verb+")", s.Median, s.Lo, s.Hi)
}

// FmtIQR formats a summary as "median (lo – hi; IQR q1 – q3)".
func (s Summary) FmtIQR(verb string) string {
	return fmt.Sprintf(verb+" ("+verb+" – "+verb+"; IQR "+verb+" – "+verb+")", s.Median, s.Lo, s.Hi, s.Q1, s.Q3)
}

// WriteSummary prints a readable table ("#" lines): per case, median and
// range over rounds of wall µs/op, CPU µs/op, allocs/op, ops/s, p50 and
// p99 ms, and the ratios of wall and CPU to the baseline in the same
// round, with the range of the load average over the case's samples.
func WriteSummary(w io.Writer, title, baseline string, samples []Sample) {
	fmt.Fprintf(w, "# %s\n", title)
	fmt.Fprintf(w, "# %-18s %-24s %-24s %-20s %-22s %-20s %-20s %-20s %-20s %s\n", "case", "wall µs/op", "cpu µs/op", "allocs/op", "ops/s", "p50 ms", "p99 ms", "wall ÷ base", "cpu ÷ base", "load1")
	for _, name := range caseNames(samples) {
		us := func(f func(Sample) float64) func(Sample) float64 {
			return func(s Sample) float64 { return f(s) / 1e3 }
		}
		ms := func(f func(Sample) float64) func(Sample) float64 {
			return func(s Sample) float64 { return f(s) / 1e6 }
		}
		wr, cr := "—", "—"
		if name != baseline {
			wr = Summarize(PerRound(samples, name, baseline, WallPerOp)).Fmt("%.3f")
			cr = Summarize(PerRound(samples, name, baseline, CPUPerOp)).Fmt("%.3f")
		}
		fmt.Fprintf(w, "# %-18s %-24s %-24s %-20s %-22s %-20s %-20s %-20s %-20s %s\n", name,
			Summarize(Of(samples, name, us(WallPerOp))).Fmt("%.1f"),
			Summarize(Of(samples, name, us(CPUPerOp))).Fmt("%.1f"),
			Summarize(Of(samples, name, AllocsPerOp)).Fmt("%.0f"),
			Summarize(Of(samples, name, OpsPerSec)).Fmt("%.0f"),
			Summarize(Of(samples, name, ms(P50))).Fmt("%.2f"),
			Summarize(Of(samples, name, ms(P99))).Fmt("%.2f"),
			wr, cr,
			Summarize(Of(samples, name, Load1)).Fmt("%.1f"))
	}
}
