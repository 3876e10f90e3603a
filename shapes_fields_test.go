package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// End-to-end on the fake: shapes in which a field looks like one the SDK
// knows and is another, an answer kind's echo is taken for another's, an
// item lacks what tells it apart, or a cache or a clock misleads. Each
// answer of the original request is lost after its effect committed (the
// API's own 500, which releases the key): a lookup that wrongly excludes
// the effect sends again and makes a second one.

// lostCall runs call with the original's answer lost (committed, then the
// API's 500) and a short deadline, and returns its error.
func lostCall(f *fixture, route string, call func(ctx context.Context) error) error {
	f.srv.Inject(pagpolartest.Fault{Route: route, Action: pagpolartest.FaultCommitThen500, Times: 1})
	ctx, cancel := context.WithTimeout(f.ctx, 2*time.Second)
	defer cancel()
	return call(ctx)
}

func TestShapes_NumericSaleKeyInRefundListIsNotAnotherSale(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeSaleFKID)})
	ch, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-fk", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "refund-teach", SaleID: ch.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	err = lostCall(f, "refund", func(ctx context.Context) error {
		_, err := f.c.Refunds.Create(ctx, RefundParams{OperationID: "refund-fk", SaleID: ch.Sale.ID, Amount: 2000})
		return err
	})
	if n := f.successful("refund"); n != 2 {
		t.Fatalf("%d refunds, want 2 (one per operation): the refund's own sale, named by its numeric key, was taken for another sale (%v)", n, err)
	}
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("refund: %v, want success or unknown", err)
	}
}

func TestShapes_ListOfferIDIsNotAnotherOffer(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeListOfferID)})
	f.warm(t, f.c)
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-teach", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	err := lostCall(f, "pix", func(ctx context.Context) error {
		_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-oid", Customer: goodCustomer})
		return err
	})
	if n := len(salesUnder(f, f.c, "pix:order-oid")); n != 1 {
		t.Fatalf("%d sales for the operation, want 1: a list item's offer_id was taken for another offer on the strength of POST answers (%v)", n, err)
	}
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("pix: %v, want success or unknown", err)
	}
}

func TestShapes_SubscriptionUpgradedBeforeRetryIsNotAnotherSubscription(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeUpgradedBeforeRetry)})
	f.warm(t, f.c)
	if _, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-teach", Customer: goodCustomer, PaymentMethod: "pix"}); err != nil {
		t.Fatal(err)
	}
	before := f.successful("subscription")
	err := lostCall(f, "subscribe", func(ctx context.Context) error {
		_, err := f.c.Subscriptions.Subscribe(ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-up", Customer: goodCustomer, PaymentMethod: "pix"})
		return err
	})
	if n := f.successful("subscription") - before; n != 1 {
		t.Fatalf("%d subscriptions for the operation, want 1: the subscription on another plan was taken for another's (%v)", n, err)
	}
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("subscribe: %v, want success or unknown", err)
	}
}

func TestShapes_SparseItemIsNotThisOperationsEffect(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeSparseItems)})
	other := f.client(t, WithStore(f.store))
	// The PIX is never processed; meanwhile a boleto under the same order
	// is made by another operation.
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultDropBeforeProcessing, Times: 1})
	c := f.client(t, WithStore(f.store), WithHook(func(ctx context.Context, e Event) {
		defer endAtAnswerHook(ctx, e)
		if e.Kind == EventSent && e.OperationID == "pix:order-sparse" {
			if _, err := other.Payments.Boleto(f.ctx, BoletoParams{OfferID: "offer-basic", ExternalReference: "order-sparse", Customer: goodCustomer}); err != nil {
				t.Errorf("boleto: %v", err)
			}
		}
	}))
	// c is cold: its PIX takes a pre-send snapshot, which the boleto is
	// absent from.
	ctx, cancel := endAtAnswer(f.ctx)
	res, err := c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-sparse", Customer: goodCustomer})
	cancel()
	if err == nil && len(salesUnder(f, c, "pix:order-sparse")) == 0 {
		t.Fatalf("the PIX was settled succeeded on sale %s, the boleto's: it was never processed", res.Sale.ID)
	}
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("pix: %v, want unknown", err)
	}
	// Settled later by lookup, past every window: the boleto sale, new
	// since the snapshot and showing neither method nor offer, is still no
	// proof of the PIX's effect.
	f.srv.Clock.Advance(time.Hour)
	r, rerr := c.Resume(f.ctx, "pix:order-sparse")
	if rerr != nil {
		t.Fatalf("resume: %v", rerr)
	}
	if r.State == keystore.StateSucceeded {
		t.Fatalf("resume settled the never-processed PIX %s (ref %q) while the only sale under the order is the boleto's: %+v", r.State, r.Ref, r)
	}
}

func TestShapes_CachedListWithoutAgeDoesNotSettleNotExecuted(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeCacheNoAge)})
	f.warm(t, f.c)
	// Someone read the order's sales: the micro-cache keeps that answer.
	if _, err := f.c.Payments.SalesByExternalReference(f.ctx, "order-cache"); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(5 * time.Second)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
	ctx, cancel := endAtAnswer(f.ctx)
	_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-cache", Customer: goodCustomer})
	cancel()
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("pix: %v, want unknown", err)
	}
	f.srv.Clock.Advance(testPolicy().LeaseTTL + testWindow + time.Second)
	r, err := f.c.Resume(f.ctx, "pix:order-cache")
	if err != nil {
		t.Fatal(err)
	}
	if r.State == keystore.StateNotExecuted {
		t.Fatalf("Resume settled not executed from the cache's copy; sale %s exists", salesUnder(f, f.c, "pix:order-cache")[0].Identifier)
	}
}

// TestResume_RecordedFloorReCheckedByReader: a floor recorded as valid
// (while the API's clock ran ahead, then stepped back; or by less than the
// step detector sees) is re-checked by the process that reads it, at
// default settings: it never excludes the operation's own sale.
func TestResume_RecordedFloorReCheckedByReader(t *testing.T) {
	for _, c := range []struct {
		name  string
		ahead time.Duration
	}{
		{"an hour ahead, then stepped back", time.Hour},
		{"2.9 s ahead, under the step threshold", 2900 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testPolicy()
			p.ServerClockTolerance = DefaultRetryPolicy.ServerClockTolerance
			f := newFixture(t, nil, WithRetryPolicy(p))
			f.warm(t, f.c)
			f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
			err := lostCall(f, "pix", func(ctx context.Context) error {
				ctx, cancel := endAtAnswer(ctx)
				defer cancel()
				_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-floor", Customer: goodCustomer})
				return err
			})
			if !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("pix: %v, want unknown", err)
			}
			f.srv.ClearFaults()
			// The writer's view of the API's clock was ahead by c.ahead.
			id := f.c.storeID("pix:order-floor")
			rec, _ := f.store.Get(f.ctx, id)
			var m opMeta
			if err := json.Unmarshal(rec.Meta, &m); err != nil || !m.FloorOK {
				t.Fatalf("meta %s: %v (floor usable %v)", rec.Meta, err, m.FloorOK)
			}
			m.Floor = m.Floor.Add(c.ahead)
			rec.Meta = mustJSON(m)
			got, err := f.store.Acquire(f.ctx, id, "test", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			rec.Version, rec.LeaseToken, rec.LeaseOwner = got.Version, got.LeaseToken, got.LeaseOwner
			if _, err := f.store.Update(f.ctx, rec); err != nil {
				t.Fatal(err)
			}
			_ = f.store.Release(f.ctx, id, got.LeaseToken)
			f.srv.Clock.Advance(p.LeaseTTL + testWindow + time.Second)
			reader := f.client(t, WithStore(f.store), WithRetryPolicy(p)) // another process
			r, err := reader.Resume(f.ctx, "pix:order-floor")
			if err != nil {
				t.Fatal(err)
			}
			if r.State == keystore.StateNotExecuted {
				t.Fatalf("Resume settled not executed: the recorded floor excluded the operation's own sale %s", salesUnder(f, f.c, "pix:order-floor")[0].Identifier)
			}
		})
	}
}
