// Attribution through the whole client: which fields of a listed sale or
// refund prove it another operation's, and which spellings and values do not.

package pagpolar

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// An amount written as a float of centavos is "another amount under
// every reading".
//
// wire.Amount reads an integer n as {n, 100n} (centavos or reais) but a
// number with a '.' only as reais: 1500.0 — what PHP's json_encode or
// Python's json.dumps write for a float column of centavos — is read as
// 150000 centavos only. compareFields then *proves* the operation's own
// refund is another ("of another amount under every reading"):
//   - after a 500 that followed the commit, the own refund is excluded,
//     the not-found trusted and the refund sent again: two refunds;
//   - after a lost answer, the lookup excludes it, the resend gets the
//     replay, and the replay's "proven" difference is a collision: the
//     operation is recorded FAILED (ErrParamsMismatch) while its refund
//     exists.
func TestAttribute_RefundAmountAsFloatOfCentavosIsNoProof(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault pagpolartest.FaultAction
	}{
		{"commit-then-500", pagpolartest.FaultCommitThen500},
		{"commit-then-drop", pagpolartest.FaultCommitThenDrop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			proxy := bodyProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
				if status >= 300 || !strings.Contains(r.URL.Path, "/refunds") {
					return body
				}
				return editObjects(body, func(m map[string]any) {
					if n, ok := m["amount"].(json.Number); ok && !strings.Contains(n.String(), ".") {
						m["amount"] = json.Number(n.String() + ".0")
					}
				})
			})
			c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
			sale, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-float", Customer: goodCustomer, CardToken: "tok_ok"})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Clock.Advance(5 * time.Second)
			f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: tc.fault, Times: 1})
			r, err := c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-float", SaleID: sale.Sale.ID, Amount: 1500})
			id := ""
			if r != nil {
				id = r.Refund.ID
			}
			report(t, f, c, "rf-float", id, err)
			if errors.Is(err, ErrParamsMismatch) {
				t.Logf("recorded as a key collision: %v", err)
			}
		})
	}
}

// A method spelling learned from one answer is used to exclude.
//
// shapes.learnMethod maps an unrecognised spelling to the method of the
// first fresh answer that shows it, and compareMethod then treats an
// effect with that spelling as *proven* to be that method. An API whose
// payment_method is the channel ("online" for PIX and card, "boleto" for
// boleto) teaches "online = pix" on the first PIX charge; the next card
// charge whose answer is lost finds its own sale "paid by pix", excludes
// it, trusts the not-found and charges the card again. Nothing was loud
// before: every fresh answer had been accepted.
func TestAttribute_LearnedMethodSpellingIsNoProof(t *testing.T) {
	f := newFixture(t, nil)
	proxy := bodyProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
		if status >= 300 {
			return body
		}
		return editObjects(body, func(m map[string]any) {
			if pm, ok := m["payment_method"].(string); ok && (pm == "pix" || pm == "credit_card") {
				m["payment_method"] = "online"
			}
		})
	})
	c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-learn-1", Customer: goodCustomer}); err != nil {
		t.Fatalf("first PIX charge (teaches online = pix): %v", err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitThen500, Times: 1})
	ch, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-learn-2", Customer: goodCustomer, CardToken: "tok_ok"})
	id := ""
	if ch != nil {
		id = ch.Sale.ID
	}
	report(t, f, c, "credit_card:order-learn-2", id, err)
}

// A recognised value on the operation's own sale that is not proof.
//
// compareFields takes a recognised, different value as proof that a sale
// is another operation's. Two values a real sale of ours plausibly
// carries:
//   - payment_method "debit_card": a Brazilian combo card (crédito e
//     débito) charged through /payments/credit-card is settled as debit;
//     MethodSpellings lists debit_card as "recognised, and never one of
//     ours";
//   - "subscription_id": 0, the zero value a Go or Java backend with
//     integer IDs writes for "no subscription" (scalarString reads a
//     number as its text, so "0" is a subscription: "a renewal").
//
// After a 500 the own sale is excluded and the card charged twice; after a
// lost answer the replay is a "collision" and the operation is recorded
// FAILED while its sale exists.
func TestAttribute_RecognisedOtherValueIsNoProof(t *testing.T) {
	rewrites := map[string]func(m map[string]any){
		"combo-card-settled-as-debit": func(m map[string]any) {
			if m["payment_method"] == "credit_card" {
				m["payment_method"] = "debit_card"
			}
		},
		"subscription-id-zero": func(m map[string]any) {
			if _, ok := m["subscription_id"]; !ok {
				m["subscription_id"] = json.Number("0")
			}
		},
		// The API keeps the caller's reference as "order_code" and calls its
		// own human-readable code "reference", a name the table in
		// internal/wire/fields.go does not read for the external reference.
		"api-own-code-under-alias-reference": func(m map[string]any) {
			if ref, ok := m["external_reference"]; ok {
				delete(m, "external_reference")
				m["order_code"] = ref
				m["reference"] = "PP-000123"
			}
		},
	}
	for name, rw := range rewrites {
		for _, fault := range []pagpolartest.FaultAction{pagpolartest.FaultCommitThen500, pagpolartest.FaultCommitThenDrop} {
			t.Run(name+"/"+fault.String(), func(t *testing.T) {
				f := newFixture(t, nil)
				proxy := bodyProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
					if status >= 300 || !strings.Contains(r.URL.Path, "sales") && !strings.Contains(r.URL.Path, "/payments/") {
						return body
					}
					return editObjects(body, rw)
				})
				c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
				f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: fault, Times: 1})
				ch, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-proof", Customer: goodCustomer, CardToken: "tok_ok"})
				id := ""
				if ch != nil {
					id = ch.Sale.ID
				}
				report(t, f, c, "credit_card:order-proof", id, err)
			})
		}
	}
}

// The engine fails safe when the API or the clock is not what it assumed:
// each test below drives one such difference through the client and
// asserts on the ledger.

// The independent server spelled the card method "credit-card": the
// lookup read the operation's own sale as another operation's, trusted the
// not-found and resent. Two sales, and the operation reported failed.
func TestAttribute_CardMethodInAnotherSpellingIsOurs(t *testing.T) {
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

// A sale list whose created_at is not RFC 3339 makes every sale "older
// than the first send": the lookup says not-found, is trusted, and the
// engine resends; the original (committed, key released by its 500) and the
// resend both charge.
func TestAttribute_UnparseableCreatedAtIsNoProofOfAge(t *testing.T) {
	f := newFixture(t, nil)
	proxy := rewritingProxy(t, f, http.MethodGet, "/sales", func(v any) any {
		for _, s := range v.(map[string]any)["data"].([]any) {
			m := s.(map[string]any)
			if ts, err := time.Parse(time.RFC3339Nano, m["created_at"].(string)); err == nil {
				m["created_at"] = ts.Format("2006-01-02 15:04:05")
			}
		}
		return v
	})
	c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
	ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-ts", Customer: goodCustomer})
	t.Logf("call: err=%v", err)
	if ch != nil {
		t.Logf("source %s", ch.Operation.Source)
	}
	if n := f.successful("sale"); n != 1 {
		t.Errorf("BUG: %d successful sales for one operation (unmatchable lookup taken as not-found)", n)
	}
}

// A declined attempt of the same order within ClockSkew (2 s default)
// before the retry's first send is taken as the retry's own outcome, while
// the retry's sale (not yet visible to lookups) is paid. The caller, told
// "declined", tries a third time: two paid sales for one order.
func TestAttribute_EarlierDeclineWithinSkewIsNotTheRetrys(t *testing.T) {
	pol := testPolicy()
	f := newFixture(t, nil, WithRetryPolicy(pol))
	p := CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-skew", Customer: goodCustomer, CardToken: "tok_a", OperationID: "order-skew-try-1"}
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultDecline, Times: 1})
	if _, err := f.c.Payments.CreditCard(f.ctx, p); !errors.Is(err, ErrDeclined) {
		t.Fatalf("try 1: %v", err)
	}
	f.srv.Clock.Advance(500 * time.Millisecond) // customer re-enters a card half a second later
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitThenDrop, LookupLag: 200 * time.Millisecond, Times: 1})
	p.CardToken, p.OperationID = "tok_b", "order-skew-try-2"
	_, err := f.c.Payments.CreditCard(f.ctx, p)
	t.Logf("try 2: %v; paid sales now %d", err, f.successful("sale"))
	if errors.Is(err, ErrDeclined) && f.successful("sale") == 1 {
		t.Errorf("BUG: try 2 reported declined (try 1's sale), but try 2's sale is paid")
	}
	if errors.Is(err, ErrDeclined) {
		p.CardToken, p.OperationID = "tok_c", "order-skew-try-3"
		_, _ = f.c.Payments.CreditCard(f.ctx, p)
		if n := f.successful("sale"); n > 1 {
			t.Errorf("BUG: %d paid sales for one order", n)
		}
	}
}

// A refund object whose "amount" is the refunded sale's amount, the
// refund's own under another name ({"amount": 9990, "refund_amount":
// 1500}). The first answer is lost after the refund was made; the lookup
// lists it. Its "amount" is no proof that it is another refund: the SDK
// never saw this API echo a refund's amount.
func TestAttribute_RefundAmountThatIsTheSalesIsNoProof(t *testing.T) {
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-rf-amount", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	saleAmount := sale.Sale.Amount
	base := answerProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
		if !strings.HasSuffix(req.URL.Path, "/refunds") || resp.StatusCode >= 300 {
			return body
		}
		return editObjects(body, func(m map[string]any) {
			m["refund_amount"], m["amount"] = m["amount"], saleAmount
		})
	})
	c := proxiedClient(t, f, base)
	f.srv.Inject(pagpolartest.Fault{Route: "refund", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
	r, err := c.Refunds.Create(f.ctx, RefundParams{OperationID: "rf-amount-1", SaleID: sale.Sale.ID, Amount: 1500})
	id := ""
	if err == nil {
		id = r.Refund.ID
	}
	report(t, f, c, "rf-amount-1", id, err)
}

// The refund's "amount" is the sale's (TestAttribute_RefundAmountThatIsTheSalesIsNoProof),
// and the client's first refund was a full one: its answer "echoes" the
// amount sent, so amountsProve turns on, and a later partial refund's own
// refund, found by the lookup, is "of another amount".
func TestAttribute_FullRefundDoesNotTeachAmountEcho(t *testing.T) {
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
	base := answerProxy(t, f, func(req *http.Request, resp *http.Response, body []byte) []byte {
		if !strings.HasSuffix(req.URL.Path, "/refunds") || resp.StatusCode >= 300 {
			return body
		}
		return editObjects(body, func(m map[string]any) {
			m["refund_amount"], m["amount"] = m["amount"], saleAmount
		})
	})
	c := proxiedClient(t, f, base)
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
