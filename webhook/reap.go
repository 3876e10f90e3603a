package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MinRetention is the shortest retention Reap and Config.Retention accept.
// Once a processed event is removed, a late duplicate of it (a dashboard
// resend, a doubled TRANSACTION_PAID) is processed again, and a removed dead
// event can no longer be retried; a week keeps both out of reach of any
// resend an operator or PagPolar is likely to make, and gives an operator a
// week to look at what died. It is the key stores' minimum too.
const MinRetention = 7 * 24 * time.Hour

// DefaultReapBatch is how many events one DeleteExpired call removes: a
// batch is one short statement or a few small scripts, so live deliveries
// and claims wait at most one batch behind a purge.
const DefaultReapBatch = 100

// DefaultReapBatchTimeout bounds one batch of Reap unless
// ReapOptions.BatchTimeout says otherwise.
const DefaultReapBatchTimeout = 10 * time.Second

// ReapOptions configures Reap.
type ReapOptions struct {
	// Retention: events last changed more than this before Now are removed
	// (default DefaultRetention; below MinRetention is an error).
	Retention time.Duration
	// Batch is the most events one DeleteExpired call removes (default
	// DefaultReapBatch).
	Batch int
	// Pause is a wait between batches, so a large purge leaves the store to
	// live traffic between them (default none).
	Pause time.Duration
	// BatchTimeout bounds each DeleteExpired call (default
	// DefaultReapBatchTimeout), whatever ctx says: a batch stuck on a lock
	// or a dead connection ends Reap with an error instead of hanging.
	BatchTimeout time.Duration
	// Now is the caller's time the cut-off is taken from (default
	// time.Now()). The cut-off is compared with UpdatedAt, which the store
	// keeps by its own clock; a clock off by minutes moves it by minutes.
	Now time.Time
	// Clock times the pauses (default the system clock).
	Clock Clock
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
		return fmt.Errorf("batch %d: negative", o.Batch)
	}
	if o.Pause < 0 {
		return fmt.Errorf("pause %v: negative", o.Pause)
	}
	if o.BatchTimeout == 0 {
		o.BatchTimeout = DefaultReapBatchTimeout
	}
	if o.BatchTimeout < 0 {
		return fmt.Errorf("batch timeout %v: negative", o.BatchTimeout)
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	return nil
}

// Cutoff is the time before which Reap removes events (Now - Retention).
func (o ReapOptions) Cutoff() time.Time {
	if err := o.fill(); err != nil {
		return time.Time{}
	}
	return o.Now.Add(-o.Retention)
}

// Reap removes the processed and dead events of s last changed before the
// cut-off (o.Now - o.Retention), one batch of at most o.Batch per
// DeleteExpired call (each within o.BatchTimeout), until a batch removes
// fewer than o.Batch. It never
// removes a received, processing or error event: those are unfinished. It
// returns how many events it removed, also when it stops early on an error
// or when ctx ends.
func Reap(ctx context.Context, s Store, o ReapOptions) (int, error) {
	if s == nil {
		return 0, errors.New("webhook: reap: nil store")
	}
	if err := o.fill(); err != nil {
		return 0, fmt.Errorf("webhook: reap: %w", err)
	}
	before := o.Now.Add(-o.Retention)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("webhook: reap: %w", err)
		}
		bctx, cancel := context.WithTimeout(ctx, o.BatchTimeout)
		n, err := s.DeleteExpired(bctx, before, o.Batch)
		cancel()
		total += n
		if err != nil {
			return total, fmt.Errorf("webhook: reap: %w", err)
		}
		if n < o.Batch {
			return total, nil
		}
		if o.Pause > 0 {
			select {
			case <-ctx.Done():
				return total, fmt.Errorf("webhook: reap: %w", ctx.Err())
			case <-o.Clock.After(o.Pause):
			}
		}
	}
}

// ReapCandidates lists up to limit of the events Reap with o would remove,
// oldest first, without removing anything: a dry run.
func ReapCandidates(ctx context.Context, s Store, o ReapOptions, limit int) ([]Record, error) {
	if s == nil {
		return nil, errors.New("webhook: reap: nil store")
	}
	if err := o.fill(); err != nil {
		return nil, fmt.Errorf("webhook: reap: %w", err)
	}
	return s.List(ctx, Filter{States: []State{StateProcessed, StateDead}, UpdatedBefore: o.Now.Add(-o.Retention), Limit: limit})
}
