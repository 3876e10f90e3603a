package main

// pagpolar ops reap: deleting settled records past their retention.

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

func opsReap(ctx context.Context, o *opsFlags, ids []string, out *opsOutput, stderr io.Writer) int {
	switch {
	case len(ids) > 0:
		fmt.Fprintf(stderr, "pagpolar ops reap: unexpected argument %q (reap takes flags only)\n", ids[0])
		return exitUsage
	case o.retention < keystore.MinRetention:
		fmt.Fprintf(stderr, "pagpolar ops reap: -retention %v is shorter than the minimum %v: a late retry of a reaped operation is sent again\n", o.retention, keystore.MinRetention)
		return exitUsage
	case o.batch <= 0 || o.limit <= 0:
		fmt.Fprintln(stderr, "pagpolar ops reap: -batch and -limit must be positive")
		return exitUsage
	case o.minPause < 0 || o.maxPause < o.minPause:
		fmt.Fprintf(stderr, "pagpolar ops reap: -min-pause %v, -max-pause %v: want 0 <= min <= max\n", o.minPause, o.maxPause)
		return exitUsage
	}
	now := time.Now()
	cutoff := now.Add(-o.retention)
	if o.dryRun {
		store, closeStore, err := opsStores.OpenReadOnly(ctx, o.store, warnOnce(stderr, "ops"))
		if err != nil {
			return openFailed(stderr, "reap", err)
		}
		defer func() { _ = closeStore() }()
		recs, err := store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateSucceeded, keystore.StateFailed}, UpdatedBefore: cutoff, Limit: o.limit + 1})
		if err != nil {
			fmt.Fprintf(stderr, "pagpolar ops reap: %v\n", err)
			return exitFailed
		}
		more := len(recs) > o.limit
		if more {
			recs = recs[:o.limit]
		}
		return out.wouldReap(recs, more, cutoff)
	}
	store, closeStore, err := opsStores.OpenWritable(ctx, o.store)
	if err != nil {
		return openFailed(stderr, "reap", err)
	}
	defer func() { _ = closeStore() }()
	var batches, retried int
	var busy, paused time.Duration
	start := time.Now()
	// ReapOptions takes a zero pause for its default: -min-pause 0 means none.
	n, err := keystore.ReapWith(ctx, store, keystore.ReapOptions{Retention: o.retention, Batch: o.batch, Yield: o.yield,
		MinPause: max(o.minPause, time.Nanosecond), MaxPause: max(o.maxPause, time.Nanosecond), Now: now,
		Progress: func(b keystore.ReapBatch) {
			batches++
			busy += b.Took
			paused += b.Pause
			if b.Err != nil {
				retried++
				fmt.Fprintf(stderr, "pagpolar ops reap: a batch failed, trying again in %v: %v\n", b.Pause, b.Err)
			}
		}})
	if err != nil {
		fmt.Fprintf(stderr, "pagpolar ops reap: removed %d, then: %v\n", n, err)
		return exitFailed
	}
	wall := time.Since(start)
	if out.json {
		return out.encode(map[string]any{"removed": n, "cutoff": cutoff.UTC(), "batches": batches,
			"seconds": wall.Seconds(), "busy_seconds": busy.Seconds(), "paused_seconds": paused.Seconds(), "retried": retried})
	}
	fmt.Fprintf(out.w, "removed %d succeeded or failed record(s) last changed before %s\n", n, cutoff.UTC().Format(time.RFC3339))
	fmt.Fprintf(out.w, "%d batch(es) in %.1f s: %.1f s deleting, %.1f s paused for live writes; %d retried\n", batches, wall.Seconds(), busy.Seconds(), paused.Seconds(), retried)
	return exitOK
}
