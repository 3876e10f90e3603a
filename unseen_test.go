// Tests of answers and faults no earlier test covers (the "unseen" review):
// each drives the SDK against the fake behind a proxy that answers in a
// shape or with a clock the fake does not have, and checks the ledger: no
// two effects for one operation, no failure or "not executed" while the
// effect exists, no success without one, no failure concluded from a
// guess.

package pagpolar

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// unseenClient is a client of f's credential, with f's store, talking to
// base.
func unseenClient(t *testing.T, f *fixture, base string) *Client {
	t.Helper()
	return f.client(t, WithStore(f.store), WithBaseURL(base))
}

// The API's Date header jumps an hour ahead (its front servers' clock is
// stepped, a new load balancer writes its own) after the client validated
// its view of the API's clock, while creation times keep the database's
// clock. Reads move the estimator's median before any fresh charge answer
// can switch it off; the next charge's first send is placed an hour late
// on the API's clock, and its own sale, found by the lookup after a lost
// answer, must not be excluded as "created before the first send".
func TestUnseen_DateClockStepsAhead(t *testing.T) {
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
	if !c.srvClock.usable() {
		t.Fatal("setup: the warm-up charge did not validate the client's view of the API's clock")
	}
	jump.Store(true)
	for range sampleCount {
		if _, err := c.Payments.SalesByExternalReference(f.ctx, "someone-else"); err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	f.srv.Inject(pagpolartest.Fault{Route: "pix", ExternalReference: "order-step", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
	ch, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-step", Customer: goodCustomer})
	id := ""
	if err == nil {
		id = ch.Sale.ID
	}
	report(t, f, c, "pix:order-step", id, err)
}

// The API writes creation times three hours ahead of its Date headers (a
// UTC wall clock labelled with São Paulo's offset the wrong way round).
// A declined try of an order, half a second before the retry, then looks
// created after the retry's first send; the retry is never processed (a
// gateway's 502 in front of the API), so the only sale a lookup finds is
// the earlier decline. The retry must not be reported declined on that
// guess: it was never tried.
func TestUnseen_CreatedAtAheadOfDate(t *testing.T) {
	f := newFixture(t, nil)
	base := advProxy(t, f, func(r *http.Request, status int, h http.Header, body []byte) []byte {
		return editObjects(body, func(m map[string]any) {
			if s, ok := m["created_at"].(string); ok {
				if ts, err := time.Parse(time.RFC3339Nano, s); err == nil {
					m["created_at"] = ts.Add(3 * time.Hour).Format(time.RFC3339Nano)
				}
			}
		})
	})
	c := unseenClient(t, f, base)
	if _, err := c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: "warm-ahead", Customer: goodCustomer, CardToken: "tok_w"}); err != nil {
		t.Fatalf("warm-up charge: %v", err)
	}
	p := CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-ahead", Customer: goodCustomer, CardToken: "tok_a", OperationID: "order-ahead-try-1"}
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", ExternalReference: "order-ahead", Action: pagpolartest.FaultDecline, Times: 1})
	if _, err := c.Payments.CreditCard(f.ctx, p); !errors.Is(err, ErrDeclined) {
		t.Fatalf("try 1: %v, want declined", err)
	}
	f.srv.Clock.Advance(500 * time.Millisecond)
	f.srv.Inject(pagpolartest.Fault{Route: "credit_card", ExternalReference: "order-ahead", Action: pagpolartest.FaultGateway, Status: 502, Times: 1})
	p.CardToken, p.OperationID = "tok_b", "order-ahead-try-2"
	ch, err := c.Payments.CreditCard(f.ctx, p)
	id := ""
	if err == nil {
		id = ch.Sale.ID
	}
	if errors.Is(err, ErrDeclined) {
		t.Errorf("FAILED FROM A GUESS: try 2 reported declined (%v), but it was never processed: the decline is try 1's", err)
	}
	report(t, f, c, "order-ahead-try-2", id, err)
}
