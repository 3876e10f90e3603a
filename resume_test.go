package pagpolar

import (
	"context"
	"errors"
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
	}))
	ctx, cancel := context.WithTimeout(f.ctx, 150*time.Millisecond)
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
