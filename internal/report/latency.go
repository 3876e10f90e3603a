package report

import (
	"slices"
	"sync"
	"time"
)

// Latencies collects durations from many goroutines and summarises them.
// The zero value is ready to use.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Summary returns the count, p50, p99 and maximum of the durations so far.
func (l *Latencies) Summary() Latency {
	l.mu.Lock()
	d := append([]time.Duration(nil), l.d...)
	l.mu.Unlock()
	return Summarize(d)
}

// Latency is a summary of durations, in milliseconds for readable JSON.
type Latency struct {
	N     int     `json:"n"`
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	MaxMS float64 `json:"max_ms"`
}

// Summarize computes a Latency with the nearest-rank method (p99 of 100
// values is the 99th smallest), which never reports a value that was not
// observed.
func Summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	s := append([]time.Duration(nil), d...)
	slices.Sort(s)
	return Latency{N: len(s), P50MS: ms(rank(s, 0.50)), P99MS: ms(rank(s, 0.99)), MaxMS: ms(s[len(s)-1])}
}

// rank returns the nearest-rank percentile p of sorted s.
func rank(s []time.Duration, p float64) time.Duration {
	i := max(int(p*float64(len(s))+0.999999999)-1, 0)
	if i >= len(s) {
		i = len(s) - 1
	}
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
