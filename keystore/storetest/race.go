package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
)

// goroutines is how many callers the race tests start at once.
const goroutines = 64

type outcome struct {
	i   int
	rec keystore.Record
	err error
}

// race runs fn in n goroutines released together and returns their outcomes.
func race(n int, fn func(i int) (keystore.Record, error)) []outcome {
	start := make(chan struct{})
	out := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			rec, err := fn(i)
			out[i] = outcome{i, rec, err}
		}(i)
	}
	close(start)
	wg.Wait()
	return out
}

// oneWinner checks exactly one outcome succeeded, the rest failed with loser,
// and returns the winner.
func oneWinner(t *testing.T, what string, outs []outcome, loser error) outcome {
	t.Helper()
	var winners []outcome
	for _, o := range outs {
		switch {
		case o.err == nil:
			winners = append(winners, o)
		case !errors.Is(o.err, loser):
			t.Fatalf("%s: goroutine %d: %v, want nil or %q", what, o.i, o.err, loser)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%s: %d goroutines succeeded, want exactly 1", what, len(winners))
	}
	return winners[0]
}

func testRaceCreate(t *testing.T, s keystore.Store) {
	outs := race(goroutines, func(i int) (keystore.Record, error) {
		rec := newRecord("race/create")
		rec.Key = fmt.Sprintf("key-%d", i)
		return s.Create(context.Background(), rec, fmt.Sprintf("owner-%d", i), longTTL)
	})
	w := oneWinner(t, "concurrent Create", outs, keystore.ErrExists)
	if w.rec.Key != fmt.Sprintf("key-%d", w.i) || w.rec.LeaseOwner != fmt.Sprintf("owner-%d", w.i) || w.rec.LeaseToken != 1 || w.rec.Version != 1 {
		t.Fatalf("winner %d got record %+v", w.i, w.rec)
	}
	for _, o := range outs {
		if o.err != nil {
			wantSame(t, fmt.Sprintf("goroutine %d's ErrExists record", o.i), o.rec, w.rec)
		}
	}
	wantStored(t, s, "winning Create", w.rec)
}

func testRaceAcquire(t *testing.T, s keystore.Store) {
	rec := create(t, s, "race/acquire", "creator", longTTL)
	if err := s.Release(context.Background(), rec.OperationID, rec.LeaseToken); err != nil {
		t.Fatalf("Release: %v", err)
	}
	outs := race(goroutines, func(i int) (keystore.Record, error) {
		return s.Acquire(context.Background(), rec.OperationID, fmt.Sprintf("owner-%d", i), longTTL)
	})
	w := oneWinner(t, "concurrent Acquire", outs, keystore.ErrLeaseHeld)
	if w.rec.LeaseOwner != fmt.Sprintf("owner-%d", w.i) || w.rec.LeaseToken != rec.LeaseToken+1 {
		t.Fatalf("winner %d got lease (%q, %d), want (owner-%d, %d)", w.i, w.rec.LeaseOwner, w.rec.LeaseToken, w.i, rec.LeaseToken+1)
	}
	for _, o := range outs {
		if o.err != nil && (o.rec.LeaseOwner != w.rec.LeaseOwner || o.rec.LeaseToken != w.rec.LeaseToken) {
			t.Fatalf("goroutine %d refused with lease (%q, %d), want the winner's (%q, %d)",
				o.i, o.rec.LeaseOwner, o.rec.LeaseToken, w.rec.LeaseOwner, w.rec.LeaseToken)
		}
	}
	wantStored(t, s, "winning Acquire", w.rec)
}

func testRaceTakeover(t *testing.T, s keystore.Store) {
	old := create(t, s, "race/takeover", "crashed", shortTTL)
	create(t, s, "race/takeover/probe", "crashed", shortTTL)
	waitStorePast(t, s, "race/takeover/probe")
	outs := race(goroutines, func(i int) (keystore.Record, error) {
		return s.Acquire(context.Background(), old.OperationID, fmt.Sprintf("owner-%d", i), longTTL)
	})
	w := oneWinner(t, "concurrent takeover", outs, keystore.ErrLeaseHeld)
	if w.rec.LeaseToken != old.LeaseToken+1 {
		t.Fatalf("token after takeover = %d, want %d", w.rec.LeaseToken, old.LeaseToken+1)
	}
	_, err := s.Update(context.Background(), withAttempts(old, 1))
	wantErr(t, "Update by the crashed holder", err, keystore.ErrLeaseLost)
	update(t, s, w.rec, func(r *keystore.Record) { r.Attempts = 1 })
}

func testRaceUpdate(t *testing.T, s keystore.Store) {
	rec := create(t, s, "race/update", "owner", longTTL)
	outs := race(goroutines, func(i int) (keystore.Record, error) {
		return s.Update(context.Background(), withAttempts(rec, i+1))
	})
	w := oneWinner(t, "concurrent Update of one version", outs, keystore.ErrConflict)
	if w.rec.Attempts != w.i+1 || w.rec.Version != rec.Version+1 {
		t.Fatalf("winner %d stored attempts %d version %d", w.i, w.rec.Attempts, w.rec.Version)
	}
	wantStored(t, s, "winning Update", w.rec)
}

// testRaceCounter has workers take turns through the lease to increment a
// counter: lost updates would show as a short count.
func testRaceCounter(t *testing.T, s keystore.Store) {
	const workers, rounds = 16, 4
	rec := create(t, s, "race/counter", "creator", longTTL)
	if err := s.Release(context.Background(), rec.OperationID, rec.LeaseToken); err != nil {
		t.Fatalf("Release: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			errs <- counterWorker(ctx, s, rec.OperationID, fmt.Sprintf("worker-%d", w), rounds)
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got := get(t, s, rec.OperationID)
	if got.Attempts != workers*rounds {
		t.Fatalf("counter = %d, want %d: an update was lost", got.Attempts, workers*rounds)
	}
	if got.LeaseToken != rec.LeaseToken+workers*rounds {
		t.Fatalf("LeaseToken = %d, want %d (one per acquisition)", got.LeaseToken, rec.LeaseToken+workers*rounds)
	}
}

func counterWorker(ctx context.Context, s keystore.Store, id, owner string, rounds int) error {
	for r := 0; r < rounds; {
		lease, err := s.Acquire(ctx, id, owner, longTTL)
		if errors.Is(err, keystore.ErrLeaseHeld) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: waiting for the lease: %w", owner, ctx.Err())
			case <-time.After(time.Millisecond):
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: Acquire: %w", owner, err)
		}
		lease.Attempts++
		if _, err := s.Update(ctx, lease); err != nil {
			return fmt.Errorf("%s: Update while holding the lease: %w", owner, err)
		}
		if err := s.Release(ctx, id, lease.LeaseToken); err != nil {
			return fmt.Errorf("%s: Release: %w", owner, err)
		}
		r++
	}
	return nil
}

func testRaceDistinct(t *testing.T, s keystore.Store) {
	const per = 4
	outs := race(goroutines, func(i int) (keystore.Record, error) {
		var last keystore.Record
		for j := range per {
			id := fmt.Sprintf("many/%02d/%d", i, j)
			rec, err := s.Create(context.Background(), newRecord(id), "w", longTTL)
			if err != nil {
				return rec, fmt.Errorf("Create(%s): %w", id, err)
			}
			if rec, err = s.Update(context.Background(), withAttempts(rec, j+1)); err != nil {
				return rec, fmt.Errorf("Update(%s): %w", id, err)
			}
			last = rec
		}
		return last, nil
	})
	for _, o := range outs {
		if o.err != nil {
			t.Fatalf("goroutine %d: %v", o.i, o.err)
		}
	}
	got := list(t, s, keystore.Filter{Prefix: "many/", Limit: goroutines * per})
	if len(got) != goroutines*per {
		t.Fatalf("List found %d records, want %d", len(got), goroutines*per)
	}
	for _, r := range got {
		var i, j int
		if _, err := fmt.Sscanf(r.OperationID, "many/%d/%d", &i, &j); err != nil || r.Attempts != j+1 || r.Version != 2 {
			t.Fatalf("record %s: attempts %d version %d", r.OperationID, r.Attempts, r.Version)
		}
	}
}
