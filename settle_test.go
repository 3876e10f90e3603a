// The settle loop after an ambiguous send: when a not-found becomes
// conclusive, and what a store error there means.

package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TrustAfter is a client-clock instant, and is read by another host.
//
// opMeta.TrustAfter ("when a not-found becomes conclusive") is written
// with the sending host's clock and compared, in settle and resume, with
// the clock of whichever host continues the operation. Rule 12: client
// clocks may be minutes apart. Host 1 gets the API's own 500 after the
// commit (TrustAfter = now + SettleDelay, 2 s, the allowance for a lookup
// that lags behind the commit) and its caller's context ends. Host 2,
// whose clock is 5 s ahead, continues the operation at once: its lookup is
// "conclusive" immediately, the sale is still hidden by a 500 ms lag
// (well inside SettleDelay) and the charge is resent: two sales. ResumeAll
// on host 2 settles the same record not_executed while the sale exists.
// Host 1 alone, or host 2 with an exact clock, settles on the one sale
// (the "control" subtests).
func TestSettle_NotFoundWindowHoldsOnAnotherHostsClock(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		offset time.Duration
		resume bool
	}{
		{"call/host2-5s-ahead", 5 * time.Second, false},
		{"resumeall/host2-5s-ahead", 5 * time.Second, true},
		{"control/call/host2-exact", 0, false},
		{"control/resumeall/host2-exact", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := testPolicy()
			pol.SettleDelay = 2 * time.Second // the production value
			f := newFixture(t, nil, WithRetryPolicy(pol))
			ctx1, cancel1 := context.WithCancel(f.ctx)
			defer cancel1()
			host1 := f.client(t, WithStore(f.store), WithRetryPolicy(pol), WithHook(func(_ context.Context, e Event) {
				if e.Kind == EventSent && e.Status == http.StatusInternalServerError {
					cancel1() // the caller stops waiting right after the 500
				}
			}))
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, LookupLag: 500 * time.Millisecond, Times: 1})
			p := PixParams{OfferID: "offer-basic", ExternalReference: "order-hosts", Customer: goodCustomer}
			if _, err := host1.Payments.Pix(ctx1, p); !isUnknown(err) {
				t.Fatalf("host 1: %v, want unknown (context ended while settling)", err)
			}
			host2 := f.client(t, WithStore(f.store), WithRetryPolicy(pol))
			host2.clock = offsetClock{base: f.srv.Clock, off: tc.offset}
			opID := "pix:order-hosts"
			if tc.resume {
				rs, err := host2.ResumeAll(f.ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					if r.OperationID == opID && (r.State == keystore.StateNotExecuted || r.State == keystore.StateFailed) && countMine(f, host2, opID) > 0 {
						t.Errorf("ResumeAll settled %s %s while its sale exists (hidden by a %s lag)", opID, r.State, 500*time.Millisecond)
					}
				}
				return
			}
			ch, err := host2.Payments.Pix(f.ctx, p)
			id := ""
			if ch != nil {
				id = ch.Sale.ID
			}
			report(t, f, host2, opID, id, err)
		})
	}
}

// failingRenewStore fails Renew once armed (a flaky durable store).
type failingRenewStore struct {
	*keystore.Memory
	armed atomic.Bool
}

func (s *failingRenewStore) Renew(ctx context.Context, id string, tok int64, ttl time.Duration) (keystore.Record, error) {
	if s.armed.Load() {
		return keystore.Record{}, fmt.Errorf("%w: connection reset", keystore.ErrUnavailable)
	}
	return s.Memory.Renew(ctx, id, tok, ttl)
}

// After an ambiguous send, a store hiccup in the settle loop's renew
// returns ErrStoreUnavailable ("nothing was sent") instead of an
// OutcomeUnknownError, though the sale exists.
func TestSettle_StoreErrorAfterSendIsOutcomeUnknown(t *testing.T) {
	f := newFixture(t, nil)
	st := &failingRenewStore{Memory: keystore.NewMemoryWithClock(f.srv.Clock)}
	// A lease short enough that the settle loop must renew it while the
	// lookups keep failing; the renewal then meets the broken store.
	pol := testPolicy()
	pol.AttemptTimeout, pol.LeaseTTL = 500*time.Millisecond, 2100*time.Millisecond
	c := f.client(t, WithStore(st), WithRetryPolicy(pol), WithHook(func(ctx context.Context, e Event) {
		if e.Kind == EventSent {
			st.armed.Store(true)
		}
	}))
	f.warm(t, c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-renew", Customer: goodCustomer})
	t.Logf("err: %v", err)
	if !isUnknown(err) {
		t.Errorf("BUG: ambiguous send ended with %v (ErrStoreUnavailable=%v), not ErrOutcomeUnknown; sales in ledger: %d",
			err, errors.Is(err, ErrStoreUnavailable), f.successful("sale"))
	}
}

// TestSettle_ClockSteppedBackEndsUnknownWithoutWaitingInVain: the API's
// clock ran an hour ahead while the client learned it, then stepped back.
// Every list is now an hour behind the Date that would prove it current,
// and the API's own answer to the charge (a 500 that created nothing)
// shows its clock there: no list it writes within the call's wait can
// prove itself, so the settle answers "outcome unknown" once the lookups
// are due to be conclusive, instead of looking again once a second for the
// whole MaxSettleWait. (A cache's copy, which waiting does outlive, is
// still looked at again: TestShapes_CachedListWithoutAgeDoesNotSettleNotExecuted.)
// Nothing is resent: no list proved the charge absent.
func TestSettle_ClockSteppedBackEndsUnknownWithoutWaitingInVain(t *testing.T) {
	f := newFixture(t, nil)
	var ahead atomic.Bool
	ahead.Store(true)
	base := bodyProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
		if d, err := http.ParseTime(h.Get("Date")); err == nil && ahead.Load() {
			h.Set("Date", d.Add(time.Hour).UTC().Format(http.TimeFormat))
		}
		return body
	})
	c := proxiedClient(t, f, base)
	f.warm(t, c)
	ahead.Store(false)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.Fault500NoCommit, Times: 1})
	start := f.srv.Clock.Now()
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-back", Customer: goodCustomer})
	waited := f.srv.Clock.Now().Sub(start)
	t.Logf("after %s: %v", waited, err)
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("pix: %v, want outcome unknown", err)
	}
	if max := testPolicy().MaxSettleWait; waited >= max {
		t.Errorf("the settle waited %s (MaxSettleWait %s) for lists that could not prove themselves: %v", waited, max, err)
	}
	if n := f.posts("pix"); n != 1 {
		t.Errorf("%d POSTs, want 1", n)
	}
	f.assertNoDuplicates(t)
}

// TestSettle_RefundWithoutItsSnapshotIsNotExecutedNotStuck: a refund whose
// series has no pre-send snapshot (its record was saved without one, as on
// the path where the store could not prove its history) and whose lookup
// then proves nothing executed must not be resent in that series — a
// later refund could not be told from another's — nor stick: the call
// answers not executed, and the next call takes a snapshot and sends, once.
func TestSettle_RefundWithoutItsSnapshotIsNotExecutedNotStuck(t *testing.T) {
	f := newFixture(t, nil)
	f.warm(t, f.c)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-rf-nosnap", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(5 * time.Second)
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultDropBeforeProcessing, Times: 1})
	ctx, cancel := endAtAnswer(f.ctx)
	params := RefundParams{OperationID: "rf-nosnap", SaleID: sale.Sale.ID, Amount: 1000}
	_, err = f.c.Refunds.Create(ctx, params)
	cancel()
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("refund: %v, want unknown", err)
	}
	f.srv.ClearFaults()
	// The record as the unproven-history path leaves it: no snapshot.
	id := f.c.storeID("rf-nosnap")
	rec, err := f.store.Acquire(f.ctx, id, "test", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var m opMeta
	if err := json.Unmarshal(rec.Meta, &m); err != nil || !m.Snapshotted {
		t.Fatalf("meta %s (%v): want a snapshotted refund to strip", rec.Meta, err)
	}
	m.Snapshot, m.Snapshotted = nil, false
	rec.Meta = mustJSON(m)
	if rec, err = f.store.Update(f.ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Release(f.ctx, id, rec.LeaseToken); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(testPolicy().LeaseTTL + time.Second) // past the trust moment
	_, err = f.c.Refunds.Create(f.ctx, params)
	if !errors.Is(err, ErrNotExecuted) {
		t.Fatalf("the call after a proven not-found, without a snapshot: %v, want not executed", err)
	}
	r, err := f.c.Refunds.Create(f.ctx, params)
	if err != nil {
		t.Fatalf("the next call: %v, want the refund made", err)
	}
	if n := f.successful("refund"); n != 1 {
		t.Errorf("%d refunds in the ledger, want 1 (%s)", n, r.Refund.ID)
	}
}
