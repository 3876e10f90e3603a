package keystore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// counting records every DeleteExpired call Reap makes.
type counting struct {
	keystore.Store
	limits []int
}

func (c *counting) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	c.limits = append(c.limits, limit)
	return c.Store.DeleteExpired(ctx, before, limit)
}

func put(t *testing.T, s keystore.Store, id string, state keystore.State) {
	t.Helper()
	ctx := context.Background()
	rec, err := s.Create(ctx, keystore.Record{OperationID: id, Key: "k", Kind: "pix", State: keystore.StatePending}, "w", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if state != keystore.StatePending {
		rec.State = state
		if _, err := s.Update(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReap(t *testing.T) {
	ctx := context.Background()
	clock := pagpolartest.NewClock()
	mem := keystore.NewMemoryWithClock(clock)
	states := []keystore.State{keystore.StatePending, keystore.StateUnknown, keystore.StateNotExecuted,
		keystore.StateSucceeded, keystore.StateFailed}
	for i := range 7 {
		for _, st := range states {
			put(t, mem, fmt.Sprintf("old/%s/%d", st, i), st)
		}
	}
	clock.Advance(keystore.DefaultRetention + time.Hour)
	for _, st := range states {
		put(t, mem, "new/"+string(st), st)
	}

	s := &counting{Store: mem}
	n, err := keystore.Reap(ctx, s, keystore.DefaultRetention, 3, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if n != 14 {
		t.Fatalf("Reap removed %d records, want 14 (7 old succeeded + 7 old failed)", n)
	}
	// 14 in batches of 3: 3,3,3,3,2 — the short batch ends the loop.
	if len(s.limits) != 5 {
		t.Fatalf("Reap made %d DeleteExpired calls, want 5", len(s.limits))
	}
	for _, l := range s.limits {
		if l != 3 {
			t.Fatalf("DeleteExpired limit %d, want the batch 3", l)
		}
	}
	left, err := mem.List(ctx, keystore.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 7*3+5 {
		t.Fatalf("%d records left, want %d", len(left), 7*3+5)
	}
	for _, r := range left {
		if r.State.Terminal() && r.OperationID[:4] == "old/" {
			t.Fatalf("old terminal record %s survived", r.OperationID)
		}
	}
	// Unfinished records are never reaped, however old they get.
	clock.Advance(10 * keystore.DefaultRetention)
	n, err = keystore.Reap(ctx, mem, keystore.DefaultRetention, 100, clock.Now())
	if err != nil || n != 2 {
		t.Fatalf("second Reap = %d, %v; want 2 (the new terminal records)", n, err)
	}
	left, _ = mem.List(ctx, keystore.Filter{Limit: 1000})
	for _, r := range left {
		if r.State.Terminal() {
			t.Fatalf("terminal record %s survived", r.OperationID)
		}
	}
	if len(left) != 7*3+3 {
		t.Fatalf("%d unfinished records left, want %d", len(left), 7*3+3)
	}
}

// A batch that comes back full means "maybe more": Reap asks again, and an
// exact multiple of the batch ends with one empty call.
func TestReapExactMultiple(t *testing.T) {
	clock := pagpolartest.NewClock()
	mem := keystore.NewMemoryWithClock(clock)
	for i := range 4 {
		put(t, mem, fmt.Sprintf("s%d", i), keystore.StateSucceeded)
	}
	clock.Advance(keystore.DefaultRetention + time.Second)
	s := &counting{Store: mem}
	n, err := keystore.Reap(context.Background(), s, keystore.DefaultRetention, 2, clock.Now())
	if err != nil || n != 4 || len(s.limits) != 3 {
		t.Fatalf("Reap = %d, %v after %d calls; want 4, nil after 3", n, err, len(s.limits))
	}
}

func TestReapRetentionCounts(t *testing.T) {
	clock := pagpolartest.NewClock()
	mem := keystore.NewMemoryWithClock(clock)
	put(t, mem, "done", keystore.StateSucceeded)
	clock.Advance(keystore.DefaultRetention - time.Minute)
	n, err := keystore.Reap(context.Background(), mem, keystore.DefaultRetention, 10, clock.Now())
	if err != nil || n != 0 {
		t.Fatalf("Reap within retention = %d, %v; want 0, nil", n, err)
	}
}

func TestReapErrors(t *testing.T) {
	mem := keystore.NewMemory()
	ctx := context.Background()
	for _, tc := range []struct {
		retention time.Duration
		batch     int
	}{{0, 10}, {time.Hour, 10}, {keystore.MinRetention - time.Second, 10}, {keystore.DefaultRetention, 0}, {keystore.DefaultRetention, -1}} {
		if _, err := keystore.Reap(ctx, mem, tc.retention, tc.batch, time.Now()); err == nil {
			t.Errorf("Reap(retention %v, batch %d) accepted", tc.retention, tc.batch)
		}
	}
	if _, err := keystore.Reap(ctx, nil, keystore.DefaultRetention, 10, time.Now()); err == nil {
		t.Error("Reap(nil store) accepted")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := keystore.Reap(cctx, mem, keystore.DefaultRetention, 10, time.Now()); !errors.Is(err, context.Canceled) {
		t.Errorf("Reap with a cancelled context: %v, want context.Canceled", err)
	}
	// (Reap would retry DefaultReapRetries times, MaxPause apart: see TestReapWithRetries.)
	if _, err := keystore.ReapWith(ctx, failing{mem}, keystore.ReapOptions{Batch: 10, Retries: -1}); !errors.Is(err, keystore.ErrUnavailable) {
		t.Errorf("Reap on a failing store: %v, want ErrUnavailable", err)
	}
}

type failing struct{ keystore.Store }

func (failing) DeleteExpired(context.Context, time.Time, int) (int, error) {
	return 0, fmt.Errorf("%w: down", keystore.ErrUnavailable)
}

// ReapWith waits between batches (at least MinPause: a timer never fires
// early), reports each batch, and a context that ends during a pause ends
// the reap with what it removed so far.
func TestReapWithPauses(t *testing.T) {
	clock := pagpolartest.NewClock()
	mem := keystore.NewMemoryWithClock(clock)
	for i := range 6 {
		put(t, mem, fmt.Sprintf("s%d", i), keystore.StateSucceeded)
	}
	clock.Advance(keystore.DefaultRetention + time.Second)
	var got []keystore.ReapBatch
	const floor = 30 * time.Millisecond
	start := time.Now()
	n, err := keystore.ReapWith(context.Background(), mem, keystore.ReapOptions{Batch: 2, MinPause: floor, MaxPause: floor,
		Now: clock.Now(), Progress: func(b keystore.ReapBatch) { got = append(got, b) }})
	took := time.Since(start)
	if err != nil || n != 6 {
		t.Fatalf("ReapWith = %d, %v; want 6, nil", n, err)
	}
	// 2, 2, 2, then an empty batch: three pauses, none after the last.
	if len(got) != 4 || got[3].Removed != 0 || got[3].Pause != 0 {
		t.Fatalf("batches %+v; want 4, the last empty and without a pause", got)
	}
	for _, b := range got[:3] {
		if b.Removed != 2 || b.Pause != floor {
			t.Fatalf("batch %+v; want 2 removed and a pause of %v", b, floor)
		}
	}
	if took < 3*floor {
		t.Fatalf("ReapWith took %v, less than its three pauses of %v", took, floor)
	}

	for i := range 4 {
		put(t, mem, fmt.Sprintf("t%d", i), keystore.StateSucceeded)
	}
	clock.Advance(keystore.DefaultRetention + time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	n, err = keystore.ReapWith(ctx, mem, keystore.ReapOptions{Batch: 2, MinPause: time.Hour, MaxPause: time.Hour,
		Now: clock.Now(), Progress: func(keystore.ReapBatch) { cancel() }})
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Fatalf("ReapWith cancelled during its pause = %d, %v; want 2, context.Canceled", n, err)
	}
}

// flaky fails its first fails DeleteExpired calls with ErrUnavailable (or
// with other, when set).
type flaky struct {
	keystore.Store
	fails int
	other error
	calls int
}

func (f *flaky) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	f.calls++
	if f.calls <= f.fails {
		if f.other != nil {
			return 0, f.other
		}
		return 0, fmt.Errorf("%w: locked", keystore.ErrUnavailable)
	}
	return f.Store.DeleteExpired(ctx, before, limit)
}

// A batch the store could not do (ErrUnavailable) is tried again after
// MaxPause, Retries times in a row; then, or on any other error, the reap
// ends with it.
func TestReapWithRetries(t *testing.T) {
	clock := pagpolartest.NewClock()
	mem := keystore.NewMemoryWithClock(clock)
	for i := range 3 {
		put(t, mem, fmt.Sprintf("s%d", i), keystore.StateSucceeded)
	}
	clock.Advance(keystore.DefaultRetention + time.Second)
	o := func(retries int) keystore.ReapOptions {
		return keystore.ReapOptions{Batch: 10, MinPause: time.Millisecond, MaxPause: time.Millisecond, Retries: retries, Now: clock.Now()}
	}
	ctx := context.Background()
	if n, err := keystore.ReapWith(ctx, &flaky{Store: mem, fails: 4}, o(3)); !errors.Is(err, keystore.ErrUnavailable) || n != 0 {
		t.Fatalf("4 failures with 3 retries = %d, %v; want 0, ErrUnavailable", n, err)
	}
	if n, err := keystore.ReapWith(ctx, &flaky{Store: mem, fails: 2, other: errors.New("syntax")}, o(3)); err == nil || errors.Is(err, keystore.ErrUnavailable) || n != 0 {
		t.Fatalf("another error = %d, %v; want it at once", n, err)
	}
	f := &flaky{Store: mem, fails: 3}
	if n, err := keystore.ReapWith(ctx, f, o(-1)); err == nil || f.calls != 1 {
		t.Fatalf("no retries = %d, %v after %d calls; want the error after 1", n, err, f.calls)
	}
	f = &flaky{Store: mem, fails: 2}
	if n, err := keystore.ReapWith(ctx, f, o(2)); err != nil || n != 3 || f.calls != 3 {
		t.Fatalf("2 failures, 2 retries = %d, %v after %d calls; want 3, nil after 3", n, err, f.calls)
	}
}
