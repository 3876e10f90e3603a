// The inbox across shutdowns, restarts and retention: a shutdown drains or
// hands events back, a restart resumes every event once, and retention
// removes processed and dead events.

package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// Shutdown waits for running handlers; deliveries after it are stored for
// the next start.
func TestShutdownDrains(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan string, 2)
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			entered <- ev.Key
			<-release
			return nil
		}
	}).start()
	h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"))
	<-entered
	done := make(chan error, 1)
	go func() { done <- h.in.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned (%v) while a handler runs", err)
	default:
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := h.get("TRANSACTION_PAID:s1"); r.State != webhook.StateProcessed {
		t.Errorf("drained event is %s", r.State)
	}
	if w := h.post(txEnv(wire.EventTransactionPaid, "s2", "paid")); w.Code != http.StatusOK {
		t.Fatalf("delivery after shutdown: %d", w.Code)
	}
	if r := h.get("TRANSACTION_PAID:s2"); r.State != webhook.StateReceived || len(entered) != 0 {
		t.Errorf("event stored after shutdown is %s (%d runs), want received, never run", r.State, len(entered))
	}
	if err := h.in.Start(); err == nil {
		t.Errorf("Start after Shutdown succeeded")
	}
}

func TestShutdownOutOfTimeHandsBack(t *testing.T) {
	entered := make(chan struct{})
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			close(entered)
			<-ctx.Done()
			return ctx.Err()
		}
	}).start()
	h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"))
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.in.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	r := h.waitOutcome("TRANSACTION_PAID:s1", webhook.StateReceived)
	if !strings.HasPrefix(r.LastError, "interrupted by shutdown") || r.LeaseOwner != "" || r.Attempts != 0 {
		t.Errorf("handed back %+v; want no owner and the attempt given back", r)
	}
}

// A restart midway: the first process dies with one event leased, one event
// arrives while nothing runs; the next process runs each once.
func TestRestartResumesEverythingOnce(t *testing.T) {
	clock := pagpolartest.NewClock()
	store := webhook.NewMemoryStoreWithClock(clock)
	var eff effects
	zombie := make(chan struct{})
	entered := make(chan struct{})
	first := newHarness(t, store, clock, func(c *webhook.Config) {
		c.Owner = "process-1"
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			if ev.Transaction().ID == "B" {
				close(entered)
				<-zombie // the process is gone: this never gets to apply anything
				return errors.New("killed")
			}
			eff.add(ev.Key)
			return nil
		}
	}).start()
	first.post(txEnv(wire.EventTransactionPaid, "A", "paid"))
	first.waitOutcome("TRANSACTION_PAID:A", webhook.StateProcessed)
	first.post(txEnv(wire.EventTransactionPaid, "B", "paid"))
	<-entered
	// "Crash": stop with no time left; B stays leased by process-1.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = first.in.Shutdown(ctx)
	first.post(txEnv(wire.EventTransactionPaid, "C", "paid")) // stored, nobody processing

	second := newHarness(t, store, clock, func(c *webhook.Config) {
		c.Owner = "process-2"
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	}).start()
	second.waitOutcome("TRANSACTION_PAID:C", webhook.StateProcessed)
	if r := second.get("TRANSACTION_PAID:B"); r.State != webhook.StateProcessing || r.LeaseOwner != "process-1" {
		t.Fatalf("B before its lease expires: %+v", r)
	}
	clock.Advance(webhook.DefaultLeaseTTL)
	b := second.waitOutcome("TRANSACTION_PAID:B", webhook.StateProcessed)
	if b.Attempts != 2 {
		t.Errorf("B attempts %d, want 2 (the crashed one counts)", b.Attempts)
	}
	// The dead process's handler finally returns: its outcome is fenced off.
	close(zombie)
	// Duplicates after the restart are acknowledged, not run.
	for _, id := range []string{"A", "B", "C"} {
		if w := second.post(txEnv(wire.EventTransactionPaid, id, "paid")); w.Code != http.StatusOK {
			t.Fatalf("%d", w.Code)
		}
	}
	second.shutdown()
	waitState(t, store, "TRANSACTION_PAID:B", webhook.StateProcessed)
	for _, id := range []string{"A", "B", "C"} {
		if n := eff.get("TRANSACTION_PAID:" + id); n != 1 {
			t.Errorf("%s applied %d times, want 1", id, n)
		}
	}
}

func waitState(t *testing.T, s webhook.Store, key string, st webhook.State) {
	t.Helper()
	r, err := s.Get(context.Background(), key)
	if err != nil || r.State != st {
		t.Fatalf("%s = %+v, %v; want %s", key, r, err, st)
	}
}

// purgeSpy reports DeleteExpired calls.
type purgeSpy struct {
	webhook.Store
	calls chan time.Time
}

func (p *purgeSpy) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	n, err := p.Store.DeleteExpired(ctx, before, limit)
	p.calls <- before
	return n, err
}

func TestRetentionRemovesProcessedAndDeadEvents(t *testing.T) {
	clock := pagpolartest.NewClock()
	spy := &purgeSpy{Store: webhook.NewMemoryStoreWithClock(clock), calls: make(chan time.Time, 16)}
	const retention = 8 * 24 * time.Hour
	h := newHarness(t, spy, clock, func(c *webhook.Config) {
		c.Retention = retention
		c.Handlers = map[string]webhook.HandlerFunc{
			wire.EventTransactionDeclined: func(context.Context, *webhook.Event) error { return webhook.Permanent(errors.New("poison")) },
			wire.EventTransactionCreated:  func(context.Context, *webhook.Event) error { return errors.New("not yet") },
		}
	})
	h.post(txEnv(wire.EventTransactionPaid, "old", "paid"))
	h.post(txEnv(wire.EventTransactionDeclined, "dead", "declined"))
	h.post(txEnv(wire.EventTransactionCreated, "failing", "pending"))
	h.start()
	h.waitOutcome("TRANSACTION_PAID:old", webhook.StateProcessed)
	h.waitOutcome("TRANSACTION_DECLINED:dead", webhook.StateDead)
	h.waitOutcome("TRANSACTION_CREATED:failing", webhook.StateError)
	<-spy.calls // the purge at start
	clock.Advance(retention + 24*time.Hour)
	h.post(txEnv(wire.EventTransactionPaid, "new", "paid"))
	h.waitOutcome("TRANSACTION_PAID:new", webhook.StateProcessed)
	// The purger sets its next timer only after a purge returns: an
	// Advance that came first leaves that timer a whole interval ahead of
	// the fake clock. So the clock moves on an interval at a time until a
	// purge past the step runs, within a bound of its own.
	cutoff := clock.Now().Add(-retention - time.Minute)
	bound := time.After(30 * time.Second)
	for purged := false; !purged; {
		select {
		case before := <-spy.calls:
			purged = before.After(cutoff)
		case <-time.After(100 * time.Millisecond):
			clock.Advance(time.Hour) // the purge interval
		case <-bound:
			t.Fatal("no purge ran in 30 s after the clock passed retention")
		}
	}
	for _, k := range []string{"TRANSACTION_PAID:old", "TRANSACTION_DECLINED:dead"} {
		if _, err := spy.Get(context.Background(), k); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("%s past retention: %v, want removed", k, err)
		}
	}
	for _, k := range []string{"TRANSACTION_PAID:new", "TRANSACTION_CREATED:failing"} {
		if _, err := spy.Get(context.Background(), k); err != nil {
			t.Errorf("%s (recent, or unfinished): %v, want kept", k, err)
		}
	}
}
