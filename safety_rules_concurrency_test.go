// Safety rules 7 to 11 of docs/SAFETY.md through the client: replays for
// another request, Resume, concurrent callers of one operation, changed
// params, and concurrent refunds and plan changes.

package pagpolar

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestSafetyRule7_ReplayForAnotherRequestIsNotSuccess: two hosts with
// separate stores reuse one operation ID for different orders; the server
// replays the first order's sale for the second request. That is an error,
// never a success for order B.
func TestSafetyRule7_ReplayForAnotherRequestIsNotSuccess(t *testing.T) {
	f := newFixture(t, nil)
	other := f.client(t, WithStore(keystore.NewMemory()))
	fresh := f.client(t, WithStore(keystore.NewMemory()))
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-A", Customer: goodCustomer, OperationID: "shared-op"}); err != nil {
		t.Fatal(err)
	}
	// A client that has not yet seen this API's answers echo the reference
	// as sent cannot take a replay's reference for proof: unknown, never
	// success.
	if _, err := fresh.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-B", Customer: goodCustomer, OperationID: "shared-op"}); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a fresh client: want ErrOutcomeUnknown for a replay of another order, got %v", err)
	}
	// One that has (its own charge's answer echoed it) can.
	if _, err := other.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-C", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	_, err := other.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-B", Customer: goodCustomer, OperationID: "shared-op"})
	if !errors.Is(err, ErrParamsMismatch) {
		t.Fatalf("want ErrParamsMismatch for a replay of another order, got %v", err)
	}
	if f.successful("sale") != 2 {
		t.Fatalf("%d sales", f.successful("sale"))
	}
}

// TestSafetyRule8_ResumeSettlesNeverCharges: Resume on operations left by
// crashes finds what exists and marks the rest not_executed; it sends no
// money request.
func TestSafetyRule8_ResumeSettlesNeverCharges(t *testing.T) {
	f := newFixture(t, nil)
	crashAfterSend := f.client(t, WithStore(f.store), WithHook(func(ctx context.Context, e Event) {
		if e.Kind == EventSent {
			panic(errCrash)
		}
	}))
	crashBeforeSend := f.client(t, WithStore(f.store), WithHook(func(ctx context.Context, e Event) {
		if e.Kind == EventSaved {
			panic(errCrash)
		}
	}))
	crash := func(c *Client, ref string) {
		defer func() { _ = recover() }()
		_, _ = c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer})
	}
	crash(crashAfterSend, "o-sent")
	crash(crashBeforeSend, "o-unsent")
	posts := f.posts("pix")
	f.srv.Clock.Advance(testPolicy().LeaseTTL + testWindow + time.Second)
	res, err := f.c.ResumeAll(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]keystore.State{}
	for _, r := range res {
		got[r.OperationID] = r.State
	}
	if got["pix:o-sent"] != keystore.StateSucceeded || got["pix:o-unsent"] != keystore.StateNotExecuted {
		t.Fatalf("ResumeAll: %+v", res)
	}
	if f.posts("pix") != posts {
		t.Fatal("Resume sent a money request")
	}
	// The caller decides to send the unsent one: exactly one sale each.
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "o-unsent", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	if f.successful("sale") != 2 {
		t.Fatalf("%d sales, want 2", f.successful("sale"))
	}
	f.assertNoDuplicates(t)
}

// TestSafetyRule9_FiftyGoroutinesOneOperation: one sale, every caller gets it.
func TestSafetyRule9_FiftyGoroutinesOneOperation(t *testing.T) {
	for _, fault := range []pagpolartest.FaultAction{0, pagpolartest.FaultCommitThen500, pagpolartest.FaultHold} {
		t.Run(fmt.Sprint(fault), func(t *testing.T) {
			f := newFixture(t, nil)
			if fault != 0 {
				f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: fault, Delay: 50 * time.Millisecond, Times: 1})
			}
			ids, errs := concurrently(50, func(int) (string, error) {
				ch, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-50", Customer: goodCustomer})
				if err != nil {
					return "", err
				}
				return ch.Sale.ID, nil
			})
			for i := range ids {
				if errs[i] != nil || ids[i] != ids[0] {
					t.Fatalf("caller %d: %q %v; want %q", i, ids[i], errs[i], ids[0])
				}
			}
			if f.successful("sale") != 1 {
				t.Fatalf("%d sales", f.successful("sale"))
			}
		})
	}
}

// TestSafetyRule9_LostLeaseStopsBeforeSending: a worker whose lease was
// taken over must not send.
func TestSafetyRule9_LostLeaseStopsBeforeSending(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultUnavailable, Times: 1, Delay: time.Millisecond})
	stolen := false
	c := f.client(t, WithStore(f.store), WithHook(func(ctx context.Context, e Event) {
		if e.Kind == EventRetry && !stolen {
			stolen = true
			// Another worker takes the operation over after our lease expired.
			f.srv.Clock.Advance(testPolicy().LeaseTTL + time.Millisecond)
			if _, err := f.store.Acquire(ctx, f.c.storeID("pix:order-lease"), "thief", time.Hour); err != nil {
				panic(err)
			}
		}
	}))
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-lease", Customer: goodCustomer})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("want ErrLeaseLost, got %v", err)
	}
	if n := f.posts("pix"); n != 1 {
		t.Fatalf("%d POSTs; the worker sent after losing its lease", n)
	}
}

// TestSafetyRule10_SameOperationDifferentParams: nothing is sent.
func TestSafetyRule10_SameOperationDifferentParams(t *testing.T) {
	f := newFixture(t, nil)
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-10", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	_, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-premium", ExternalReference: "order-10", Customer: goodCustomer})
	if !errors.Is(err, ErrParamsMismatch) || f.posts("pix") != 1 {
		t.Fatalf("want ErrParamsMismatch and no request, got %v and %d POSTs", err, f.posts("pix"))
	}
	// With a fingerprint secret, a changed customer is caught too.
	g := newFixture(t, nil, WithFingerprintSecret([]byte("0123456789abcdef0123")))
	if _, err := g.c.Payments.Pix(g.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-11", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	other := goodCustomer
	other.Document = "987.654.321-00"
	if _, err := g.c.Payments.Pix(g.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-11", Customer: other}); !errors.Is(err, ErrParamsMismatch) {
		t.Fatalf("changed document with a fingerprint secret: %v", err)
	}
	// The store never holds the document, e-mail or name.
	recs, _ := g.store.List(g.ctx, keystore.Filter{})
	for _, r := range recs {
		blob := fmt.Sprintf("%+v %s %s", r, r.Meta, r.Result)
		for _, secret := range []string{"123.456.789-09", "12345678909", goodCustomer.Email, goodCustomer.Name, g.srv.Token} {
			if containsFold(blob, secret) {
				t.Fatalf("store record holds %q: %s", secret, blob)
			}
		}
	}
}

// TestSafetyRule11_TwoPartialRefundsOneSale: the second refund's answer is
// lost; the snapshot taken before its first send tells it from the first.
func TestSafetyRule11_TwoPartialRefundsOneSale(t *testing.T) {
	f := newFixture(t, nil)
	ch, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-rf", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "refund-1", SaleID: ch.Sale.ID, Amount: 5000})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	r2, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "refund-2", SaleID: ch.Sale.ID, Amount: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Refund.ID == r2.Refund.ID {
		t.Fatal("the second refund was settled with the first one's refund")
	}
	if f.successful("refund") != 2 {
		t.Fatalf("%d refunds, want 2", f.successful("refund"))
	}
	// Over-refunding is a definite failure, not retried.
	_, err = f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "refund-3", SaleID: ch.Sale.ID, Amount: 20000})
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 422 {
		t.Fatalf("over-refund: %v", err)
	}
}

// TestSafetyRule11_TwoPlanChanges: two plan changes of one subscription,
// the second ambiguous.
func TestSafetyRule11_TwoPlanChanges(t *testing.T) {
	f := newFixture(t, nil)
	sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-pc", Customer: goodCustomer, PaymentMethod: "credit_card", CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "upgrade-1", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"}); err != nil {
		t.Fatal(err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "plan_change", Action: pagpolartest.FaultCommitThen500, Times: 1})
	if _, err := f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "downgrade-1", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-basic"}); err != nil {
		t.Fatal(err)
	}
	got, err := f.c.Subscriptions.Get(f.ctx, sub.Subscription.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.PlanChanges) != 2 || got.OfferID != "plan-basic" {
		t.Fatalf("subscription after two changes: offer %s, %d changes", got.OfferID, len(got.PlanChanges))
	}
}
