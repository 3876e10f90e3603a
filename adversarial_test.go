// Adversarial tests from a review of the rewritten engine: each one drives
// the SDK, against the fake behind a proxy that answers in a shape the fake
// does not have (or with a clock it does not model), into one of the three
// outcomes the SDK promises never to reach: two effects for one operation,
// failed / not executed while the effect exists, succeeded without one.
//
// Each test failed on the engine it was written against (commit 52a4d3d;
// the subtests named "control/..." passed there: the same flow without the
// shape) and guards the fix that made it pass.

package pagpolar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// advRewrite rewrites one answer of the fake: the request it answers, its
// status, its headers (modifiable) and its body; it returns the new body.
type advRewrite func(r *http.Request, status int, h http.Header, body []byte) []byte

// advProxy puts a reverse proxy in front of the fake that passes every
// answer through rw. A connection the fake drops becomes the proxy's 502
// with an empty body (ambiguous, as a drop is).
func advProxy(t *testing.T, f *fixture, rw advRewrite) string {
	t.Helper()
	u, _ := url.Parse(f.srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		b = rw(resp.Request, resp.StatusCode, resp.Header, b)
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ps := httptest.NewServer(rp)
	t.Cleanup(ps.Close)
	return ps.URL
}

// isList reports whether the request is GET of a list route ending in path.
func isGet(r *http.Request, suffix string) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, suffix)
}

// editObjects applies fn to every JSON object of a body: the object itself,
// or every item of its "data" list. Numbers are kept as json.Number so
// that fn can write a number in any literal form.
func editObjects(body []byte, fn func(m map[string]any)) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v map[string]any
	if dec.Decode(&v) != nil {
		return body
	}
	if data, ok := v["data"].([]any); ok {
		for _, it := range data {
			if m, ok := it.(map[string]any); ok {
				fn(m)
			}
		}
	} else {
		fn(v)
	}
	b, _ := json.Marshal(v)
	return b
}

// countMine counts the successful effects under the operation's key.
func countMine(f *fixture, c *Client, opID string) int {
	key := c.idempotencyKey(opID)
	n := 0
	for _, e := range f.srv.Ledger().Effects() {
		if e.Key == key && e.Successful {
			n++
		}
	}
	return n
}

func report(t *testing.T, f *fixture, c *Client, opID, id string, err error) {
	t.Helper()
	for _, p := range ledgerCheck(f, c, opID, id, err) {
		t.Error(p)
	}
	posts := 0
	for _, r := range f.srv.Ledger().Requests {
		if r.Method == http.MethodPost {
			posts++
		}
	}
	t.Logf("outcome: id=%q err=%v; POSTs the fake received: %d", id, err, posts)
}

// ---------------------------------------------------------------------------
// 1. Paging the SDK does not see.
//
// A Laravel + league/fractal API pages every list as
//
//	{"data": [...], "meta": {"pagination": {"total", "count", "per_page",
//	 "current_page", "total_pages", "links": {"next": ...}}}}
//
// wire.markers looks one level into "meta" only; the member "pagination"
// is neither a known marker nor looksLikePaging ("pagination" does not
// contain "page"), so the first page is read as the whole list. The
// operation's own sale, on page 2, is "not found"; the not-found is
// trusted and the charge resent: two sales.
//
// The same happens with a bare JSON array whose paging is only in
// headers (X-Total-Count), and with Portuguese markers ("paginacao",
// "proxima_pagina") that contain none of pagingWords.
func TestAdversarial_PagingMarkersTheSDKDoesNotSee(t *testing.T) {
	styles := []string{"fractal-meta-pagination", "bare-array-x-total-count", "portuguese-markers"}
	for _, style := range styles {
		t.Run(style, func(t *testing.T) {
			f := newFixture(t, nil)
			proxy := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
				if status != 200 || !isGet(r, "/sales") {
					return body
				}
				return pageSales(r, h, body, style)
			})
			c := f.client(t, WithStore(f.store), WithBaseURL(proxy))
			ref := "order-fractal"
			// Three earlier boleto sales of the order: the PIX sale lands on page 2.
			for i := range 3 {
				if _, err := c.Payments.Boleto(f.ctx, BoletoParams{OperationID: fmt.Sprintf("b%d", i), OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer}); err != nil {
					t.Fatal(err)
				}
			}
			f.srv.Clock.Advance(5 * time.Second)
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
			ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer})
			id := ""
			if ch != nil {
				id = ch.Sale.ID
			}
			report(t, f, c, "pix:"+ref, id, err)
		})
	}
}

// pageSales re-pages the fake's full sale list, two items a page, in style.
func pageSales(r *http.Request, h http.Header, body []byte, style string) []byte {
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil {
		return body
	}
	const per = 2
	page, _ := strconv.Atoi(r.URL.Query().Get("page"))
	if page < 1 {
		page = 1
	}
	total := len(list.Data)
	pages := max((total+per-1)/per, 1)
	from := min((page-1)*per, total)
	to := min(from+per, total)
	items := list.Data[from:to]
	if items == nil {
		items = []json.RawMessage{}
	}
	q := r.URL.Query()
	q.Set("page", strconv.Itoa(page+1))
	next := any(nil)
	if page < pages {
		next = r.URL.Path + "?" + q.Encode()
	}
	var out any
	switch style {
	case "fractal-meta-pagination":
		out = map[string]any{"data": items, "meta": map[string]any{"pagination": map[string]any{
			"total": total, "count": len(items), "per_page": per, "current_page": page, "total_pages": pages,
			"links": map[string]any{"next": next},
		}}}
	case "bare-array-x-total-count":
		h.Set("X-Total-Count", strconv.Itoa(total))
		h.Set("X-Per-Page", strconv.Itoa(per))
		out = items
	case "portuguese-markers":
		out = map[string]any{"data": items, "paginacao": map[string]any{"pagina_atual": page, "ultima_pagina": pages, "proxima_pagina": next}}
	}
	b, _ := json.Marshal(out)
	return b
}

// ---------------------------------------------------------------------------
// 2. The time rule overrides a snapshot that proves the effect new.
//
// A process that has seen no Date header takes a pre-send snapshot (its
// own GET answers the Date the first send is then placed by). The
// operation's own sale is absent from the snapshot — proof that it is new
// — but attributeFound runs compareTime after the snapshot check, and an
// effect created "before the floor" is excluded as another's. Two ways a
// real deployment gets there, neither visible to the self-test
// (checkClock), which needs a fresh 2xx first:
//   - nginx in front of the API writes its own Date header (it does not
//     pass the upstream's by default) and its clock is 5 s ahead of the
//     database that stamps created_at (> ServerClockTolerance, 2 s);
//   - created_at is São Paulo local time with a "Z" suffix (the classic
//     strftime("%Y-%m-%dT%H:%M:%SZ") on local time): three hours early.
//
// The own sale is excluded, the not-found trusted, the charge resent: two
// sales. Every serverless invocation or freshly deployed process is cold.
func TestAdversarial_TimeRuleOverridesSnapshot(t *testing.T) {
	cases := []struct {
		name string
		rw   func(f *fixture) advRewrite
	}{
		{"control/no-rewrite", func(f *fixture) advRewrite {
			return func(r *http.Request, status int, h http.Header, body []byte) []byte { return body }
		}},
		{"gateway-date-5s-ahead", func(f *fixture) advRewrite {
			return func(r *http.Request, status int, h http.Header, body []byte) []byte {
				h.Set("Date", f.srv.Clock.Now().Add(5*time.Second).UTC().Format(http.TimeFormat))
				return body
			}
		}},
		{"created-at-local-time-labelled-utc", func(f *fixture) advRewrite {
			brt := time.FixedZone("BRT", -3*3600)
			return func(r *http.Request, status int, h http.Header, body []byte) []byte {
				if status >= 300 {
					return body
				}
				return editObjects(body, func(m map[string]any) {
					if s, ok := m["created_at"].(string); ok {
						if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
							m["created_at"] = ts.In(brt).Format("2006-01-02T15:04:05.000") + "Z"
						}
					}
				})
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := testPolicy()
			pol.ServerClockTolerance = DefaultRetryPolicy.ServerClockTolerance // the production 2 s
			f := newFixture(t, nil, WithRetryPolicy(pol))
			proxy := advProxy(t, f, tc.rw(f))
			c := f.client(t, WithStore(f.store), WithBaseURL(proxy), WithRetryPolicy(pol)) // cold: no Date seen yet
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, Times: 1})
			ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-clock", Customer: goodCustomer})
			id := ""
			if ch != nil {
				id = ch.Sale.ID
			}
			report(t, f, c, "pix:order-clock", id, err)
		})
		// The same record settled by ResumeAll in another process (it
		// reads the floor from the record): not_executed while the sale
		// exists.
		t.Run(tc.name+"/resumeall", func(t *testing.T) {
			pol := testPolicy()
			pol.ServerClockTolerance = DefaultRetryPolicy.ServerClockTolerance
			f := newFixture(t, nil, WithRetryPolicy(pol))
			proxy := advProxy(t, f, tc.rw(f))
			ctx1, cancel1 := context.WithCancel(f.ctx)
			defer cancel1()
			c := f.client(t, WithStore(f.store), WithBaseURL(proxy), WithRetryPolicy(pol), WithHook(func(_ context.Context, e Event) {
				if e.Kind == EventSent && e.Attempt == 1 {
					cancel1() // the process dies right after the lost answer
				}
			}))
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
			if _, err := c.Payments.Pix(ctx1, PixParams{OfferID: "offer-basic", ExternalReference: "order-clock", Customer: goodCustomer}); !isUnknown(err) {
				t.Fatalf("first call: %v, want unknown", err)
			}
			f.srv.Clock.Advance(time.Second) // past every window
			c2 := f.client(t, WithStore(f.store), WithBaseURL(proxy), WithRetryPolicy(pol))
			rs, err := c2.ResumeAll(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				t.Logf("ResumeAll: %s %s %v", r.OperationID, r.State, r.Err)
				if (r.State == keystore.StateNotExecuted || r.State == keystore.StateFailed) && countMine(f, c2, r.OperationID) > 0 {
					t.Errorf("ResumeAll settled %s %s while its sale exists", r.OperationID, r.State)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 3. TrustAfter is a client-clock instant, and is read by another host.
//
// opMeta.TrustAfter ("when a not-found becomes conclusive") is written
// with the sending host's clock and compared, in settle and resume, with
// the clock of whichever host continues the operation. Rule 12: client
// clocks may be minutes apart. Host 1 gets the API's own 500 after the
// commit (TrustAfter = now + SettleDelay, 2 s, the allowance for a lookup
// that lags behind the commit) and its caller's context ends. Host 2,
// whose clock is 5 s ahead, continues the operation at once: its lookup is
// "conclusive" immediately, the sale is still hidden by a 500 ms lag
// (well inside SettleDelay) and the charge is resent: two sales. ResumeAll
// on host 2 settles the same record not_executed while the sale exists.
// Host 1 alone, or host 2 with an exact clock, settles on the one sale
// (the "control" subtests).
func TestAdversarial_TrustAfterReadOnAnotherHostsClock(t *testing.T) {
	for _, tc := range []struct {
		name   string
		offset time.Duration
		resume bool
	}{
		{"call/host2-5s-ahead", 5 * time.Second, false},
		{"resumeall/host2-5s-ahead", 5 * time.Second, true},
		{"control/call/host2-exact", 0, false},
		{"control/resumeall/host2-exact", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := testPolicy()
			pol.SettleDelay = 2 * time.Second // the production value
			f := newFixture(t, nil, WithRetryPolicy(pol))
			ctx1, cancel1 := context.WithCancel(f.ctx)
			defer cancel1()
			host1 := f.client(t, WithStore(f.store), WithRetryPolicy(pol), WithHook(func(_ context.Context, e Event) {
				if e.Kind == EventSent && e.Status == http.StatusInternalServerError {
					cancel1() // the caller stops waiting right after the 500
				}
			}))
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThen500, LookupLag: 500 * time.Millisecond, Times: 1})
			p := PixParams{OfferID: "offer-basic", ExternalReference: "order-hosts", Customer: goodCustomer}
			if _, err := host1.Payments.Pix(ctx1, p); !isUnknown(err) {
				t.Fatalf("host 1: %v, want unknown (context ended while settling)", err)
			}
			host2 := f.client(t, WithStore(f.store), WithRetryPolicy(pol))
			host2.clock = offsetClock{base: f.srv.Clock, off: tc.offset}
			opID := "pix:order-hosts"
			if tc.resume {
				rs, err := host2.ResumeAll(f.ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					if r.OperationID == opID && (r.State == keystore.StateNotExecuted || r.State == keystore.StateFailed) && countMine(f, host2, opID) > 0 {
						t.Errorf("ResumeAll settled %s %s while its sale exists (hidden by a %s lag)", opID, r.State, 500*time.Millisecond)
					}
				}
				return
			}
			ch, err := host2.Payments.Pix(f.ctx, p)
			id := ""
			if ch != nil {
				id = ch.Sale.ID
			}
			report(t, f, host2, opID, id, err)
		})
	}
}

// ---------------------------------------------------------------------------
// 4. An amount written as a float of centavos is "another amount under
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
func TestAdversarial_RefundAmountAsFloatOfCentavos(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault pagpolartest.FaultAction
	}{
		{"commit-then-500", pagpolartest.FaultCommitThen500},
		{"commit-then-drop", pagpolartest.FaultCommitThenDrop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			proxy := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
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

// ---------------------------------------------------------------------------
// 5. A method spelling learned from one answer is used to exclude.
//
// shapes.learnMethod maps an unrecognised spelling to the method of the
// first fresh answer that shows it, and compareMethod then treats an
// effect with that spelling as *proven* to be that method. An API whose
// payment_method is the channel ("online" for PIX and card, "boleto" for
// boleto) teaches "online = pix" on the first PIX charge; the next card
// charge whose answer is lost finds its own sale "paid by pix", excludes
// it, trusts the not-found and charges the card again. Nothing was loud
// before: every fresh answer had been accepted.
func TestAdversarial_LearnedMethodSpellingUsedAsProof(t *testing.T) {
	f := newFixture(t, nil)
	proxy := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
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

// ---------------------------------------------------------------------------
// 6. A recognised value on the operation's own sale that is not proof.
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
func TestAdversarial_RecognisedValueIsNotProof(t *testing.T) {
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
		// own human-readable code "reference", an alias of
		// FieldExternalReference.
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
				proxy := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
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

// ---------------------------------------------------------------------------
// 7. A plan-change answer without subscription_id skips the status check.
//
// isSubscriptionAnswer takes any 2xx plan-change body that carries
// next_billing_at (or external_reference) and no readable subscription ID
// for the subscription itself; planChangeAnsweredWithSubscription then
// declares success when its offer is the new one — the status is never
// looked at. A scheduled change ("applies at the next billing", the
// natural place for next_billing_at) or a rejected one answered 200 is
// recorded SUCCEEDED although the plan did not change. Here the API (the
// proxy) answers the change itself and makes none; the same bodies with
// subscription_id are handled right (ErrRefused / unknown): the controls.
func TestAdversarial_PlanChangeAnswerWithoutSubscriptionIDSkipsStatus(t *testing.T) {
	for _, tc := range []struct {
		status  string
		withSub bool
	}{
		{"rejected", false}, {"scheduled", false},
		{"rejected", true}, {"scheduled", true}, // controls
	} {
		name := tc.status
		if tc.withSub {
			name = "control/" + name + "-with-subscription_id"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			sub, err := f.c.Subscriptions.Subscribe(f.ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-sched", Customer: goodCustomer, PaymentMethod: "pix"})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(f.srv.URL)
			rp := httputil.NewSingleHostReverseProxy(u)
			api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/plan-change") {
					rp.ServeHTTP(w, r)
					return
				}
				body := map[string]any{"identifier": "pc_not_applied", "offer_identifier": "plan-pro", "from_offer_identifier": "plan-basic",
					"status": tc.status, "next_billing_at": f.srv.Clock.Now().AddDate(0, 1, 0).UTC().Format(time.RFC3339),
					"created_at": f.srv.Clock.Now().UTC().Format(time.RFC3339Nano)}
				if tc.withSub {
					body["subscription_id"] = sub.Subscription.ID
				}
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Date", f.srv.Clock.Now().UTC().Format(http.TimeFormat))
				_ = json.NewEncoder(w).Encode(body)
			}))
			defer api.Close()
			c := f.client(t, WithStore(f.store), WithBaseURL(api.URL))
			r, err := c.Subscriptions.ChangePlan(f.ctx, ChangePlanParams{OperationID: "pc-sched", SubscriptionID: sub.Subscription.ID, NewOfferID: "plan-pro"})
			// The status is read whatever the body carries: a rejected
			// change is refused; a scheduled one exists and is reported
			// scheduled, never applied (SAFETY rule 3: the status is the
			// decision).
			switch tc.status {
			case "rejected":
				if !errors.Is(err, ErrRefused) {
					t.Errorf("a rejected plan change answered 200: got %v (result %+v), want ErrRefused", err, r)
				}
			case "scheduled":
				if err != nil {
					t.Fatalf("a scheduled plan change answered 200: got %v, want success with DecisionScheduled", err)
				}
				if r.Decision() != DecisionScheduled || r.PlanChange.Status != "scheduled" {
					t.Errorf("decision %q (status %q), want %q", r.Decision(), r.PlanChange.Status, DecisionScheduled)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 8. A refund that was never processed takes a concurrent refund's effect,
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
func TestAdversarial_ClaimRaceRefundSucceedsWithoutEffect(t *testing.T) {
	f := newFixture(t, nil)
	sale, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-premium", ExternalReference: "order-claim", Customer: goodCustomer, CardToken: "tok_ok"})
	if err != nil {
		t.Fatal(err)
	}
	f.srv.Clock.Advance(5 * time.Second)
	// B's reads are 150 ms slower (another host, farther away).
	slow := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
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
