package pagpolar

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Regression tests for the findings of the "fail safe when the API or the
// clock is not what we assumed" issue. Each failed on the engine before it
// (checked by running them against that commit's root package) and names
// the finding it guards.

// The independent server spelled the card method "credit-card": the
// lookup read the operation's own sale as another operation's, trusted the
// not-found and resent. Two sales, and the operation reported failed.
func TestFinding_CardMethodSpelledOtherwise(t *testing.T) {
	for _, shape := range []pagpolartest.Shape{pagpolartest.ShapeMethodHyphen, pagpolartest.ShapeMethodUpper, pagpolartest.ShapeMethodCard} {
		t.Run(string(shape), func(t *testing.T) {
			f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(shape)})
			f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitThen500, Times: 1})
			ch, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-cc", Customer: goodCustomer, CardToken: "tok_ok"})
			if err != nil {
				t.Fatalf("want the sale found by lookup, got %v", err)
			}
			if ch.Sale.PaymentMethod != "credit_card" {
				t.Errorf("PaymentMethod %q, want the SDK's spelling credit_card", ch.Sale.PaymentMethod)
			}
			if n := f.successful("sale"); n != 1 {
				t.Fatalf("%d sales, want 1", n)
			}
		})
	}
}

// The independent server answered a plan change with the subscription
// object and listed no plan_changes: recorded failed while the plan had
// changed, and a lost answer led to a second change.
func TestFinding_PlanChangeAnsweredWithSubscription(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapePlanChangeAsSubscription, pagpolartest.ShapeNoPlanChanges)})
	sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-pc", Customer: goodCustomer, PaymentMethod: "pix"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-1", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
	if err != nil {
		t.Fatalf("plan change answered with the subscription: %v", err)
	}
	if res.PlanChange.OfferID != "plan-pro" || res.PlanChange.SubscriptionID != sub.Subscription.ID {
		t.Errorf("plan change %+v", res.PlanChange)
	}
	// A lost answer: the subscription now shows the new offer (the
	// lookup's only evidence); nothing proves it absent otherwise.
	f.srv.Inject(pagpolartest.Fault{Route: "plan_change", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	_, err = f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-2", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-basic"})
	if err != nil {
		t.Fatalf("lost answer: %v", err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "plan_change", Action: pagpolartest.Fault500NoCommit, Times: 1})
	_, err = f.c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-3", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
	if !isUnknown(err) {
		t.Fatalf("a change not made, on an API that lists no plan changes: %v, want ErrOutcomeUnknown (absence cannot be proven)", err)
	}
	if n := f.successful("plan_change"); n != 2 {
		t.Fatalf("%d plan changes, want 2 (pc-3 was never made, and never resent)", n)
	}
	f.assertNoDuplicates(t)
}

// ResumeAll marked an operation not_executed although its effect existed
// (the card sale in another spelling).
func TestFinding_ResumeAllNeverNotExecutedOnUnclear(t *testing.T) {
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
	ctx, cancel := contextWithTimeout(f, 150*time.Millisecond)
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

// 1. A client clock 3 s ahead: after a commit-then-500 the operation's own
// sale was discarded as "created before the first send". Two sales.
func TestFinding_ClientClockAhead(t *testing.T) {
	for _, off := range []time.Duration{3 * time.Second, 5 * time.Minute, -5 * time.Minute} {
		t.Run(off.String(), func(t *testing.T) {
			f := newFixture(t, nil)
			f.c.clock = offsetClock{base: f.srv.Clock, off: off}
			p := PixParams{OfferID: "offer-basic", ExternalReference: "order-clock", Customer: goodCustomer}
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
			ch, err := f.c.Payments.Pix(f.ctx, p)
			if err != nil {
				t.Fatalf("%v", err)
			}
			if ch.Operation.Source != SourceLookup {
				t.Errorf("source %s, want lookup", ch.Operation.Source)
			}
			if n := f.successful("sale"); n != 1 {
				t.Fatalf("%d sales, want 1", n)
			}
		})
	}
}

// 2. A 504 whose body is JSON with a code (a gateway's) was taken for the
// API's own answer: "the original has ended", so a not-found was trusted
// after SettleDelay instead of the window, while the lookup lagged. Two
// sales.
func TestFinding_Gateway504JSONDoesNotEndTheWindow(t *testing.T) {
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(pagpolartest.ShapeGatewayJSON)})
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultGatewayAfterCommit, Status: 504, LookupLag: 150 * time.Millisecond, Times: 1})
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-gw", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	if n := f.successful("sale"); n != 1 {
		t.Fatalf("%d sales, want 1", n)
	}
	// The classification itself: no 502/504 ends the window, whatever its
	// body; a 503 that is not the API's is not "not processed".
	for _, st := range []int{502, 504} {
		for _, own := range []bool{false, true} {
			if v, _ := classify(answer{status: st, apiOwn: own}); v != vAmbiguous {
				t.Errorf("%d (API body %v): %s, want ambiguous", st, own, v)
			}
		}
	}
	if v, _ := classify(answer{status: 503}); v != vAmbiguous {
		t.Errorf("503 without the API's body: %s, want ambiguous", v)
	}
}

// 3. A sale list that pages: only page 1 was read, so the operation's sale
// on page 2 was "not found". Two sales.
func TestFinding_PagedSaleList(t *testing.T) {
	for _, shape := range []pagpolartest.Shape{pagpolartest.ShapePagedCursor, pagpolartest.ShapePagedLink, pagpolartest.ShapePagedPages} {
		t.Run(string(shape), func(t *testing.T) {
			f := newFixture(t, []pagpolartest.Option{pagpolartest.WithShapes(shape)})
			// Three earlier boleto sales under the order put ours on page 2.
			for _, op := range []string{"b1", "b2", "b3"} {
				if _, err := f.c.Payments.Boleto(f.ctx, BoletoParams{OperationID: op, OfferID: "offer-basic", ExternalReference: "order-page", Customer: goodCustomer}); err != nil {
					t.Fatal(err)
				}
			}
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
			if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-page", Customer: goodCustomer}); err != nil {
				t.Fatal(err)
			}
			for g, effs := range f.srv.Ledger().Duplicates(pagpolartest.DefaultGroup) {
				if len(effs) > 1 && effs[0].Method == "pix" {
					t.Fatalf("%s: %d PIX sales", g, len(effs))
				}
			}
		})
	}
}

// 4. The status in a 2xx body was never checked: a 201 with a declined
// card sale, a failed refund, a rejected plan change or an unknown status
// was recorded succeeded.
func TestFinding_StatusIn2xxIsChecked(t *testing.T) {
	cases := []struct {
		name, status string
		want         error    // nil: succeeded
		decision     Decision // when succeeded
	}{
		{"declined", "declined", ErrDeclined, ""},
		// A status that is not a refusal is the decision of an effect that
		// exists (SAFETY rule 3), never an unknown outcome.
		{"in-analysis", "in_analysis", nil, DecisionInAnalysis},
		{"undocumented", "zz_new_status", nil, DecisionUnrecognized},
	}
	for _, tc := range cases {
		t.Run("sale/"+tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			// The answer and the lookups show the same status.
			proxy := rewritingProxy(t, f, "", "/", func(v any) any {
				m := v.(map[string]any)
				if data, ok := m["data"].([]any); ok {
					for _, s := range data {
						s.(map[string]any)["status"] = tc.status
					}
				} else {
					m["status"] = tc.status
				}
				return v
			})
			c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
			ch, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-st-" + tc.name, Customer: goodCustomer, CardToken: "tok_ok"})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("got %v, want success with decision %q", err, tc.decision)
				}
				if ch.Decision() != tc.decision || ch.Sale.Status != tc.status {
					t.Fatalf("decision %q (status %q), want %q (status %q)", ch.Decision(), ch.Sale.Status, tc.decision, tc.status)
				}
				return
			}
			checkStatusOutcome(t, err, tc.want)
		})
	}
	t.Run("refund/failed", func(t *testing.T) {
		f := newFixture(t, nil)
		sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-rf", Customer: goodCustomer, CardToken: "tok_ok"})
		if err != nil {
			t.Fatal(err)
		}
		proxy := rewritingProxy(t, f, http.MethodPost, "/refunds", func(v any) any {
			v.(map[string]any)["status"] = "failed"
			return v
		})
		c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
		_, err = c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-st", SaleID: sale.Sale.ID, Amount: 100})
		checkStatusOutcome(t, err, ErrRefused)
	})
	t.Run("plan_change/rejected", func(t *testing.T) {
		f := newFixture(t, nil)
		sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-st", Customer: goodCustomer, PaymentMethod: "pix"})
		if err != nil {
			t.Fatal(err)
		}
		proxy := rewritingProxy(t, f, http.MethodPost, "/plan-change", func(v any) any {
			v.(map[string]any)["status"] = "rejected"
			return v
		})
		c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
		_, err = c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-st", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
		checkStatusOutcome(t, err, ErrRefused)
	})
}

func checkStatusOutcome(t *testing.T, err, want error) {
	t.Helper()
	switch {
	case want == nil && !isUnknown(err):
		t.Fatalf("got %v, want ErrOutcomeUnknown (a status that is neither success nor refusal)", err)
	case want != nil && !errors.Is(err, want):
		t.Fatalf("got %v, want %v", err, want)
	case want != nil && isUnknown(err):
		t.Fatalf("got unknown, want the definite %v", want)
	}
}

// 5. The operation's own unverifiable 2xx became a terminal "failed": the
// first call ended unknown; the next call's resend got the replay, took
// the mismatch for a collision and recorded failed with ErrParamsMismatch
// while the sale existed.
func TestFinding_UnverifiableReplayStaysUnknown(t *testing.T) {
	f := newFixture(t, nil)
	// The answer names no sale and spells the method otherwise; the
	// lookups never list the sale (a lookup that lags for good).
	proxy := rewritingProxy(t, f, "", "/", func(v any) any {
		m := v.(map[string]any)
		if _, ok := m["data"]; ok {
			m["data"] = []any{}
		} else {
			delete(m, "identifier")
			m["payment_method"] = "zz"
		}
		return v
	})
	c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-unv", Customer: goodCustomer}
	for call := 1; call <= 3; call++ {
		_, err := c.Payments.Pix(f.ctx, p)
		if !isUnknown(err) {
			t.Fatalf("call %d: %v, want ErrOutcomeUnknown while the sale exists", call, err)
		}
		f.srv.Clock.Advance(time.Second)
	}
	// A new process (nothing in memory) reads the same from the record.
	c3 := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	if _, err := c3.Payments.Pix(f.ctx, p); !isUnknown(err) {
		t.Fatalf("another process: %v, want ErrOutcomeUnknown", err)
	}
	if r, err := c3.Resume(f.ctx, "pix:order-unv"); err != nil || r.State != keystore.StateUnknown {
		t.Fatalf("Resume: %+v %v, want it left unknown", r, err)
	}
	mustState(t, f, c, "pix:order-unv", keystore.StateUnknown)
	if n := f.successful("sale"); n != 1 {
		t.Fatalf("%d sales, want 1", n)
	}
	if f.posts("pix") != 1 {
		t.Errorf("%d POSTs: an unverifiable 2xx must never be resent", f.posts("pix"))
	}
}

// 6a. A refund that ended not_executed was later resent with its old
// snapshot and old first send, and settled on another operation's refund
// made in between: one refund lost, both operations "succeeded".
func TestFinding_SnapshotRetakenAfterNotExecuted(t *testing.T) {
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-snap", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	// Operation A is refused by the API's own 503 until its retries run out:
	// not executed.
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultUnavailable, Times: testPolicy().MaxAttempts})
	_, err = f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000})
	if !errors.As(err, new(*OperationError)) || isUnknown(err) {
		t.Fatalf("A: %v, want not executed", err)
	}
	mustState(t, f, f.c, "rf-A", keystore.StateNotExecuted)
	// Operation B refunds the same amount meanwhile.
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(5 * time.Second)
	// A is called again and its answer is lost before processing.
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.Fault500NoCommit, Times: 1})
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	if n := f.successful("refund"); n != 2 {
		t.Fatalf("%d refunds in the ledger, want 2 (A's and B's)", n)
	}
}

// 6b. A snapshot read from a list that lags: another operation's refund,
// made just before, is missing from the snapshot and was later taken for
// this operation's (the ClockSkew allowance working backwards).
func TestFinding_SnapshotRobustToLaggingList(t *testing.T) {
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-lag", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	// B's refund lags 40 ms (less than SettleDelay) behind its commit.
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultLookupLag, Delay: 40 * time.Millisecond, Times: 1})
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	// A snapshots at once (B's refund not listed yet) and its request is
	// never processed.
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.Fault500NoCommit, Times: 1})
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	if n := f.successful("refund"); n != 2 {
		t.Fatalf("%d refunds in the ledger, want 2: A settled on B's refund", n)
	}
}

// 6c. Nothing is ever sent without a snapshot: a refund whose record was
// settled not_executed before it ever had one (Resume of a crash during its
// snapshot) took none when called again.
func TestFinding_NeverSentWithoutSnapshot(t *testing.T) {
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-nosnap", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-B", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	// rf-A's snapshot read fails: nothing sent, record pending with 0
	// attempts; Resume settles it not executed.
	f.srv.Inject(pagpolartest.Fault{Route: "get_refunds", Action: pagpolartest.Fault500NoCommit})
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000}); err == nil {
		t.Fatal("want the failed snapshot's error")
	}
	if _, err := f.c.Resume(f.ctx, "rf-A"); err != nil {
		t.Fatal(err)
	}
	f.srv.ClearFaults()
	f.srv.Clock.Advance(5 * time.Second)
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.Fault500NoCommit, Times: 1})
	before := len(f.srv.Ledger().Requests)
	if _, err := f.c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-A", SaleID: sale.Sale.ID, Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	// The call's first request is the snapshot, before any POST.
	reqs := f.srv.Ledger().Requests[before:]
	if len(reqs) == 0 || reqs[0].Route != "get_refunds" {
		t.Fatalf("the refund's first request after it was settled not executed is %s %s, want the snapshot GET /refunds", reqs[0].Method, reqs[0].Path)
	}
	if n := f.successful("refund"); n != 2 {
		t.Fatalf("%d refunds, want 2", n)
	}
}

// 6d. Another operation's refund of the same amount, made while this one's
// request was on its way (so after its snapshot and its first send), is
// recorded as that operation's (a claim): this operation's lookup must not
// take it for its own.
func TestFinding_RefundClaimedByAnotherOperation(t *testing.T) {
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

func contextWithTimeout(f *fixture, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(f.ctx, d)
}

// A lookup observes the API when it is sent. One sent before the moment a
// not-found becomes conclusive, and answered after it (a slow read), was
// taken for conclusive: the sale, still lagging when the list was read,
// was "not found" and charged again. (Found by the shape suite under load.)
func TestFinding_LookupSentBeforeTrustAfterIsNotConclusive(t *testing.T) {
	f := newFixture(t, nil)
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	var slow atomic.Bool
	slow.Store(true)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodGet && strings.HasSuffix(r.Request.URL.Path, "/sales") && slow.CompareAndSwap(true, false) {
			time.Sleep(3 * testPolicy().SettleDelay) // the list was read already; its answer is late
		}
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	c := f.client(t, WithStore(f.store), WithBaseURL(ps.URL))
	// Warm the client's view of the API's clock, so no snapshot precedes the send.
	if _, err := c.Payments.SalesByExternalReference(f.ctx, "warm-up"); err != nil {
		t.Fatal(err)
	}
	slow.Store(true)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, LookupLag: 2 * testPolicy().SettleDelay / 3, Times: 1})
	if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-slowread", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	if n := f.successful("sale"); n != 1 {
		t.Fatalf("%d sales, want 1", n)
	}
}
