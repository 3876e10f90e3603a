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
