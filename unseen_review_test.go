package pagpolar

// Regressions from the review of the unseen-shape fixes (ab6754c..8ba5fcc):
// each failed on c528fac and passes with the fixes that follow it.

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// The Date clock steps an hour ahead; ordinary traffic (successful charges)
// follows instead of reads. Each charge's own answer is flagged "stepped"
// (validated=false) but its own check, against a floor fixed before the
// step, validates the estimator again at once; once the median has moved,
// the next charge is placed an hour late.
func TestUnseenReview_DateStepThenCharges(t *testing.T) {
	for n := 1; n <= 6; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newFixture(t, nil)
			var jump atomic.Bool
			base := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
				if jump.Load() {
					if d, err := http.ParseTime(h.Get("Date")); err == nil {
						h.Set("Date", d.Add(time.Hour).UTC().Format(http.TimeFormat))
					}
				}
				return body
			})
			c := unseenClient(t, f, base)
			if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "warm-step", Customer: goodCustomer}); err != nil {
				t.Fatalf("warm-up charge: %v", err)
			}
			jump.Store(true)
			for i := range n {
				if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: fmt.Sprint("other-", i), Customer: goodCustomer}); err != nil {
					t.Fatalf("charge %d: %v", i, err)
				}
			}
			t.Logf("usable=%v off=%v", c.srvClock.usable(), c.srvClock.off())
			f.srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "order-step", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
			ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-step", Customer: goodCustomer})
			id := ""
			if err == nil {
				id = ch.Sale.ID
			}
			report(t, f, c, "pix:order-step", id, err)
		})
	}
}

// A 400 the API answers for a missing required field, whose message lists
// the accepted headers (the key among them): documented as "invalid body:
// key not registered".
func TestUnseenReview_ValidationMessageNamesHeaders(t *testing.T) {
	f := newFixture(t, nil)
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"code":"validation_error","message":"customer.email é obrigatório; cabeçalhos exigidos: Authorization, Idempotency-Key"}`))
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(gw.Close)
	c := unseenClient(t, f, gw.URL)
	start := time.Now()
	_, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-400", Customer: goodCustomer})
	var ae *APIError
	var ue *OutcomeUnknownError
	t.Logf("err=%v (APIError=%v unknown=%v) after %v", err, errors.As(err, &ae), errors.As(err, &ue), time.Since(start))
	rec, _ := f.store.Get(f.ctx, c.storeID("pix:order-400"))
	t.Logf("record: state=%s error=%q", rec.State, rec.Error)
	if !errors.As(err, &ae) {
		t.Errorf("a documented 400 (invalid body, key not registered) ended %v, not as the API's refusal", err)
	}
}

// A CDN that writes Age on every answer (Varnish, Fastly: "Age: 0" on a
// miss or pass).
func TestUnseenReview_AgeZeroEverywhere(t *testing.T) {
	f := newFixture(t, nil)
	base := unseenProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
		resp.Header.Set("Age", "0")
		return body
	})
	c := unseenClient(t, f, base)
	sale, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-age", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-age", SaleID: sale.Sale.ID, Amount: 500})
	t.Logf("refund behind Age: 0: %v", err)
	if err != nil {
		t.Errorf("refund refused behind a CDN writing Age: 0: %v", err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	_, err = c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-age-2", Customer: goodCustomer})
	t.Logf("lost answer behind Age: 0: %v", err)
	if err != nil {
		t.Errorf("lost answer not settled behind Age: 0: %v", err)
	}
}

// The refund's "amount" is the sale's (TestUnseen_RefundAmountIsTheSales),
// and the client's first refund was a full one: its answer "echoes" the
// amount sent, so amountsProve turns on, and a later partial refund's own
// refund, found by the lookup, is "of another amount".
func TestUnseenReview_FullRefundTeachesEcho(t *testing.T) {
	f := newFixture(t, nil)
	s1, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-rf-a", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-rf-b", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	saleAmount := s1.Sale.Amount
	base := unseenProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
		if !strings.HasSuffix(req.URL.Path, "/refunds") || resp.StatusCode >= 300 {
			return body
		}
		return editObjects(body, func(m map[string]any) {
			m["refund_amount"], m["amount"] = m["amount"], saleAmount
		})
	})
	c := unseenClient(t, f, base)
	if _, err := c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-full", SaleID: s1.Sale.ID, Amount: saleAmount}); err != nil {
		t.Fatalf("full refund: %v", err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
	r, err := c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-part", SaleID: s2.Sale.ID, Amount: 1500})
	id := ""
	if err == nil {
		id = r.Refund.ID
	}
	report(t, f, c, "rf-part", id, err)
}
