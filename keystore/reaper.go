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

// Reap removes the records of s that are Terminal (succeeded, failed) and
// were last updated more than retention before now, in batches of at most
// batch records (each one DeleteExpired call), until a batch removes fewer
// than batch. It never removes a pending, unknown or not_executed record:
// those are unfinished and must be settled first. It returns how many
// records it removed, also when it stops early with an error.
//
// now is the caller's time (time.Now() in production, a test clock in
// tests); the cut-off is compared with UpdatedAt, which the store keeps by
// its own clock.
func Reap(ctx context.Context, s Store, retention time.Duration, batch int, now time.Time) (int, error) {
	if s == nil {
		return 0, errors.New("keystore: reap: nil store")
	}
	if retention < MinRetention {
		return 0, fmt.Errorf("keystore: reap: retention %v is shorter than the minimum %v", retention, MinRetention)
	}
	if batch <= 0 {
		return 0, fmt.Errorf("keystore: reap: batch %d: want > 0", batch)
	}
	before := now.Add(-retention)
	total := 0
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("keystore: reap: %w", err)
		}
		n, err := s.DeleteExpired(ctx, before, batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("keystore: reap: %w", err)
		}
		if n < batch {
			return total, nil
		}
	}
}
