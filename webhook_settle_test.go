package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// A TRANSACTION_* event settles a charge left unknown, with no request;
// one about an operation a worker holds asks to be tried again.
func TestSettleFromWebhook_Charge(t *testing.T) {
	f := newFixture(t, nil)
	f.warm(t, f.c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	ctx, cancel := endAtAnswer(f.ctx)
	defer cancel()
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-wh", Customer: goodCustomer}
	if _, err := f.c.Payments.Pix(ctx, p); !isUnknown(err) {
		t.Fatalf("first call: %v", err)
	}
	var created *pagpolartest.Event
	for _, ev := range f.srv.Events() {
		if ev.Name == wire.EventTransactionCreated && ev.Transaction.ExternalReference == "order-wh" {
			created = &ev
		}
	}
	body, _ := json.Marshal(pagpolartest.EnvelopeFor(*created))
	requests := len(f.srv.Ledger().Requests)
	rs, err := f.c.SettleFromWebhook(f.ctx, body)
	if err != nil || len(rs) != 1 || rs[0].State != keystore.StateSucceeded || rs[0].Ref != created.Transaction.Identifier {
		t.Fatalf("settle: %+v %v", rs, err)
	}
	if len(f.srv.Ledger().Requests) != requests {
		t.Fatal("settling from an event sent a request")
	}
	f.srv.ClearFaults()
	if ch, err := f.c.Payments.Pix(f.ctx, p); err != nil || ch.Operation.Source != SourceLocalRecord {
		t.Fatalf("after: %v", err)
	}
}

// The API's error message is stored, scrubbed of the
// customer's data, so that a repeated call and ops show say why.
func TestFailedOperationKeepsTheAPIsReason(t *testing.T) {
	f := newFixture(t, nil)
	_, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "no-such-offer", ExternalReference: "order-why", Customer: goodCustomer})
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 404 {
		t.Fatalf("%v", err)
	}
	rec := mustState(t, f, f.c, "pix:order-why", keystore.StateFailed)
	if !strings.Contains(rec.Error, "not found") {
		t.Errorf("record error %q lacks the API's reason", rec.Error)
	}
	_, err = f.c.Payments.Pix(f.ctx, PixParams{OfferID: "no-such-offer", ExternalReference: "order-why", Customer: goodCustomer})
	if !errors.As(err, &ae) || !strings.Contains(ae.Message, "not found") {
		t.Fatalf("the repeated call does not say why: %v", err)
	}
	for _, c := range []struct{ in, want string }{
		{"customer maria@exemplo.com is blocked", "customer [e-mail] is blocked"},
		{"document 123.456.789-09 is invalid", "document [number] is invalid"},
		{"name Maria Silva does not match", "name [redacted] does not match"},
		{"offer 12 not found", "offer 12 not found"},
	} {
		if got := storedMessage(c.in, []string{"Maria Silva"}); got != c.want {
			t.Errorf("storedMessage(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if len(storedMessage(strings.Repeat("é", 500), nil)) > maxStoredMessage+len("…") {
		t.Error("not truncated")
	}
}

// eventFor returns the body of the fake's first event name about sale id.
func eventFor(t *testing.T, f *fixture, name, saleID string) []byte {
	t.Helper()
	for _, ev := range f.srv.Events() {
		if ev.Name == name && ev.Transaction != nil && ev.Transaction.Identifier == saleID {
			b, err := json.Marshal(pagpolartest.EnvelopeFor(ev))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no %s event for sale %s", name, saleID)
	return nil
}

// A late webhook about another operation's decline settles this
// operation "declined" while its own sale is paid.
//
// README's documented limit: another operation's decline of the same
// order, method and offer within ServerClockTolerance (2 s) before this
// one's first send "can be taken for this one's decline (a false
// 'declined', never a double charge)". A lookup sees every sale under the
// reference and decide() prefers the operation's own success over the
// refusal beside it. SettleFromWebhook attributes the one sale the event
// carries: the try-1 decline, delivered late (webhooks are retried ~30 s
// later and arrive out of order), is attrOursRefused for try 2, trusted,
// and recorded as try 2's outcome — FAILED, ErrDeclined — while try 2's
// sale is paid. The caller, told "declined", tries a third card: two paid
// sales for one order. The same record settled by Resume (a lookup)
// succeeds: the control.
func TestSettleFromWebhook_EarlierTrysDeclineDoesNotSettleTheRetry(t *testing.T) {
	for _, viaWebhook := range []bool{true, false} {
		name := "webhook"
		if !viaWebhook {
			name = "control/resume-by-lookup"
		}
		t.Run(name, func(t *testing.T) {
			pol := testPolicy()
			pol.ServerClockTolerance = DefaultRetryPolicy.ServerClockTolerance // the production 2 s
			f := newFixture(t, nil, WithRetryPolicy(pol))
			f.warm(t, f.c) // a running server: no pre-send snapshot
			ref := "order-wh-decline"
			try1 := CreditCardParams{OperationID: "order-wh-decline-try-1", OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer, CardToken: "tok_decline_1"}
			if _, err := f.c.Payments.CreditCard(f.ctx, try1); !errors.Is(err, ErrDeclined) {
				t.Fatalf("try 1: %v, want declined", err)
			}
			declined := salesUnder(f, f.c, try1.OperationID)
			if len(declined) != 1 {
				t.Fatalf("try 1 left %d sales", len(declined))
			}
			f.srv.Clock.Advance(500 * time.Millisecond) // the customer re-enters a card
			// Try 2 is charged; its answer is lost and the caller's deadline
			// ends while the lookups fail.
			try2 := try1
			try2.OperationID, try2.CardToken = "order-wh-decline-try-2", "tok_ok"
			f.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
			f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
			ctx, cancel := endAtAnswer(f.ctx)
			_, err := f.c.Payments.CreditCard(ctx, try2)
			cancel()
			if !isUnknown(err) {
				t.Fatalf("try 2: %v, want unknown", err)
			}
			f.srv.ClearFaults()
			f.srv.Clock.Advance(30 * time.Second) // the event's redelivery, ~30 s later: past every window
			if viaWebhook {
				body := eventFor(t, f, wire.EventTransactionDeclined, declined[0].Identifier)
				rs, err := f.c.SettleFromWebhook(f.ctx, body)
				t.Logf("SettleFromWebhook(TRANSACTION_DECLINED of try 1's sale %s): %+v %v", declined[0].Identifier, rs, err)
			} else {
				r, err := f.c.Resume(f.ctx, try2.OperationID)
				t.Logf("Resume: %+v %v", r, err)
			}
			// The caller asks again (same params): the record answers.
			ch, err := f.c.Payments.CreditCard(f.ctx, try2)
			id := ""
			if ch != nil {
				id = ch.Sale.ID
			}
			for _, p := range ledgerCheck(f, f.c, try2.OperationID, id, err) {
				t.Error("try 2: " + p)
			}
			if errors.Is(err, ErrDeclined) {
				// Told "declined", the caller tries a third card.
				try3 := try1
				try3.OperationID, try3.CardToken = "order-wh-decline-try-3", "tok_ok"
				if _, err := f.c.Payments.CreditCard(f.ctx, try3); err != nil {
					t.Fatalf("try 3: %v", err)
				}
				if n := f.successful("sale"); n > 1 {
					t.Errorf("DOUBLE CHARGE: %d paid sales for order %s", n, ref)
				}
			}
		})
	}
}

// A Playground test event settles a real operation "succeeded" on a
// sale that does not exist.
//
// CONTRACT.md: test events carry "test": true (and X-PagPolar-Test) and
// "in production, discard test events before processing". SettleFromWebhook
// never looks at the flag: a test delivery whose sample transaction names
// the order's reference (the Playground lets the developer write it; the
// docs' own sample is "PEDIDO-1234", the README's quick-start order)
// settles the unknown charge SUCCEEDED with the sample's sale ID. The
// order was never charged; every later call answers the fake sale from the
// record (local_record). The same body without "test" is a real event:
// the control settles nothing false because the sale it names is real.
func TestSettleFromWebhook_TestEventSettlesNothing(t *testing.T) {
	t.Parallel()
	for _, cold := range []bool{false, true} {
		t.Run(fmt.Sprintf("cold=%v", cold), func(t *testing.T) {
			f := newFixture(t, nil)
			c := f.client(t, WithStore(f.store))
			if !cold {
				f.warm(t, c)
			}
			ref := "PEDIDO-1234"
			p := PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer}
			// The request never reaches processing; the lookups fail; the
			// caller's deadline ends: unknown, and no sale exists.
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultDropBeforeProcessing, Times: 1})
			ctx, cancel := endAtAnswer(f.ctx)
			if cold {
				// The cold client's snapshot must succeed (else nothing is
				// sent); fail the lookups only after the send.
				c = f.client(t, WithStore(f.store), WithHook(func(ctx context.Context, e Event) {
					if e.Kind == EventSent {
						f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
					}
					endAtAnswerHook(ctx, e)
				}))
			} else {
				f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
			}
			_, err := c.Payments.Pix(ctx, p)
			cancel()
			if !isUnknown(err) {
				t.Fatalf("first call: %v, want unknown", err)
			}
			f.srv.ClearFaults()
			f.srv.Clock.Advance(time.Second)
			now := f.srv.Clock.Now().UTC()
			body, _ := json.Marshal(map[string]any{
				"id": "evt_playground_1", "creation_date": now.Format(time.RFC3339), "event": wire.EventTransactionPaid, "test": true,
				"data": map[string]any{"transaction": map[string]any{
					"id": "sale_playground_0001", "identifier": "sale_playground_0001", "status": "paid",
					"external_reference": ref, "payment_method": "pix", "offer_identifier": "offer-basic",
					"amount": 9990, "created_at": now.Format(time.RFC3339Nano),
				}},
			})
			requests := len(f.srv.Ledger().Requests)
			rs, err := c.SettleFromWebhook(f.ctx, body)
			t.Logf("SettleFromWebhook(test event): %+v %v", rs, err)
			if len(f.srv.Ledger().Requests) != requests {
				t.Error("settling from an event sent a request")
			}
			ch, err := c.Payments.Pix(f.ctx, p)
			id := ""
			if ch != nil {
				id = ch.Sale.ID
				t.Logf("the call now answers sale %s (source %s)", id, ch.Operation.Source)
			}
			for _, p := range ledgerCheck(f, c, "pix:"+ref, id, err) {
				t.Error(p)
			}
		})
	}
}

// A webhook about an earlier operation's sale makes a charge that was
// never sent unknown for good.
//
// A cold client's charge whose pre-send snapshot failed (or whose process
// crashed in it) is left pending with 0 attempts: nothing was sent, and the next call takes the
// snapshot and sends (README: "If the snapshot cannot be read, the charge
// is not sent ... call again"). SettleFromWebhook treated it like any
// unsettled candidate: an event about another operation's sale under the reference
// (an earlier PIX of the order, paid late) is unclear for it (no snapshot,
// no floor), and unknownSaved turns the record UNKNOWN — with that sale in
// Unclear. From then on every call, Resume and ResumeAll look the order
// up, find the same unattributable sale, and end ErrOutcomeUnknown:
// nothing ever settles it, and the order can never be charged under its
// operation ID (the README forbids a new one while it is unsettled). The
// control: no event, and the next call charges.
func TestSettleFromWebhook_NeverSentChargeStaysSendable(t *testing.T) {
	for _, event := range []bool{true, false} {
		name := "event-about-earlier-sale"
		if !event {
			name = "control/no-event"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			ref := "order-never-sent"
			// An earlier operation of the order (a PIX that expired unpaid,
			// say): its sale is under the same reference.
			earlier, err := f.c.Payments.Pix(f.ctx, PixParams{OperationID: "pix:" + ref + "-attempt-1", OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Clock.Advance(time.Minute)
			c := f.client(t, WithStore(f.store)) // a new process: cold
			p := PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer}
			f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
			_, err = c.Payments.Pix(f.ctx, p)
			if err == nil || !strings.Contains(err.Error(), "nothing was sent") {
				t.Fatalf("first call: %v, want 'nothing was sent'", err)
			}
			f.srv.ClearFaults()
			crashedInSnapshot(t, f.store, c.storeID("pix:"+ref))
			mustState(t, f, c, "pix:"+ref, keystore.StatePending)
			if event {
				rs, err := c.SettleFromWebhook(f.ctx, eventFor(t, f, wire.EventTransactionCreated, earlier.Sale.ID))
				t.Logf("SettleFromWebhook(earlier sale %s): %+v %v", earlier.Sale.ID, rs, err)
			}
			f.srv.Clock.Advance(time.Second)
			var last error
			for i := range 3 {
				_, last = c.Payments.Pix(f.ctx, p)
				if !isUnknown(last) {
					break
				}
				f.srv.Clock.Advance(time.Minute)
				if i == 1 {
					if r, err := c.Resume(f.ctx, "pix:"+ref); err == nil {
						t.Logf("Resume: %s %v", r.State, r.Err)
					}
				}
			}
			if isUnknown(last) {
				t.Errorf("NEVER SETTLES: an operation that never sent anything is %v after 3 calls and a Resume; POSTs sent for it: %d", last, f.posts("pix")-1)
			}
			if last != nil && !isUnknown(last) {
				t.Errorf("the call: %v", last)
			}
		})
	}
}
