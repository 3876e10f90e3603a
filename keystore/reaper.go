package keystore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultRetention is how long settled records are kept: well past the
// server's 24 h replay window, so that an operation that already succeeded
// is answered from its record rather than charged again by a late retry.
const DefaultRetention = 30 * 24 * time.Hour

// MinRetention is the shortest retention Reap accepts. Once a record is
// removed, a late retry of its operation (a redelivered job, a replayed
// queue) is sent again; within the server's 24 h window it may be replayed,
// after it it is a new charge. A week bounds that risk to retries older than
// any sane job queue keeps.
const MinRetention = 7 * 24 * time.Hour

// Reap is ReapWith with the given retention, batch and now, and the
// default pacing and retries (DefaultReapYield, DefaultReapMinPause,
// DefaultReapMaxPause, DefaultReapRetries).
func Reap(ctx context.Context, s Store, retention time.Duration, batch int, now time.Time) (int, error) {
	if retention < MinRetention {
		return 0, fmt.Errorf("keystore: reap: retention %v is shorter than the minimum %v", retention, MinRetention)
	}
	if batch <= 0 {
		return 0, fmt.Errorf("keystore: reap: batch %d: want > 0", batch)
	}
	return ReapWith(ctx, s, ReapOptions{Retention: retention, Batch: batch, Now: now})
}

// The pacing defaults: see ReapOptions.
const (
	DefaultReapBatch    = 200
	DefaultReapYield    = 10
	DefaultReapMinPause = 10 * time.Millisecond
	DefaultReapMaxPause = 2 * time.Second
	DefaultReapRetries  = 3
)

// ReapOptions configures ReapWith.
type ReapOptions struct {
	// Retention: records last updated more than this before Now are removed
	// (0: DefaultRetention; below MinRetention is an error).
	Retention time.Duration
	// Batch is the most records one DeleteExpired call removes (0:
	// DefaultReapBatch). On SQLite a batch is one write transaction, during
	// which every other writer of the file waits: keep it small.
	Batch int
	// Yield paces the reap so that live writes keep the store: after each
	// batch that took d, Reap waits Yield × d (at least MinPause, at most
	// MaxPause) before the next one. The reap then holds the store's write
	// lock (SQLite) or its share of the server at most 1/(1+Yield) of the
	// time, and a writer that waited behind a batch, in this process or
	// another one, finds the store free when it retries (SQLite's busy
	// handler retries after 1, 2, 5, 10 ms... : MinPause must exceed the
	// retry interval of a writer that waited one batch). d includes the
	// batch's own wait for the lock or the server, so the busier the store,
	// the longer the pauses. 0: DefaultReapYield; negative: no pause at all
	// (the fastest reap, and the one that stalls live traffic: see
	// BENCHMARKS.md, "Reap under load").
	Yield float64
	// MinPause and MaxPause bound each pause (0: DefaultReapMinPause,
	// DefaultReapMaxPause).
	MinPause, MaxPause time.Duration
	// Now is the caller's time the cut-off is taken from (zero: time.Now()).
	// The cut-off is compared with UpdatedAt, which the store keeps by its
	// own clock.
	Now time.Time
	// Retries is how many times in a row a batch that failed with an error
	// wrapping ErrUnavailable is tried again, after MaxPause each time: on
	// SQLite, a reap in its own process can wait past the store's call
	// timeout for a write lock that busy live writers keep taking (measured
	// at 16 live callers), and a store can be away for a moment. Any other
	// error ends the reap at once. 0: DefaultReapRetries; negative: none.
	Retries int
	// Progress, if set, is called after each batch (from Reap's goroutine).
	Progress func(ReapBatch)
}

// ReapBatch is what one batch of a reap did.
type ReapBatch struct {
	Removed int           // records the batch removed
	Took    time.Duration // how long its DeleteExpired call took
	Pause   time.Duration // the pause that follows it (0 after the last batch)
	Err     error         // a failure that will be retried after Pause (Removed: what the batch removed before it)
}

// reapPause is the wait after a batch that took took: yield × took within
// [min, max]; none when yield < 0.
func reapPause(took time.Duration, yield float64, lo, hi time.Duration) time.Duration {
	if yield < 0 {
		return 0
	}
	p := time.Duration(yield * float64(took))
	if p < lo || p < 0 {
		p = lo
	}
	if p > hi {
		p = hi
	}
	return p
}

func (o *ReapOptions) fill() error {
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Retention < MinRetention {
		return fmt.Errorf("retention %v is shorter than the minimum %v", o.Retention, MinRetention)
	}
	if o.Batch == 0 {
		o.Batch = DefaultReapBatch
	}
	if o.Batch < 0 {
		return fmt.Errorf("batch %d: want > 0", o.Batch)
	}
	if o.Yield == 0 {
		o.Yield = DefaultReapYield
	}
	if o.MinPause == 0 {
		o.MinPause = DefaultReapMinPause
	}
	if o.MaxPause == 0 {
		o.MaxPause = DefaultReapMaxPause
	}
	if o.MinPause < 0 || o.MaxPause < o.MinPause {
		return fmt.Errorf("pauses min %v, max %v: want 0 <= min <= max", o.MinPause, o.MaxPause)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Retries == 0 {
		o.Retries = DefaultReapRetries
	}
	return nil
}

// ReapWith removes the records of s that are Terminal (succeeded, failed)
// and were last updated more than o.Retention before o.Now, in batches of at
// most o.Batch records (each one DeleteExpired call), pausing between
// batches as o.Yield says, until a batch removes fewer than o.Batch (a
// batch the store could not do is tried again, o.Retries times). It
// never removes a pending, unknown or not_executed record: those are
// unfinished and must be settled first. It returns how many records it
// removed, also when it stops early with an error (ctx ending during a
// pause included).
func ReapWith(ctx context.Context, s Store, o ReapOptions) (int, error) {
	if s == nil {
		return 0, errors.New("keystore: reap: nil store")
	}
	if err := o.fill(); err != nil {
		return 0, fmt.Errorf("keystore: reap: %w", err)
	}
	before := o.Now.Add(-o.Retention)
	total, failed := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("keystore: reap: %w", err)
		}
		start := time.Now()
		n, err := s.DeleteExpired(ctx, before, o.Batch)
		took := time.Since(start)
		total += n
		var pause time.Duration
		switch {
		case err != nil && errors.Is(err, ErrUnavailable) && failed < o.Retries && ctx.Err() == nil:
			failed++
			pause = o.MaxPause
			if o.Progress != nil {
				o.Progress(ReapBatch{Removed: n, Took: took, Pause: pause, Err: err})
			}
		case err != nil:
			return total, fmt.Errorf("keystore: reap: %w", err)
		case n < o.Batch:
			if o.Progress != nil {
				o.Progress(ReapBatch{Removed: n, Took: took})
			}
			return total, nil
		default:
			failed = 0
			pause = reapPause(took, o.Yield, o.MinPause, o.MaxPause)
			if o.Progress != nil {
				o.Progress(ReapBatch{Removed: n, Took: took, Pause: pause})
			}
		}
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return total, fmt.Errorf("keystore: reap: %w", ctx.Err())
			case <-t.C:
			}
		}
	}
}
