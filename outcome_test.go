// Saving outcomes: the status in a 2xx is checked, an unverifiable answer
// stays unknown, and a definite answer the store did not take is remembered
// without overwriting a newer record.

package pagpolar

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// ResumeAll (or Resume) in the same client erases a known refusal the
// store did not take, and the next call charges.
//
// TestUnrecordedOutcome_DefiniteAnswerIsRemembered guards "a definite answer whose failure
// could not be written must not become a charge on a later call of this
// client": Client.unrecorded remembers it, and existing() answers it. Only
// existing() reads that memory. resume() — what ResumeAll, Resume and
// `ops settle` run, the background settle job the README recommends —
// does not: it looks up the 404'd charge, finds nothing (the API refused
// it), settles NOT_EXECUTED, and saveOutcome's success forgets the
// remembered failure. The caller, told the API's 404 with ErrNotRecorded
// (unknown: the record does not say failed), calls again with the same params (an at-least-once job queue re-running
// the checkout): the record says not_executed, the condition went away,
// and the order is charged — the operation reported failed, then charged.
func TestUnrecordedOutcome_RefusalSurvivesResumeAll(t *testing.T) {
	t.Parallel()
	for _, resume := range []string{"ResumeAll", "Resume", "control/none"} {
		t.Run(resume, func(t *testing.T) {
			f := newFixture(t, nil)
			st := &failingUpdateStore{Memory: keystore.NewMemoryWithClock(f.srv.Clock)}
			c := f.client(t, WithStore(st))
			f.warm(t, c)
			p := PixParams{OfferID: "no-such-offer", ExternalReference: "order-unrec2", Customer: goodCustomer}
			st.failing.Store(true)
			_, err := c.Payments.Pix(f.ctx, p)
			if !errors.Is(err, ErrNotRecorded) || !errors.Is(err, ErrNotFound) {
				t.Fatalf("want the API's 404 and ErrNotRecorded, got %v", err)
			}
			st.failing.Store(false)
			f.srv.Clock.Advance(time.Second)
			switch resume {
			case "ResumeAll":
				rs, err := c.ResumeAll(f.ctx)
				t.Logf("ResumeAll: %+v %v", rs, err)
			case "Resume":
				r, err := c.Resume(f.ctx, "pix:order-unrec2")
				t.Logf("Resume: %+v %v", r, err)
			}
			f.srv.AddOffer(pagpolartest.Offer{ID: "no-such-offer", Amount: 100}) // the condition went away
			_, err = c.Payments.Pix(f.ctx, p)
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("the later call: %v, want the same recorded failure (404)", err)
			}
			if n, posts := f.successful("sale"), f.posts("pix"); n != 0 || posts != 1 {
				t.Errorf("KNOWN REFUSAL TURNED INTO A CHARGE: %d sales, %d POSTs after the operation was reported failed (404)", n, posts)
			}
		})
	}
}

// The in-process memory of an unrecorded outcome is applied over a
// record another process has moved on: FAILED while the effect exists.
//
// unrecordedOutcomes is keyed by record ID only. existing() writes the
// remembered outcome over whatever the store now holds (the Update passes:
// it carries the version just acquired). Host A's 404 could not be
// written (the record stays pending, 1 attempt); host B, sharing the
// store, continues the operation as the README says ("a call from another
// process looks the effect up first and sends again only if the lookup
// proves nothing was done"): not found, trusted, resent — the offer now
// exists, the sale is created, the answer is lost, and B's process ends:
// the record is UNKNOWN with a sale under the key. Host A's next call of
// the operation answers its remembered 404 and writes FAILED over B's
// unknown. The caller, told the charge failed, charges under a new
// operation ID: two sales for one order.
func TestUnrecordedOutcome_NeverOverwritesANewerRecord(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	st := &failingUpdateStore{Memory: keystore.NewMemoryWithClock(f.srv.Clock)}
	hostA := f.client(t, WithStore(st))
	f.warm(t, hostA)
	p := PixParams{OfferID: "no-such-offer", ExternalReference: "order-stale", Customer: goodCustomer}
	opID := "pix:order-stale"
	st.failing.Store(true)
	if _, err := hostA.Payments.Pix(f.ctx, p); !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("host A: %v, want ErrNotRecorded", err)
	}
	st.failing.Store(false)
	f.srv.AddOffer(pagpolartest.Offer{ID: "no-such-offer", Amount: 100})
	f.srv.Clock.Advance(time.Second)

	ctxB, cancelB := context.WithCancel(f.ctx)
	defer cancelB()
	hostB := f.client(t, WithStore(st), WithHook(func(_ context.Context, e Event) {
		if e.Kind == EventSent && e.Attempt == 2 {
			cancelB() // host B's process ends right after the lost answer
		}
	}))
	f.warm(t, hostB)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	_, errB := hostB.Payments.Pix(ctxB, p)
	if !isUnknown(errB) {
		t.Fatalf("host B: %v, want unknown (its resend's answer was lost)", errB)
	}
	f.srv.ClearFaults()
	if n := len(salesUnder(f, hostA, opID)); n != 1 {
		t.Fatalf("host B's resend left %d sales, want 1", n)
	}
	rec, _ := st.Get(f.ctx, hostA.storeID(opID))
	t.Logf("record after host B: %s, %d attempts (%s)", rec.State, rec.Attempts, rec.Error)

	_, errA := hostA.Payments.Pix(f.ctx, p)
	for _, pr := range ledgerCheck(f, hostA, opID, "", errA) {
		t.Error("host A: " + pr)
	}
	rec, _ = st.Get(f.ctx, hostA.storeID(opID))
	if rec.State == keystore.StateFailed {
		t.Errorf("the record is now FAILED (%s), written over host B's unknown, while sale %s exists", rec.Error, salesUnder(f, hostA, opID)[0].Identifier)
	}
}

// The status in a 2xx body was never checked: a 201 with a declined
// card sale, a failed refund, a rejected plan change or an unknown status
// was recorded succeeded.
func TestOutcome_StatusIn2xxIsChecked(t *testing.T) {
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

// The operation's own unverifiable 2xx became a terminal "failed": the
// first call ended unknown; the next call's resend got the replay, took
// the mismatch for a collision and recorded failed with ErrParamsMismatch
// while the sale existed.
func TestOutcome_UnverifiableReplayStaysUnknown(t *testing.T) {
	t.Parallel()
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

// A 2xx whose body does not match the assumed shape (here: the API does
// not echo payment_method) is recorded as a terminal *failure* although the
// sale exists. The caller, told the operation failed, charges again under a
// new operation ID: two sales for one order.
func TestOutcome_2xxShapeMismatchIsNotFailed(t *testing.T) {
	f := newFixture(t, nil)
	proxy := rewritingProxy(t, f, http.MethodPost, "/payments/pix", func(v any) any {
		delete(v.(map[string]any), "payment_method")
		return v
	})
	c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-shape", Customer: goodCustomer}
	_, err := c.Payments.Pix(f.ctx, p)
	t.Logf("first call: %v (unknown=%v)", err, isUnknown(err))
	rec, _ := f.store.Get(f.ctx, c.storeID("pix:order-shape"))
	t.Logf("record state %s; ledger successful sales %d", rec.State, f.successful("sale"))
	if rec.State == keystore.StateFailed && f.successful("sale") == 1 {
		t.Errorf("BUG: a created sale is recorded as a terminal failure (%s), not unknown/succeeded", rec.Error)
	}
	if err != nil && !isUnknown(err) {
		// What a caller does after a definite failure: a new operation.
		p.OperationID = "retry-order-shape-2"
		_, _ = c.Payments.Pix(f.ctx, p)
	}
	if n := f.successful("sale"); n != 1 {
		t.Errorf("BUG: %d successful sales for one order after the caller reacted to the 'failure'", n)
	}
}

// A definite answer (404) whose "failed" could not be written left the
// record pending: a later call sent again and charged.
func TestUnrecordedOutcome_DefiniteAnswerIsRemembered(t *testing.T) {
	f := newFixture(t, nil)
	st := &failingUpdateStore{Memory: keystore.NewMemoryWithClock(f.srv.Clock)}
	c := f.client(t, WithStore(st))
	f.warm(t, c)
	p := PixParams{OfferID: "no-such-offer", ExternalReference: "order-unrec", Customer: goodCustomer}
	st.failing.Store(true)
	_, err := c.Payments.Pix(f.ctx, p)
	if !errors.Is(err, ErrNotRecorded) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("want the API's 404 and ErrNotRecorded, got %v", err)
	}
	st.failing.Store(false)
	f.srv.AddOffer(pagpolartest.Offer{ID: "no-such-offer", Amount: 100}) // the condition went away
	_, err = c.Payments.Pix(f.ctx, p)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("the later call: %v, want the same recorded failure", err)
	}
	if f.successful("sale") != 0 || f.posts("pix") != 1 {
		t.Fatalf("%d sales, %d POSTs: the known failure was turned into a charge", f.successful("sale"), f.posts("pix"))
	}
	mustStateIn(t, st.Memory, c, "pix:order-unrec", keystore.StateFailed)
}

type failingUpdateStore struct {
	*keystore.Memory
	failing atomic.Bool
}

func (s *failingUpdateStore) Update(ctx context.Context, r keystore.Record) (keystore.Record, error) {
	if s.failing.Load() && r.State.Settled() {
		return keystore.Record{}, keystore.ErrUnavailable
	}
	return s.Memory.Update(ctx, r)
}

func mustStateIn(t *testing.T, st *keystore.Memory, c *Client, opID string, want keystore.State) {
	t.Helper()
	rec, err := st.Get(context.Background(), c.storeID(opID))
	if err != nil || rec.State != want {
		t.Fatalf("record %s: %s %v, want %s", opID, rec.State, err, want)
	}
}
