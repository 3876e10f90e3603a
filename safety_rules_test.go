// Safety rules 3 to 6 of docs/SAFETY.md through the client: definite answers
// settle, a 409 after an ambiguous try, a not-found trusted only after the
// window, and the operation age bound.

package pagpolar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestSafetyRule3_DefiniteAnswersSettle: a definite 4xx fails the operation
// without a resend, and the failure is answered from the store afterwards.
func TestSafetyRule3_DefiniteAnswersSettle(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "no-such-offer", ExternalReference: "o-404", Customer: goodCustomer})
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode < 400 || ae.StatusCode >= 500 {
		t.Fatalf("want a 4xx APIError, got %v", err)
	}
	if n := f.posts("pix"); n != 1 {
		t.Fatalf("%d POSTs, want 1 (a definite answer is not retried)", n)
	}
	mustState(t, f, f.c, "pix:o-404", keystore.StateFailed)
	_, err2 := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "no-such-offer", ExternalReference: "o-404", Customer: goodCustomer})
	if !errors.As(err2, &ae) || f.posts("pix") != 1 {
		t.Fatalf("second call: %v, %d POSTs; want the stored failure and no request", err2, f.posts("pix"))
	}
}

// TestSafetyRule3_Declined: a declined card is a definite failure; the
// declined sale is in the ledger, nothing succeeded, and a retry needs a new
// operation ID, which then charges once.
func TestSafetyRule3_Declined(t *testing.T) {
	f := newFixture(t, nil)
	p := CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-dec", Customer: goodCustomer, CardToken: "tok_decline_1"}
	_, err := f.c.Payments.CreditCard(f.ctx, p)
	if !errors.Is(err, ErrDeclined) {
		t.Fatalf("want ErrDeclined, got %v", err)
	}
	if f.successful("sale") != 0 {
		t.Fatal("a declined charge counted as a successful effect")
	}
	p.CardToken, p.OperationID = "tok_ok", "retry-order-dec-2"
	ch, err := f.c.Payments.CreditCard(f.ctx, p)
	if err != nil {
		t.Fatalf("retry with a new operation ID: %v", err)
	}
	if ch.Sale.Status != "paid" || f.successful("sale") != 1 {
		t.Fatalf("retry: status %s, %d successful sales", ch.Sale.Status, f.successful("sale"))
	}
}

// TestSafetyRule3_DeclineAfterAmbiguity: the decline's answer is lost; the
// lookup finds the declined sale and settles the operation as declined
// instead of charging again.
func TestSafetyRule3_DeclineFoundByLookup(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultDecline, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit, Times: 1})
	_, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-d2", Customer: goodCustomer, CardToken: "tok_ok"})
	if !errors.Is(err, ErrDeclined) {
		t.Fatalf("want ErrDeclined, got %v", err)
	}
}

// TestSafetyRule4_409AfterAmbiguousAttempt: worker A's request is held by
// the server; worker B (another host, its own store, the same derived key)
// gets 409 and must not resend: it waits and settles by lookup. One sale.
func TestSafetyRule4_409AfterAmbiguousAttempt(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultHold, Delay: 150 * time.Millisecond, Times: 1})
	other := f.client(t, WithStore(keystore.NewMemory()))
	f.warm(t, other) // a host that has been running: it knows the API's clock (a cold one ends unknown: it cannot date the sale)
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-409", Customer: goodCustomer}
	done := make(chan error, 1)
	go func() { _, err := f.c.Payments.Pix(f.ctx, p); done <- err }()
	if err := f.srv.WaitHolds(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	ch, err := other.Payments.Pix(f.ctx, p)
	if err != nil {
		t.Fatalf("worker B: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("worker A: %v", err)
	}
	saw409 := false
	for _, r := range f.srv.Ledger().Requests {
		if r.Status == http.StatusConflict {
			saw409 = true
		}
	}
	if !saw409 {
		t.Fatal("worker B never met the 409 this test is about")
	}
	if ch.Operation.Source != SourceLookup && ch.Operation.Source != SourceReplay {
		t.Errorf("worker B's result came from %s; want lookup (or a replay)", ch.Operation.Source)
	}
	if f.successful("sale") != 1 {
		t.Fatalf("%d sales, want 1", f.successful("sale"))
	}
}

// TestSafetyRule4_409ThenOriginalFailsAfterCommit is the double charge rule
// 4 exists for: the original commits, then ends in 500 (releasing the key)
// while another worker waits on 409. A resend after the 409 would charge
// again; the lookup finds the sale instead.
func TestSafetyRule4_409ThenOriginalFailsAfterCommit(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500After, Delay: 120 * time.Millisecond, Times: 1})
	other := f.client(t, WithStore(keystore.NewMemory()))
	f.warm(t, other) // a host that has been running (a cold one ends unknown: it cannot date the sale)
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-409b", Customer: goodCustomer}
	done := make(chan error, 1)
	go func() { _, err := f.c.Payments.Pix(f.ctx, p); done <- err }()
	if err := f.srv.WaitHolds(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	// B's first send comes well after A's commit: B must still take A's sale
	// (same key, proven in use by the 409) for its own.
	f.srv.Clock.Advance(50 * time.Millisecond)
	if _, err := other.Payments.Pix(f.ctx, p); err != nil {
		t.Fatalf("worker B: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("worker A: %v", err)
	}
	if f.successful("sale") != 1 {
		t.Fatalf("%d sales, want 1", f.successful("sale"))
	}
	f.assertNoDuplicates(t)
}

// TestSafetyRule5_NotFoundTrustedOnlyAfterWindow: the attempt times out
// while the server holds it; the held request commits later. Lookups before
// the window ends say "not found" and must not lead to a resend.
func TestSafetyRule5_NotFoundTrustedOnlyAfterWindow(t *testing.T) {
	pol := testPolicy()
	pol.AttemptTimeout = 60 * time.Millisecond
	f := newFixture(t, nil, WithRetryPolicy(pol))
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultHold, Delay: 200 * time.Millisecond, Times: 1})
	ch, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-slow", Customer: goodCustomer})
	if err != nil {
		t.Fatal(err)
	}
	if ch.Operation.Source != SourceLookup {
		t.Errorf("source %s, want lookup", ch.Operation.Source)
	}
	if n := f.posts("pix"); n != 1 {
		t.Fatalf("%d POSTs: the client resent inside the in-processing window", n)
	}
	if f.successful("sale") != 1 {
		t.Fatalf("%d sales", f.successful("sale"))
	}
}

// TestSafetyRule5_UnknownWhenContextEnds: the caller's deadline ends before
// the window; the error is ErrOutcomeUnknown with operation ID and key, the
// record stays unknown, and calling again later settles it without a second
// sale.
func TestSafetyRule5_UnknownWhenContextEnds(t *testing.T) {
	f := newFixture(t, nil)
	f.warm(t, f.c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	ctx, cancel := endAtAnswer(f.ctx)
	defer cancel()
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-unk", Customer: goodCustomer}
	_, err := f.c.Payments.Pix(ctx, p)
	var ue *OutcomeUnknownError
	if !errors.As(err, &ue) || !errors.Is(err, ErrOutcomeUnknown) || ue.OperationID != "pix:order-unk" || ue.Key == "" {
		t.Fatalf("want an OutcomeUnknownError with operation and key, got %v", err)
	}
	mustState(t, f, f.c, "pix:order-unk", keystore.StateUnknown)
	f.srv.ClearFaults()
	ch, err := f.c.Payments.Pix(f.ctx, p)
	if err != nil || ch.Operation.Source == SourceResponse {
		t.Fatalf("settling call: %v (source %v)", err, ch)
	}
	if f.successful("sale") != 1 || f.posts("pix") != 1 {
		t.Fatalf("%d sales, %d POSTs; want 1 and 1", f.successful("sale"), f.posts("pix"))
	}
}

// TestSafetyRule5_PendingRecordLeftByCrash: a record saved before a crash
// (the request may or may not have left) is settled by lookup on the next
// call: found → no send; not found (after the window) → one send.
func TestSafetyRule5_PendingRecordLeftByCrash(t *testing.T) {
	for _, sent := range []bool{true, false} {
		t.Run(fmt.Sprintf("requestReachedServer=%v", sent), func(t *testing.T) {
			f := newFixture(t, nil)
			p := PixParams{OfferID: "offer-basic", ExternalReference: "order-crash", Customer: goodCustomer}
			// The crashed process: saved, maybe sent, never stored an answer.
			crashed := f.client(t, WithStore(f.store), WithHook(func(ctx context.Context, e Event) {
				if e.Kind == EventSaved && !sent {
					panic(errCrash)
				}
				if e.Kind == EventSent && sent {
					panic(errCrash)
				}
			}))
			func() {
				defer func() {
					if r := recover(); r != errCrash {
						t.Fatalf("crash hook did not fire: %v", r)
					}
				}()
				_, _ = crashed.Payments.Pix(f.ctx, p)
			}()
			mustState(t, f, f.c, "pix:order-crash", keystore.StatePending)
			// Its lease must expire before anyone else may act.
			f.srv.Clock.Advance(testPolicy().LeaseTTL + time.Millisecond)
			ch, err := f.c.Payments.Pix(f.ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			wantPosts := 1
			if sent && ch.Operation.Source != SourceLookup {
				t.Errorf("source %s, want lookup", ch.Operation.Source)
			}
			if f.posts("pix") != wantPosts || f.successful("sale") != 1 {
				t.Fatalf("%d POSTs, %d sales; want %d and 1", f.posts("pix"), f.successful("sale"), wantPosts)
			}
		})
	}
}

var errCrash = errors.New("simulated crash")

// TestSafetyRule5_NoLookupMeansUnknown: without the subscription lookup, an
// ambiguous subscribe ends in ErrOutcomeUnknown; it never resends blind.
func TestSafetyRule5_NoLookupMeansUnknown(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithoutSubscriptionLookup()})
	f.srv.Inject(pagpolartest.Fault{Route: "subscribe", Action: pagpolartest.Fault500NoCommit, Times: 1})
	_, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-1", Customer: goodCustomer, PaymentMethod: "pix"})
	if !isUnknown(err) {
		t.Fatalf("want ErrOutcomeUnknown, got %v", err)
	}
	if n := f.posts("subscribe"); n != 1 {
		t.Fatalf("%d subscribe POSTs; an ambiguous subscribe without lookup was resent", n)
	}
}

// TestSafetyRule5_LookupLagExposure measures the documented exposure: a
// lookup lagging longer than SettleDelay after the original ended in 500
// reads "not found" falsely and the resend charges again. With a SettleDelay
// longer than the lag the same scenario charges once.
func TestSafetyRule5_LookupLagExposure(t *testing.T) {
	t.Parallel()
	run := func(settle, lag time.Duration) int {
		pol := testPolicy()
		pol.SettleDelay = settle
		f := newFixture(t, nil, WithRetryPolicy(pol))
		f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, LookupLag: lag, Times: 1})
		_, _ = f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-lag", Customer: goodCustomer})
		return f.successful("sale")
	}
	if n := run(400*time.Millisecond, 150*time.Millisecond); n != 1 {
		t.Errorf("SettleDelay longer than the lag: %d sales, want 1", n)
	}
	// The exposure, measured: the client cannot tell a lagging "not found"
	// from a real one, so this is documented in README, not pretended away.
	// The lag outlasts also the wait for a list whose Date proves it newer
	// than the trust moment (up to about two seconds of whole-second Dates).
	if n := run(10*time.Millisecond, 3500*time.Millisecond); n != 2 {
		t.Errorf("SettleDelay 10ms < lookup lag 3.5s: %d sales; the fake no longer reproduces the documented exposure", n)
	}
}

// TestSafetyRule6_MaxOperationAge: an operation older than the configured
// age is settled but not sent again.
func TestSafetyRule6_MaxOperationAge(t *testing.T) {
	f := newFixture(t, nil, WithMaxOperationAge(time.Hour))
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultUnavailable})
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-old", Customer: goodCustomer}
	if _, err := f.c.Payments.Pix(f.ctx, p); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable after the retries, got %v", err)
	}
	mustState(t, f, f.c, "pix:order-old", keystore.StateNotExecuted)
	f.srv.ClearFaults()
	f.srv.Clock.Advance(25 * time.Hour)
	posts := f.posts("pix")
	if _, err := f.c.Payments.Pix(f.ctx, p); !errors.Is(err, ErrOperationTooOld) {
		t.Fatalf("want ErrOperationTooOld, got %v", err)
	}
	if f.posts("pix") != posts {
		t.Fatal("an operation past MaxOperationAge was sent")
	}
}
