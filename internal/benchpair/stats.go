package benchpair

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Order returns the order in which the n cases run in round r of a run
// seeded with seed: a permutation of 0..n-1 drawn from a generator seeded
// with (seed, r), so a run is reproducible and every round is shuffled
// independently of the others.
func Order(n int, seed int64, r int) []int {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(r)))
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	rng.Shuffle(n, func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
	return idx
}

// Median is the median of xs (the mean of the two middle values for an
// even count); NaN for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Range is the smallest and the largest of xs; NaN, NaN for none.
func Range(xs []float64) (lo, hi float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	return slices.Min(xs), slices.Max(xs)
}

// Quantile is the q-th quantile (0 ≤ q ≤ 1) of xs, interpolated linearly
// between the two nearest ranks (as R's type 7); NaN for none.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	h := q * float64(len(s)-1)
	i := int(math.Floor(h))
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (h-float64(i))*(s[i+1]-s[i])
}

// Summary is the median, range and interquartile range of one figure over
// the rounds.
type Summary struct {
	Median, Lo, Hi float64
	Q1, Q3         float64
	N              int
}

// Summarize returns the median, range and quartiles of xs.
func Summarize(xs []float64) Summary {
	lo, hi := Range(xs)
	return Summary{Median: Median(xs), Lo: lo, Hi: hi, Q1: Quantile(xs, 0.25), Q3: Quantile(xs, 0.75), N: len(xs)}
}

// Percentile is the p-th percentile (0 < p ≤ 100) of sorted by the
// nearest-rank method: the smallest value with at least p % of the values
// at or below it. 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// PerRound pairs a figure of one case with the same figure of the baseline
// in the same round: out[i] = f(case in round i) ÷ f(baseline in round i),
// for every round in which both ran. Ratios are never taken across rounds.
func PerRound(samples []Sample, name, baseline string, f func(Sample) float64) []float64 {
	base := map[int]float64{}
	for _, s := range samples {
		if s.Case == baseline {
			base[s.Round] = f(s)
		}
	}
	var out []float64
	for _, s := range samples {
		if s.Case != name {
			continue
		}
		if b, ok := base[s.Round]; ok && b != 0 {
			out = append(out, f(s)/b)
		}
	}
	return out
}

// Diff is PerRound with a difference instead of a ratio:
// f(case) − f(baseline), round by round.
func Diff(samples []Sample, name, baseline string, f func(Sample) float64) []float64 {
	base := map[int]float64{}
	for _, s := range samples {
		if s.Case == baseline {
			base[s.Round] = f(s)
		}
	}
	var out []float64
	for _, s := range samples {
		if s.Case != name {
			continue
		}
		if b, ok := base[s.Round]; ok {
			out = append(out, f(s)-b)
		}
	}
	return out
}

// Of returns f(s) for the samples of one case, in round order.
func Of(samples []Sample, name string, f func(Sample) float64) []float64 {
	var out []float64
	for _, s := range samples {
		if s.Case == name {
			out = append(out, f(s))
		}
	}
	return out
}

// All returns f(s) for every sample.
func All(samples []Sample, f func(Sample) float64) []float64 {
	out := make([]float64, 0, len(samples))
	for _, s := range samples {
		out = append(out, f(s))
	}
	return out
}

// Figures of a Sample, for PerRound, Diff and Of.
var (
	WallPerOp   = func(s Sample) float64 { return float64(s.Wall.Nanoseconds()) / float64(s.Ops) }
	CPUPerOp    = func(s Sample) float64 { return float64(s.CPU.Nanoseconds()) / float64(s.Ops) }
	AllocsPerOp = func(s Sample) float64 { return float64(s.Allocs) / float64(s.Ops) }
	BytesPerOp  = func(s Sample) float64 { return float64(s.Bytes) / float64(s.Ops) }
	OpsPerSec   = func(s Sample) float64 { return float64(s.Ops) / s.Wall.Seconds() }
	P50         = func(s Sample) float64 { return float64(Percentile(s.Lat, 50).Nanoseconds()) }
	P99         = func(s Sample) float64 { return float64(Percentile(s.Lat, 99).Nanoseconds()) }
	Load1       = func(s Sample) float64 { return s.Load[0] }
)
