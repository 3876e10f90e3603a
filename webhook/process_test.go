// The handler run under an event's lease: the lease is kept while the handler
// runs.

package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// The lease is renewed while the handler runs, even after the handler's
// context ended (HandlerTimeout): a lease left to lapse would let another
// process claim the event and run it beside the handler still running.
func TestLeaseKeptWhileHandlerOverruns(t *testing.T) {
	store := webhook.NewMemoryStore()
	var running, maxRunning, runs atomic.Int32
	slow := func(context.Context, *webhook.Event) error {
		n := running.Add(1)
		runs.Add(1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		time.Sleep(900 * time.Millisecond) // ignores its context on purpose: real time is the subject
		running.Add(-1)
		return nil
	}
	edit := func(c *webhook.Config) {
		c.Default = slow
		c.LeaseTTL = 300 * time.Millisecond
		c.HandlerTimeout = 100 * time.Millisecond
	}
	a := newHarness(t, store, nil, edit).start()
	newHarness(t, store, nil, edit).start() // a second process on the same store
	if rr := a.post(txEnv("TRANSACTION_PAID", "sale_overrun", "paid")); rr.Code != http.StatusOK {
		t.Fatalf("delivery: %d", rr.Code)
	}
	time.Sleep(1500 * time.Millisecond) // let leases expire if they are not renewed
	if m := maxRunning.Load(); m != 1 {
		t.Fatalf("the handler ran %d times at once (%d runs): the lease lapsed while it ran", m, runs.Load())
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
