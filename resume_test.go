package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestResume_SettlesSurvivingRefundDuringAmnesia: while the store refuses
// new records after a detected loss, a refund whose record survived is
// settled by lookup: its claim must not need a record creation the
// amnesia guard refuses.
func TestResume_SettlesSurvivingRefundDuringAmnesia(t *testing.T) {
	f := newFixture(t, nil)
	ch, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-amn", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	// After the snapshot, every lookup fails: the refund is left unknown.
	lost := f.client(t, WithStore(f.store), WithHook(func(ctx context.Context, e Event) {
		if e.Kind == EventSent {
			f.srv.Inject(pagpolartest.Fault{Route: "get_refunds", Action: pagpolartest.Fault500NoCommit})
		}
		endAtAnswerHook(ctx, e)
	}))
	ctx, cancel := endAtAnswer(f.ctx)
	_, err = lost.Refunds.Create(ctx, RefundParams{OperationID: "refund-amn", SaleID: ch.Sale.ID, Amount: 5000})
	cancel()
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("refund: %v, want unknown", err)
	}
	f.srv.ClearFaults()
	// Another operation's record is lost (a failover to a replica that
	// had not received it): the store notices and refuses new records.
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-lost", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	f.store.Forget(f.c.storeID("pix:order-lost"))
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-new", Customer: goodCustomer}); !errors.Is(err, keystore.ErrAmnesia) {
		t.Fatalf("a new operation after the loss: %v, want ErrAmnesia", err)
	}
	f.srv.Clock.Advance(testPolicy().LeaseTTL + testWindow + time.Second)
	r, err := f.c.Resume(f.ctx, "refund-amn")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != keystore.StateSucceeded || r.Ref == "" {
		t.Fatalf("Resume during amnesia: %s %q (%v), want succeeded with the refund", r.State, r.Ref, r.Err)
	}
	if f.successful("refund") != 1 {
		t.Fatalf("%d refunds", f.successful("refund"))
	}
}

// ResumeAll marked an operation not_executed although its effect existed
// (the card sale in another spelling).
func TestResumeAll_NeverNotExecutedOnAnUnclearSale(t *testing.T) {
	f := newFixture(t, nil)
	// A method spelling nobody knows, on the lookups of a process that has
	// seen no answer of this API yet (so it has learned nothing).
	proxy := rewritingProxy(t, f, http.MethodGet, "/sales", func(v any) any {
		for _, s := range v.(map[string]any)["data"].([]any) {
			s.(map[string]any)["payment_method"] = "cc"
		}
		return v
	})
	// The sale is made, the answer lost, and the lookups fail until the
	// caller gives up: the record is left unknown.
	f.warm(t, f.c)
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	ctx, cancel := endAtAnswer(f.ctx)
	defer cancel()
	_, err := f.c.Payments.CreditCard(ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-ra", Customer: goodCustomer, CardToken: "tok_ok"})
	if !isUnknown(err) {
		t.Fatalf("first call: %v", err)
	}
	f.srv.ClearFaults()
	f.srv.Clock.Advance(time.Second)
	c2 := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	rs, err := c2.ResumeAll(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 {
		t.Fatalf("ResumeAll: %+v", rs)
	}
	for _, r := range rs {
		if r.State == keystore.StateNotExecuted || r.State == keystore.StateFailed {
			t.Fatalf("ResumeAll settled %s as %s while its sale exists", r.OperationID, r.State)
		}
		if !errors.Is(r.Err, ErrOutcomeUnknown) {
			t.Fatalf("ResumeAll: %s %s %v, want unknown (a sale it cannot attribute)", r.OperationID, r.State, r.Err)
		}
	}
}

// ResumeAll only ever sees the 500 oldest unfinished records; when they
// stay unsettled (e.g. subscribes without a lookup route), newer crashed
// operations are never settled.
func TestResumeAll_ReachesPastTheOldest500(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithoutSubscriptionLookup()})
	ctx := longCtx(t) // 500 records and two ResumeAlls: a loaded -race run outlasts the fixture's 20 s
	old := f.srv.Clock.Now().Add(-time.Hour)
	for i := range 500 {
		meta, _ := json.Marshal(opMeta{Path: "/plans/offer/plan-basic/subscribe", ExternalReference: fmt.Sprintf("s-%d", i), OfferID: "plan-basic", Method: "pix", TrustAfter: old})
		op := fmt.Sprintf("subscribe:s-%d", i)
		_, err := f.store.Create(ctx, keystore.Record{OperationID: f.c.storeID(op), Key: f.c.idempotencyKey(op), Kind: kindSubscribe,
			State: keystore.StateUnknown, Attempts: 1, FirstSentAt: old, LastSentAt: old, Meta: meta}, "dead", time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
	}
	f.srv.Clock.Advance(time.Second)
	meta, _ := json.Marshal(opMeta{Path: "/payments/pix", ExternalReference: "late", OfferID: "offer-basic", Method: "pix", TrustAfter: old})
	if _, err := f.store.Create(ctx, keystore.Record{OperationID: f.c.storeID("pix:late"), Key: f.c.idempotencyKey("pix:late"), Kind: kindPix,
		State: keystore.StateUnknown, Attempts: 1, FirstSentAt: old, LastSentAt: old, Meta: meta}, "dead", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(time.Second)
	for run := range 3 {
		res, err := f.c.ResumeAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: %d results", run, len(res))
	}
	if rec, _ := f.store.Get(ctx, f.c.storeID("pix:late")); rec.State != keystore.StateNotExecuted {
		t.Errorf("BUG: pix:late is still %s after 3 ResumeAll runs (never visited)", rec.State)
	}
}

// A record that says "saved, never sent" proves it only in a store that
// kept what it acknowledged. In one that cannot prove its history (SAFETY
// rule 13) it may be a reverted copy of a record whose send went out, so
// Resume leaves it unsettled (unknown) instead of recording not_executed;
// in a proven store it records not_executed as before.
func TestResume_NeverSentRecordOnAnUnprovenStoreStaysUnsettled(t *testing.T) {
	for _, unproven := range []bool{false, true} {
		t.Run(fmt.Sprintf("unproven=%v", unproven), func(t *testing.T) {
			f := newFixture(t, nil)
			cold := f.client(t, WithStore(f.store)) // no reading of the API's clock yet: a snapshot comes first
			f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
			p := PixParams{OperationID: "pix:order-never", OfferID: "offer-basic", ExternalReference: "order-never", Customer: goodCustomer}
			if _, err := cold.Payments.Pix(f.ctx, p); err == nil {
				t.Fatal("the call succeeded with its snapshot failing")
			}
			f.srv.ClearFaults()
			// The call wrote not_executed; a process that crashed in its
			// snapshot leaves the record pending.
			crashedInSnapshot(t, f.store, cold.storeID(p.OperationID))
			if unproven {
				f.store.Unprove()
			}
			rr, err := cold.Resume(f.ctx, p.OperationID)
			if err != nil {
				t.Fatal(err)
			}
			if unproven {
				if rr.State.Settled() || !errors.Is(rr.Err, ErrOutcomeUnknown) {
					t.Fatalf("Resume on an unproven store: %s (%v), want unsettled, outcome unknown", rr.State, rr.Err)
				}
			} else if rr.State != keystore.StateNotExecuted {
				t.Fatalf("Resume on a proven store: %s (%v), want not_executed", rr.State, rr.Err)
			}
			if f.posts("pix") != 0 {
				t.Errorf("Resume sent %d POSTs", f.posts("pix"))
			}
		})
	}
}

// A lookup that proves nothing was executed settles not_executed only once
// the store takes it: unwritten, Resume reports the record's state as
// stored (not not_executed) with an unknown Err, and a later Resume, the
// store back, settles it.
func TestResume_ProvenNotFoundUnwrittenIsUnknown(t *testing.T) {
	f := newFixture(t, nil)
	st := &failingUpdateStore{Memory: f.store}
	c := f.client(t, WithStore(st))
	f.warm(t, c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultDropBeforeProcessing, Times: 1})
	p := PixParams{OperationID: "pix:order-nf", OfferID: "offer-basic", ExternalReference: "order-nf", Customer: goodCustomer}
	ctx, cancel := endAtAnswer(f.ctx)
	defer cancel()
	if _, err := c.Payments.Pix(ctx, p); !isUnknown(err) {
		t.Fatalf("first call: %v, want unknown (its process ended at the lost answer)", err)
	}
	f.srv.Clock.Advance(time.Minute)
	st.failing.Store(true)
	rr, err := c.Resume(f.ctx, p.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	if rr.State == keystore.StateNotExecuted || !errors.Is(rr.Err, ErrOutcomeUnknown) || errors.Is(rr.Err, ErrNotExecuted) {
		t.Fatalf("Resume with the store refusing the write: %s (%v), want the stored state and an unknown Err", rr.State, rr.Err)
	}
	st.failing.Store(false)
	if rr, err = c.Resume(f.ctx, p.OperationID); err != nil || rr.State != keystore.StateNotExecuted {
		t.Fatalf("Resume with the store back: %+v (%v), want not_executed", rr, err)
	}
	if n := f.successful("sale"); n != 0 {
		t.Fatalf("%d sales", n)
	}
}
