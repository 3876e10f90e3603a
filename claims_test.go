// Refund claims: an effect one operation settled on is never taken by another
// refund of the same sale.

package pagpolar

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// A refund that was never processed takes a concurrent refund's effect,
// and the victim's conflicting claim is ignored.
//
// rf-A (never processed: a gateway's 502) polls its lookup. rf-B, same
// sale and amount, sent after A's first send by another worker of the same
// store, commits and loses its answer. A's next lookup sees B's refund:
// new since A's snapshot, after A's floor, unclaimed: A claims it and
// SUCCEEDS — without an effect. B's lookup finds the refund claimed by A,
// trusts its not-found, resends and gets the replay of its own refund;
// succeed() sees the conflicting claim but, for a replay, only logs it.
// Both operations report the same refund; the customer is refunded once
// for two refunds. The store knew B was in flight on the same sale and
// amount when A claimed.
func TestClaim_RefundInFlightOnTheSameSaleIsNotTaken(t *testing.T) {
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-claim", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(5 * time.Second)
	// B's reads are 150 ms slower (another host, farther away).
	slow := bodyProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
		if isGet(r, "/refunds") {
			time.Sleep(150 * time.Millisecond)
		}
		return body
	})
	started := make(chan struct{}, 1)
	cA := f.client(t, WithStore(f.store), WithHook(func(_ context.Context, e Event) {
		if e.Kind == EventSent {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}))
	cB := f.client(t, WithStore(f.store), WithBaseURL(slow))
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Key: cA.idempotencyKey("rf-A"), Action: pagpolartest.FaultGateway, Status: 502, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Key: cB.idempotencyKey("rf-B"), Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	type out struct {
		r   *RefundResult
		err error
	}
	aDone := make(chan out, 1)
	go func() {
		r, err := cA.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1500})
		aDone <- out{r, err}
	}()
	select {
	case <-started:
	case <-f.ctx.Done():
		t.Fatal("A never sent")
	}
	rB, errB := cB.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1500})
	a := <-aDone
	idA, idB := "", ""
	if a.r != nil {
		idA = a.r.Refund.ID
	}
	if rB != nil {
		idB = rB.Refund.ID
	}
	t.Logf("A: %q %v; B: %q %v", idA, a.err, idB, errB)
	for _, p := range ledgerCheck(f, cA, "rf-A", idA, a.err) {
		t.Error("rf-A: " + p)
	}
	for _, p := range ledgerCheck(f, cB, "rf-B", idB, errB) {
		t.Error("rf-B: " + p)
	}
	if idA != "" && idA == idB {
		t.Errorf("both operations report refund %s; the ledger has %d refund(s) for two refund operations", idA, f.successful("refund"))
	}
}

// A refund recorded succeeded without its claim is taken by another
// refund operation of the same sale and amount: two operations succeed on
// one refund.
//
// succeed() writes the claim with the caller's context and, for an answer
// to the operation's own request (SourceResponse), goes on when the claim
// cannot be written: the record is saved succeeded (saveOutcome outlives
// the context), the claim is not. A caller whose deadline ends as the
// answer arrives — or a store that refuses one write — leaves refund B
// succeeded and unclaimed. Refund A (same sale, same amount; its request
// never processed: a gateway's 502) is settled later by lookup: B's refund
// is new since A's snapshot, unclaimed, and contested() looks only at
// *unsettled* operations — B is settled — so A claims it and SUCCEEDS.
// Both operations report one refund; the customer was refunded once for
// two. The control: B's claim written (no deadline), A is not fooled.
func TestClaim_SucceededRefundWithoutClaimIsNotTaken(t *testing.T) {
	t.Parallel()
	for _, deadline := range []bool{true, false} {
		name := "b-deadline-ends-with-the-answer"
		if !deadline {
			name = "control/b-claims"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-unclaimed", Customer: goodCustomer, CardToken: "tok_ok"})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Clock.Advance(5 * time.Second)
			cA := f.client(t, WithStore(f.store))
			f.srv.Inject(pagpolartest.Fault{Route: "refund", Key: cA.idempotencyKey("rf-A"), Action: pagpolartest.FaultGateway, Status: 502, Times: 1})
			ctxA, cancelA := endAtAnswer(f.ctx)
			_, err = cA.Refunds.Create(ctxA, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1500})
			cancelA()
			if !isUnknown(err) {
				t.Fatalf("A: %v, want unknown", err)
			}
			ctxB, cancelB := context.WithCancel(f.ctx)
			defer cancelB()
			cB := f.client(t, WithStore(f.store), WithHook(func(_ context.Context, e Event) {
				if deadline && e.Kind == EventSent && e.Status == 201 {
					cancelB() // the caller's deadline ends as the answer arrives
				}
			}))
			rB, errB := cB.Refunds.Create(ctxB, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1500})
			idB := ""
			if rB != nil {
				idB = rB.Refund.ID
			}
			t.Logf("B: %q %v", idB, errB)
			f.srv.Clock.Advance(time.Second)
			rA, errA := cA.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1500})
			idA := ""
			if rA != nil {
				idA = rA.Refund.ID
			}
			t.Logf("A: %q %v", idA, errA)
			for _, p := range ledgerCheck(f, cA, "rf-A", idA, errA) {
				t.Error("rf-A: " + p)
			}
			for _, p := range ledgerCheck(f, cB, "rf-B", idB, errB) {
				t.Error("rf-B: " + p)
			}
			if idA != "" && idA == idB {
				t.Errorf("both operations report refund %s; the ledger has %d refund(s) for two refund operations", idA, f.successful("refund"))
			}
		})
	}
}

// Contested() compares refund amounts exactly, attribution by every
// reading: a refund of R$1000 settles on a concurrent R$10 refund.
//
// wire.Amount reads the integer 1000 as 1000 centavos *or* 1000 reais
// (100000 centavos), and attribution takes a refund as the operation's when
// any reading matches. The guard for two unsettled refunds that could own
// one effect (contested) asks for
// o.Amount == m.Amount. Refund "rf-big" (R$1000, 100000 centavos) is
// never processed (a gateway's 502); refund "rf-small" of the same sale
// (R$10, 1000 centavos), sent after it, commits and loses its answer. The
// next call of rf-big finds rf-small's refund — amount 1000, new since its
// snapshot, unclaimed, "matching" under the reais reading — and no
// contested operation (1000 != 100000): it claims it and SUCCEEDS. rf-small
// then finds its refund claimed, resends, gets the replay and succeeds
// too. Two refund operations succeeded, R$10 was refunded, R$1000 never
// was. The control: amounts with no common reading (R$10 and R$15).
func TestClaim_ContestedComparesEveryAmountReading(t *testing.T) {
	for _, big := range []int64{100000, 1500} {
		name := "rf-big-100000-vs-rf-small-1000"
		if big == 1500 {
			name = "control/1500-vs-1000"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.srv.AddOffer(pagpolartest.Offer{ID: "offer-big", Amount: 200000})
			sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-big", ExternalReference: "order-readings", Customer: goodCustomer, CardToken: "tok_ok"})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Clock.Advance(5 * time.Second)
			cBig := f.client(t, WithStore(f.store))
			ctx, cancel := endAtAnswer(f.ctx)
			f.srv.Inject(pagpolartest.Fault{Route: "refund", Key: cBig.idempotencyKey("rf-big"), Action: pagpolartest.FaultGateway, Status: 502, Times: 1})
			_, err = cBig.Refunds.Create(ctx, RefundParams{OperationID: "rf-big", SaleID: sale.Sale.ID, Amount: big})
			cancel()
			if !isUnknown(err) {
				t.Fatalf("rf-big: %v, want unknown", err)
			}
			ctxS, cancelS := context.WithCancel(f.ctx)
			defer cancelS()
			cSmall := f.client(t, WithStore(f.store), WithHook(func(_ context.Context, e Event) {
				if e.Kind == EventSent {
					cancelS() // its process ends after the lost answer
				}
			}))
			f.srv.Inject(pagpolartest.Fault{Route: "refund", Key: cSmall.idempotencyKey("rf-small"), Action: pagpolartest.FaultCommitThenDrop, Times: 1})
			if _, err := cSmall.Refunds.Create(ctxS, RefundParams{OperationID: "rf-small", SaleID: sale.Sale.ID, Amount: 1000}); !isUnknown(err) {
				t.Fatalf("rf-small: %v, want unknown", err)
			}
			f.srv.Clock.Advance(time.Second)
			rB, errB := cBig.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-big", SaleID: sale.Sale.ID, Amount: big})
			idB := ""
			if rB != nil {
				idB = rB.Refund.ID
			}
			t.Logf("rf-big (%d): %q %v", big, idB, errB)
			cSmall2 := f.client(t, WithStore(f.store))
			rS, errS := cSmall2.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-small", SaleID: sale.Sale.ID, Amount: 1000})
			idS := ""
			if rS != nil {
				idS = rS.Refund.ID
			}
			t.Logf("rf-small (1000): %q %v", idS, errS)
			for _, p := range ledgerCheck(f, cBig, "rf-big", idB, errB) {
				t.Error("rf-big: " + p)
			}
			for _, p := range ledgerCheck(f, cSmall2, "rf-small", idS, errS) {
				t.Error("rf-small: " + p)
			}
			if idB != "" && idB == idS {
				t.Errorf("both refund operations report refund %s; the ledger has %d refund(s)", idB, f.successful("refund"))
			}
		})
	}
}

// Another operation's refund of the same amount, made while this one's
// request was on its way (so after its snapshot and its first send), is
// recorded as that operation's (a claim): this operation's lookup must not
// take it for its own.
func TestClaim_RefundClaimedByAnotherOperationIsNotOurs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-claim", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	// A's request is delayed in front of the API, then refused unprocessed.
	keyA := f.c.idempotencyKey("rf-A")
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Key: keyA, Action: pagpolartest.FaultLatency, Delay: time.Second, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Key: keyA, Action: pagpolartest.Fault500NoCommit, Times: 1})
	done := make(chan error, 1)
	go func() {
		_, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000})
		done <- err
	}()
	if err := f.srv.WaitHolds(f.ctx, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(time.Second) // A's request reaches the API: 500, nothing done
	if err := <-done; err != nil {
		t.Fatalf("A: %v", err)
	}
	if n := f.successful("refund"); n != 2 {
		t.Fatalf("%d refunds in the ledger, want 2: A took B's refund for its own", n)
	}
}
