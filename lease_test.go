// The lease an operation holds while it runs: long waits and slow lookups
// keep it.

package pagpolar

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Lookups that take longer than LeaseTTL (read route timing out) make
// the settle loop return ErrLeaseLost, not ErrOutcomeUnknown, though nobody
// else took the operation.
func TestLease_SlowLookupsKeepTheLease(t *testing.T) {
	pol := testPolicy()
	pol.AttemptTimeout = 80 * time.Millisecond
	pol.LeaseTTL = 300 * time.Millisecond
	f := newFixture(t, nil, WithRetryPolicy(pol))
	f.warm(t, f.c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.FaultHold, Delay: 150 * time.Millisecond})
	_, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-slowlk", Customer: goodCustomer})
	t.Logf("err: %v", err)
	if !isUnknown(err) {
		t.Errorf("BUG: got %v (ErrLeaseLost=%v), want ErrOutcomeUnknown", err, errors.Is(err, ErrLeaseLost))
	}
}

// An accepted policy under which one 429 with a long Retry-After (and a
// slow token source) made a call lose its own lease: ErrLeaseLost,
// "another worker took over", with no other worker.
func TestLease_LongWaitsKeepTheLease(t *testing.T) {
	pol := testPolicy()
	pol.AttemptTimeout, pol.MaxRetryAfter, pol.LeaseTTL = 400*time.Millisecond, time.Second, 1900*time.Millisecond
	var slow atomic.Bool
	// Every answer takes most of an attempt, and so does the token source.
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithLatency(350 * time.Millisecond)})
	c, err := NewClient(f.srv.CredentialID, TokenFunc(func(ctx context.Context) (string, error) {
		if slow.Load() {
			select {
			case <-time.After(350 * time.Millisecond):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return f.srv.Token, nil
	}), WithBaseURL(f.srv.URL), WithStore(f.store), WithRetryPolicy(pol), WithLogger(quiet))
	if err != nil {
		t.Fatalf("the policy is valid: %v", err)
	}
	warmClock(f, c)
	slow.Store(true)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultRateLimit, Delay: time.Minute, Times: 1})
	if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-lease", Customer: goodCustomer}); err != nil {
		t.Fatalf("%v (lease lost: %v)", err, errors.Is(err, ErrLeaseLost))
	}
	// A policy whose lease cannot outlast a wait and an attempt is refused.
	pol.LeaseTTL = time.Second
	if _, err := NewClient("c", StaticToken("t"), WithStore(keystore.NewMemory()), WithRetryPolicy(pol)); !errors.Is(err, ErrValidation) {
		t.Fatalf("short lease accepted: %v", err)
	}
}

// TestLease_RecordCreatedAgainUnderTheSameTokenIsLost: a key store that
// lost the record a call holds (a Redis restarted without persistence)
// lets another worker create it again, and that record's first lease
// carries the token this call's did. The renewal succeeds on the token
// alone; the call must see that the record is not the one it took, and
// stop (lease lost) instead of writing into, and sending for, another
// worker's operation.
func TestLease_RecordCreatedAgainUnderTheSameTokenIsLost(t *testing.T) {
	ctx := context.Background()
	clk := pagpolartest.NewClock()
	before := keystore.NewMemoryWithClock(clk)
	c, err := NewClient("cred", StaticToken("t"), WithBaseURL("http://127.0.0.1:1/v1"), WithStore(before), WithClock(clk), WithRetryPolicy(testPolicy()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	rec := keystore.Record{OperationID: c.storeID("pix:order-again"), Key: c.idempotencyKey("pix:order-again"), Kind: "pix", State: keystore.StatePending}
	held, err := before.Create(ctx, rec, "worker-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e := &exec{c: c, s: &opSpec{kind: "pix", id: "pix:order-again"}, rec: held, owner: "worker-a"}
	if err := e.renew(ctx); err != nil {
		t.Fatalf("renewing the record it holds: %v", err)
	}
	// The store comes back empty; another worker creates the record again.
	clk.Advance(time.Second)
	after := keystore.NewMemoryWithClock(clk)
	again, err := after.Create(ctx, rec, "worker-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if again.LeaseToken != held.LeaseToken {
		t.Fatalf("the recreated record's token is %d, the held one's %d: the case this test is about needs them equal", again.LeaseToken, held.LeaseToken)
	}
	c.store = after
	if err := e.renew(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renewing after the record was created again: %v, want ErrLeaseLost", err)
	}
}
