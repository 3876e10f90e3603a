package benchpair

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedianAndRange(t *testing.T) {
	for _, tc := range []struct {
		in          []float64
		med, lo, hi float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
		{[]float64{1.3, 1.1, 1.2, 9, 1.25}, 1.25, 1.1, 9},
	} {
		in := slices.Clone(tc.in)
		if got := Median(in); got != tc.med {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.med)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Median reordered its input: %v", in)
		}
		lo, hi := Range(in)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("Range(%v) = %v, %v, want %v, %v", tc.in, lo, hi, tc.lo, tc.hi)
		}
	}
	if !math.IsNaN(Median(nil)) {
		t.Error("Median(nil) is not NaN")
	}
	if lo, hi := Range(nil); !math.IsNaN(lo) || !math.IsNaN(hi) {
		t.Error("Range(nil) is not NaN")
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{7, 1, 3, 5} // sorted: 1 3 5 7
	for _, tc := range []struct{ q, want float64 }{{0, 1}, {0.25, 2.5}, {0.5, 4}, {0.75, 5.5}, {1, 7}} {
		if got := Quantile(xs, tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Quantile(%v, %v) = %v, want %v", xs, tc.q, got, tc.want)
		}
	}
	if s := Summarize(xs); s.Q1 != 2.5 || s.Q3 != 5.5 || s.Median != 4 || s.Lo != 1 || s.Hi != 7 {
		t.Errorf("Summarize = %+v", s)
	}
	if got := Summarize([]float64{1.2, 1.1}).FmtIQR("%.2f"); got != "1.15 (1.10 – 1.20; IQR 1.12 – 1.18)" {
		t.Errorf("FmtIQR = %q", got)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var d []time.Duration
		for _, x := range xs {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	lat := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 5 * time.Millisecond}, {99, 10 * time.Millisecond}, {10, time.Millisecond}, {1, time.Millisecond}, {100, 10 * time.Millisecond}} {
		if got := Percentile(lat, tc.p); got != tc.want {
			t.Errorf("Percentile(1..10 ms, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile(nil) != 0")
	}
}

// Ratios are taken within each round: a slow round (load) slows both sides
// and leaves the ratio alone, which a ratio of medians across rounds would
// not.
func TestPerRoundRatiosAndDiffs(t *testing.T) {
	s := func(name string, round int, wall time.Duration) Sample {
		return Sample{Case: name, Round: round, Ops: 10, Wall: wall * 10, Lat: []time.Duration{wall}}
	}
	samples := []Sample{
		s("base", 0, 100), s("sdk", 0, 120),
		s("sdk", 1, 360), s("base", 1, 300), // a loaded round: both slower
		s("base", 2, 100), s("sdk", 2, 110),
		s("sdk", 3, 999), // its baseline failed to run: no ratio
	}
	got := PerRound(samples, "sdk", "base", WallPerOp)
	want := []float64{1.2, 1.2, 1.1}
	if len(got) != len(want) {
		t.Fatalf("PerRound = %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("PerRound = %v, want %v", got, want)
		}
	}
	sum := Summarize(got)
	if math.Abs(sum.Median-1.2) > 1e-12 || math.Abs(sum.Lo-1.1) > 1e-12 || math.Abs(sum.Hi-1.2) > 1e-12 || sum.N != 3 {
		t.Errorf("Summarize = %+v, want median 1.2, range 1.1–1.2, 3 rounds", sum)
	}
	// The ratio of the medians across rounds would be 120/100 here too, but
	// not with the loaded round moved: check the pairing, not the luck.
	samples[3] = s("base", 1, 100)
	if got := PerRound(samples, "sdk", "base", WallPerOp); math.Abs(got[1]-3.6) > 1e-12 {
		t.Errorf("round 1 ratio = %v, want 3.6 (paired with round 1's baseline only)", got[1])
	}
	d := Diff(samples, "sdk", "base", P50)
	if !slices.Equal(d, []float64{20, 260, 10}) {
		t.Errorf("Diff = %v, want [20 260 10]", d)
	}
	if o := Of(samples, "base", WallPerOp); !slices.Equal(o, []float64{100, 100, 100}) {
		t.Errorf("Of = %v", o)
	}
}

func TestOrderShuffledAndReproducible(t *testing.T) {
	const n = 5
	seen := map[string]bool{}
	firsts := map[int]int{}
	for r := range 200 {
		o := Order(n, 7, r)
		if !slices.Equal(o, Order(n, 7, r)) {
			t.Fatalf("round %d: Order is not reproducible", r)
		}
		sorted := slices.Sorted(slices.Values(o))
		if !slices.Equal(sorted, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("round %d: %v is not a permutation", r, o)
		}
		seen[sprint(o)] = true
		firsts[o[0]]++
	}
	// 200 rounds of 5 cases: many distinct orders, and every case runs first
	// in some round (a fixed order would put one case first in all 200).
	if len(seen) < 50 {
		t.Errorf("only %d distinct orders in 200 rounds", len(seen))
	}
	for c := range n {
		if firsts[c] < 10 {
			t.Errorf("case %d ran first in %d of 200 rounds", c, firsts[c])
		}
	}
	if slices.Equal(Order(n, 1, 0), Order(n, 2, 0)) && slices.Equal(Order(n, 1, 1), Order(n, 2, 1)) && slices.Equal(Order(n, 1, 2), Order(n, 2, 2)) {
		t.Error("the seed does not change the orders")
	}
}

func sprint(o []int) string {
	var b strings.Builder
	for i, x := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte(byte('0' + x))
	}
	return b.String()
}

// Run runs every case once per round, counts the operations it was asked
// for, and prints lines benchstat reads.
func TestRunAndOutput(t *testing.T) {
	counts := map[string]int{}
	mk := func(name string, err error) Case {
		return Case{Name: name, New: func(context.Context) (Op, func(), error) {
			return func(context.Context, int64) error {
				counts[name]++
				return err
			}, func() {}, nil
		}}
	}
	cfg := Config{Rounds: 3, Ops: 40, Warmup: 5, Parallel: 1, Seed: 1}
	samples, err := Run(context.Background(), cfg, []Case{mk("a", nil), mk("b", nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 6 || counts["a"] != 3*45 || counts["b"] != 3*45 {
		t.Fatalf("%d samples, counts %v; want 6 and 135 each", len(samples), counts)
	}
	for _, s := range samples {
		if s.Ops != 40 || len(s.Lat) != 40 || !slices.IsSorted(s.Lat) {
			t.Fatalf("sample %+v: want 40 sorted latencies", s.Case)
		}
	}
	var buf bytes.Buffer
	WriteBench(&buf, "X/p1", samples)
	WriteRatios(&buf, "X/p1", "a", samples)
	WriteSummary(&buf, "title", "a", samples)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var bench, ratio int
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "BenchmarkX/p1/"):
			bench++
			if f := strings.Split(l, "\t"); len(f) != 9 || f[1] != "40" || !strings.HasSuffix(f[2], " ns/op") {
				t.Errorf("benchmark line %q", l)
			}
		case strings.HasPrefix(l, "BenchmarkRatioX/p1/b\t1\t"):
			ratio++
		case strings.HasPrefix(l, "#"):
		default:
			t.Errorf("line benchstat would misread: %q", l)
		}
	}
	if bench != 6 || ratio != 3 {
		t.Errorf("%d benchmark lines, %d ratio lines; want 6 and 3", bench, ratio)
	}

	boom := errors.New("boom")
	if _, err := Run(context.Background(), cfg, []Case{mk("a", nil), mk("c", boom)}); !errors.Is(err, boom) {
		t.Errorf("a failing op: %v, want it reported", err)
	}
}

// With Config.Pauses, time in Pause is left out of an operation's latency
// (and, at parallelism 1, of the wall time); without it, it is counted.
func TestPauseLeftOut(t *testing.T) {
	const d = 100 * time.Millisecond
	c := Case{Name: "p", New: func(context.Context) (Op, func(), error) {
		return func(ctx context.Context, _ int64) error { Pause(ctx, d); return nil }, func() {}, nil
	}}
	with, err := Run(context.Background(), Config{Rounds: 1, Ops: 2, Parallel: 1, Pauses: true}, []Case{c})
	if err != nil {
		t.Fatal(err)
	}
	without, err := Run(context.Background(), Config{Rounds: 1, Ops: 2, Parallel: 1}, []Case{c})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range without[0].Lat {
		if l < d {
			t.Errorf("without Pauses: latency %v < the %v pause", l, d)
		}
	}
	// Only a stall of the whole process for ≥ 100 ms between two
	// instructions could fail these.
	for _, l := range with[0].Lat {
		if l >= d {
			t.Errorf("with Pauses: latency %v still counts the %v pause", l, d)
		}
	}
	if with[0].Wall >= d {
		t.Errorf("with Pauses at p1: wall %v counts the pauses", with[0].Wall)
	}
}
