package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

func TestProcessesOnceAndAcknowledgesDuplicates(t *testing.T) {
	var eff effects
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.Handlers = map[string]webhook.HandlerFunc{
			wire.EventTransactionPaid: func(_ context.Context, ev *webhook.Event) error {
				if ev.Transaction().Status != "paid" || ev.Attempt != 1 {
					return webhook.Permanent(fmt.Errorf("unexpected event %+v", ev))
				}
				eff.add(ev.Key)
				return nil
			},
		}
	}).start()
	const key = "TRANSACTION_PAID:sale_1"
	h.post(txEnv(wire.EventTransactionPaid, "sale_1", "paid"))
	r := h.waitOutcome(key, webhook.StateProcessed)
	if r.Attempts != 1 || r.LeaseOwner != "" {
		t.Errorf("processed record %+v", r)
	}
	// PagPolar's double TRANSACTION_PAID and a dashboard resend.
	for range 2 {
		if w := h.post(txEnv(wire.EventTransactionPaid, "sale_1", "paid")); w.Code != http.StatusOK {
			t.Fatalf("duplicate: %d", w.Code)
		}
	}
	if got := h.get(key); got.Deliveries != 3 || got.State != webhook.StateProcessed || got.Attempts != 1 {
		t.Errorf("after duplicates: %+v", got)
	}
	h.shutdown() // drains: nothing may run after this
	if n := eff.get(key); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestFailsThenSucceeds(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, nil, nil, func(c *webhook.Config) {
		c.Default = func(_ context.Context, ev *webhook.Event) error {
			if calls.Add(1) == 1 {
				return errors.New("order database down")
			}
			return nil
		}
	}).start()
	const key = "TRANSACTION_PAID:s1"
	h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"))
	failed := h.waitOutcome(key, webhook.StateError)
	if failed.LastError != "order database down" || failed.Attempts != 1 {
		t.Errorf("after the failure: %+v", failed)
	}
	if d := failed.NextAttemptAt.Sub(failed.UpdatedAt); d != 30*time.Second {
		t.Errorf("backoff %v, want 30s", d)
	}
	h.clock.Advance(30 * time.Second)
	ok := h.waitOutcome(key, webhook.StateProcessed)
	if ok.Attempts != 2 || calls.Load() != 2 {
		t.Errorf("processed after %d attempts, %d calls; want 2, 2", ok.Attempts, calls.Load())
	}
}

func TestAlwaysFailingEventGoesDead(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, nil, nil, func(c *webhook.Config) {
		c.Default = func(context.Context, *webhook.Event) error {
			calls.Add(1)
			return errors.New("cannot apply")
		}
	}).start()
	const key = "TRANSACTION_PAID:s1"
	h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"))
	for i := 1; i < 3; i++ {
		h.waitOutcome(key, webhook.StateError)
		h.clock.Advance(30 * time.Second)
	}
	dead := h.waitOutcome(key, webhook.StateDead)
	if dead.Attempts != 3 || !strings.Contains(dead.LastError, "attempt 3 of 3: cannot apply") {
		t.Errorf("dead record %+v", dead)
	}
	// Dead stays dead: time passing and a resend do not run it again.
	h.clock.Advance(time.Hour)
	h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"))
	rs, err := h.in.List(context.Background(), webhook.Filter{States: []webhook.State{webhook.StateDead}})
	if err != nil || len(rs) != 1 || rs[0].Key != key {
		t.Fatalf("List(dead) = %v, %v", rs, err)
	}
	// An operator fixes the cause and retries it.
	if _, err := h.in.Retry(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	h.waitOutcome(key, webhook.StateError) // still failing: attempts restart at 1
	h.shutdown()
	if n := calls.Load(); n != 4 {
		t.Errorf("handler ran %d times, want 4 (3, then 1 after Retry)", n)
	}
}

func TestPermanentErrorAndPanic(t *testing.T) {
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.Handlers = map[string]webhook.HandlerFunc{
			wire.EventTransactionPaid: func(context.Context, *webhook.Event) error {
				return webhook.Permanent(errors.New("unknown order"))
			},
			wire.EventTransactionCreated: func(context.Context, *webhook.Event) error { panic("boom") },
		}
		c.Default = nil
	}).start()
	h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"))
	if r := h.waitOutcome("TRANSACTION_PAID:s1", webhook.StateDead); r.Attempts != 1 || r.LastError != "permanent: unknown order" {
		t.Errorf("permanent: %+v", r)
	}
	h.post(txEnv(wire.EventTransactionCreated, "s2", "pending"))
	if r := h.waitOutcome("TRANSACTION_CREATED:s2", webhook.StateError); r.LastError != "handler panicked: boom" {
		t.Errorf("panic recorded as %q", r.LastError)
	}
	// No handler for this event and no Default: recorded, never run.
	h.post(txEnv(wire.EventTransactionRefunded, "s3", "refunded"))
	if r := h.waitOutcome("TRANSACTION_REFUNDED:s3", webhook.StateProcessed); !strings.Contains(r.LastError, "no handler") {
		t.Errorf("unhandled event: %+v", r)
	}
}

// One event at a time per sale; different sales in parallel.
func TestOneAtATimePerEntity(t *testing.T) {
	var mu sync.Mutex
	running := map[string]int{}
	maxSeen := 0
	started := make(chan string, 16)
	release := make(chan struct{})
	var order []string
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.Workers = 4
		c.Default = func(_ context.Context, ev *webhook.Event) error {
			id := ev.Transaction().ID
			mu.Lock()
			running[id]++
			maxSeen = max(maxSeen, running[id])
			order = append(order, ev.Name+":"+id)
			mu.Unlock()
			started <- id
			<-release
			mu.Lock()
			running[id]--
			mu.Unlock()
			return nil
		}
	}).start()
	h.post(txEnv(wire.EventTransactionCreated, "A", "pending"))
	if id := <-started; id != "A" {
		t.Fatalf("first started %s", id)
	}
	h.post(txEnv(wire.EventTransactionPaid, "A", "paid")) // must wait for CREATED of A
	h.post(txEnv(wire.EventTransactionCreated, "B", "pending"))
	if id := <-started; id != "B" {
		t.Fatalf("while A runs, %s started; want B (another sale runs in parallel)", id)
	}
	select {
	case id := <-started:
		t.Fatalf("%s started while A's first event still runs", id)
	default:
	}
	close(release)
	h.waitOutcome("TRANSACTION_PAID:A", webhook.StateProcessed)
	h.shutdown()
	mu.Lock()
	defer mu.Unlock()
	if maxSeen != 1 {
		t.Errorf("a sale had %d events running at once, want 1", maxSeen)
	}
	if order[0] != "TRANSACTION_CREATED:A" || order[2] != "TRANSACTION_PAID:A" {
		t.Errorf("order %v", order)
	}
}

func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	var eff effects
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.Workers = 8
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	}).start()
	const n = 32
	var wg sync.WaitGroup
	codes := make(chan int, n)
	for range n {
		wg.Go(func() {
			codes <- h.post(txEnv(wire.EventTransactionPaid, "s1", "paid")).Code
		})
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Errorf("a concurrent duplicate got %d", c)
		}
	}
	h.waitOutcome("TRANSACTION_PAID:s1", webhook.StateProcessed)
	h.shutdown()
	if got := eff.get("TRANSACTION_PAID:s1"); got != 1 {
		t.Errorf("handler ran %d times, want 1", got)
	}
	if r := h.get("TRANSACTION_PAID:s1"); r.Deliveries != n {
		t.Errorf("deliveries %d, want %d", r.Deliveries, n)
	}
}

// The answer never waits for processing: the handler is still blocked when
// the 200 comes back.
func TestAnswersBeforeProcessing(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			close(entered)
			<-release
			return nil
		}
	}).start()
	if w := h.post(txEnv(wire.EventTransactionPaid, "s1", "paid")); w.Code != http.StatusOK {
		t.Fatalf("%d", w.Code)
	}
	<-entered // the handler runs, and has not returned
	close(release)
	h.waitOutcome("TRANSACTION_PAID:s1", webhook.StateProcessed)
}

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

// renewSpy reports every successful Renew.
type renewSpy struct {
	webhook.Store
	renewed chan webhook.Record
}

func (r *renewSpy) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (webhook.Record, error) {
	rec, err := r.Store.Renew(ctx, key, token, ttl)
	if err == nil {
		r.renewed <- rec
	}
	return rec, err
}

// The lease is renewed while a long handler runs, so nobody else takes the
// event; a lost lease cancels the handler.
func TestLeaseRenewedWhileHandlerRuns(t *testing.T) {
	clock := newWatchedClock(10 * time.Second)
	store := &renewSpy{Store: webhook.NewMemoryStoreWithClock(clock), renewed: make(chan webhook.Record, 16)}
	entered := make(chan struct{})
	release := make(chan struct{})
	h := newHarness(t, store, clock, func(c *webhook.Config) {
		c.LeaseTTL = 30 * time.Second
		c.HandlerTimeout = -1
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			close(entered)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}).start()
	h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"))
	<-entered
	const key = "TRANSACTION_PAID:s1"
	exp := h.get(key).LeaseExpiresAt
	// Move time in steps of the renewal period (TTL/3): 60 s in all, twice
	// the TTL; each step's renewal must push the expiry further.
	for i := range 6 {
		clock.waiting(t)
		clock.Advance(10 * time.Second)
		select {
		case r := <-store.renewed:
			if !r.LeaseExpiresAt.After(exp) {
				t.Fatalf("renewal %d did not extend the lease: %v then %v", i, exp, r.LeaseExpiresAt)
			}
			exp = r.LeaseExpiresAt
		case <-time.After(waitFor):
			t.Fatalf("no renewal after step %d", i)
		}
	}
	if _, err := store.Claim(context.Background(), key, "intruder", time.Minute); !errors.Is(err, webhook.ErrLeaseHeld) {
		t.Fatalf("Claim by another process after 60 s of renewals: %v, want ErrLeaseHeld", err)
	}
	close(release)
	if r := h.waitOutcome(key, webhook.StateProcessed); r.Attempts != 1 {
		t.Errorf("attempts %d, want 1", r.Attempts)
	}
}

func TestLostLeaseCancelsHandler(t *testing.T) {
	clock := newWatchedClock(10 * time.Second)
	store := webhook.NewMemoryStoreWithClock(clock)
	entered := make(chan struct{})
	cause := make(chan error, 1)
	h := newHarness(t, store, clock, func(c *webhook.Config) {
		c.LeaseTTL = 30 * time.Second
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			if ev.Attempt > 1 {
				return nil
			}
			close(entered)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		}
	}).start()
	h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"))
	<-entered
	// The process stalls past its lease (a long GC pause, a frozen VM): the
	// next renewal finds the lease expired.
	clock.waiting(t)
	clock.Advance(31 * time.Second)
	if err := <-cause; err == nil || !strings.Contains(err.Error(), "lease") {
		t.Errorf("handler cancelled with cause %v, want the lost lease", err)
	}
	r := h.waitOutcome("TRANSACTION_PAID:s1", webhook.StateError)
	if r.Attempts != 1 {
		t.Errorf("%+v", r)
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
	for before := range spy.calls {
		if before.After(clock.Now().Add(-retention - time.Minute)) {
			break
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
