package keystore

import (
	"testing"
	"time"
)

func TestReapPause(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		took    time.Duration
		yield   float64
		lo, hi  time.Duration
		want    time.Duration
		comment string
	}{
		{2 * ms, 4, 10 * ms, 2 * time.Second, 10 * ms, "a fast batch still leaves the floor"},
		{5 * ms, 4, 10 * ms, 2 * time.Second, 20 * ms, "4x the batch"},
		{time.Second, 4, 10 * ms, 2 * time.Second, 2 * time.Second, "capped"},
		{5 * ms, 0.5, 0, time.Second, 2500 * time.Microsecond, "fractional yield"},
		{5 * ms, -1, 10 * ms, time.Second, 0, "negative yield: no pause, not even the floor"},
		{0, 4, 0, time.Second, 0, "nothing measured, no floor"},
		{-ms, 4, 0, time.Second, 0, "a clock step back never gives a negative pause"},
	} {
		if got := reapPause(tc.took, tc.yield, tc.lo, tc.hi); got != tc.want {
			t.Errorf("%s: reapPause(%v, %v, %v, %v) = %v, want %v", tc.comment, tc.took, tc.yield, tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestReapOptionsFill(t *testing.T) {
	var o ReapOptions
	if err := o.fill(); err != nil {
		t.Fatal(err)
	}
	if o.Retention != DefaultRetention || o.Batch != DefaultReapBatch || o.Yield != DefaultReapYield ||
		o.MinPause != DefaultReapMinPause || o.MaxPause != DefaultReapMaxPause || o.Now.IsZero() {
		t.Fatalf("defaults: %+v", o)
	}
	for _, bad := range []ReapOptions{
		{Retention: time.Hour},
		{Batch: -1},
		{MinPause: -time.Millisecond},
		{MinPause: time.Second, MaxPause: time.Millisecond},
	} {
		if err := bad.fill(); err == nil {
			t.Errorf("fill accepted %+v", bad)
		}
	}
}
