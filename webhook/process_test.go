// The handler run under an event's lease: the lease is kept while the handler
// runs.

package webhook_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

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
