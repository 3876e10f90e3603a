// Adversarial tests from a second review of the money paths (webhook
// settling, ResumeAll, unrecorded outcomes, legacy record IDs). Each test
// drives the SDK against the fake into one of the outcomes the SDK
// promises never to reach — two effects for one operation, failed / not
// executed while the effect exists, succeeded without an effect — or into
// an "unknown" no later call can settle. They failed on the engine they
// were written against (commit 5d8d051; subtests named "control/..."
// passed there: the same flow without the defect's trigger) and guard the
// fixes.

package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

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

// salesUnder returns the ledger's sales under an operation's key.
func salesUnder(f *fixture, c *Client, opID string) []pagpolartest.LedgerSale {
	key := c.idempotencyKey(opID)
	var out []pagpolartest.LedgerSale
	for _, s := range f.srv.Ledger().Sales {
		if s.Key == key {
			out = append(out, s)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// A1. A late webhook about another operation's decline settles this
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
func TestAdversarial2_WebhookDeclineOfEarlierTrySettlesRetryDeclined(t *testing.T) {
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
			ctx, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
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

// ---------------------------------------------------------------------------
// A2. A Playground test event settles a real operation "succeeded" on a
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
func TestAdversarial2_TestEventSettlesRealOperation(t *testing.T) {
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
			ctx, cancel := context.WithTimeout(f.ctx, 150*time.Millisecond)
			if cold {
				// The cold client's snapshot must succeed (else nothing is
				// sent); fail the lookups only after the send.
				c = f.client(t, WithStore(f.store), WithHook(func(_ context.Context, e Event) {
					if e.Kind == EventSent {
						f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
					}
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

// ---------------------------------------------------------------------------
// A3. ResumeAll (or Resume) in the same client erases a known refusal the
// store did not take, and the next call charges.
//
// TestDefiniteAnswerNotRecorded guards "a definite answer whose failure
// could not be written must not become a charge on a later call of this
// client": Client.unrecorded remembers it, and existing() answers it. Only
// existing() reads that memory. resume() — what ResumeAll, Resume and
// `ops settle` run, the background settle job the README recommends —
// does not: it looks up the 404'd charge, finds nothing (the API refused
// it), settles NOT_EXECUTED, and saveOutcome's success forgets the
// remembered failure. The caller, told "failed" (404, ErrNotRecorded),
// calls again with the same params (an at-least-once job queue re-running
// the checkout): the record says not_executed, the condition went away,
// and the order is charged — the operation reported failed, then charged.
func TestAdversarial2_ResumeAllErasesUnrecordedRefusal(t *testing.T) {
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

// ---------------------------------------------------------------------------
// A4. The in-process memory of an unrecorded outcome is applied over a
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
func TestAdversarial2_StaleUnrecordedOutcomeOverwritesNewerRecord(t *testing.T) {
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

// ---------------------------------------------------------------------------
// A6. A webhook about an earlier operation's sale makes a charge that was
// never sent unknown for good.
//
// A cold client's charge whose pre-send snapshot failed is left pending
// with 0 attempts: nothing was sent, and the next call takes the snapshot
// and sends (README: "If the snapshot cannot be read, the charge is not
// sent ... call again"). SettleFromWebhook treats it like any unsettled
// candidate: an event about another operation's sale under the reference
// (an earlier PIX of the order, paid late) is unclear for it (no snapshot,
// no floor), and unknownSaved turns the record UNKNOWN — with that sale in
// Unclear. From then on every call, Resume and ResumeAll look the order
// up, find the same unattributable sale, and end ErrOutcomeUnknown:
// nothing ever settles it, and the order can never be charged under its
// operation ID (the README forbids a new one while it is unsettled). The
// control: no event, and the next call charges.
func TestAdversarial2_WebhookMakesNeverSentChargeUnknownForGood(t *testing.T) {
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

// ---------------------------------------------------------------------------
// A7. A record fingerprinted before key IDs existed, whose secret was
// rotated out, is refused as "other params": a succeeded charge answers
// ErrParamsMismatch and the README's advice charges it again.
//
// README, "Rotating the fingerprint secret": "a record whose secret was
// dropped is compared on its public fields only (with a warning), never
// refused". fingerprintMatch keeps that for "v2:pub:kid:hmac" (an unknown
// key ID), but a legacy "v1:pub:hmac" — what every record with a secret
// carried before key IDs — is compared with every configured secret and,
// when none made it, refused (match=false). The same call with the same
// params on the succeeded operation then gets ErrParamsMismatch ("use a
// new operation ID for a different charge"; the README's error switch
// files it under "failed: a new attempt needs a NEW OperationID"). The
// caller follows it: a second sale for the order. Controls: the same
// record with the old secret still configured, and a v2 record whose
// secret was dropped (compared on its public fields, answered).
func TestAdversarial2_LegacyFingerprintAfterRotationRefused(t *testing.T) {
	oldSecret, newSecret := []byte("old-secret-0123456789"), []byte("new-secret-0123456789")
	for _, tc := range []struct {
		name    string
		legacy  bool
		secrets [][]byte
	}{
		{"legacy-v1-record/old-secret-dropped", true, [][]byte{newSecret}},
		{"control/legacy-v1-record/old-secret-kept", true, [][]byte{newSecret, oldSecret}},
		{"control/v2-record/old-secret-dropped", false, [][]byte{newSecret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			c0 := f.client(t, WithStore(f.store), WithFingerprintSecret(oldSecret))
			p := PixParams{OfferID: "offer-basic", ExternalReference: "order-fp-legacy", Customer: goodCustomer}
			opID := "pix:order-fp-legacy"
			ch, err := c0.Payments.Pix(f.ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			rec, _ := f.store.Get(f.ctx, c0.storeID(opID))
			if tc.legacy {
				// "v2:pub:kid:hmac" as the version before key IDs wrote it.
				parts := strings.Split(rec.Fingerprint, ":")
				if len(parts) != 4 {
					t.Fatalf("fingerprint %q", rec.Fingerprint)
				}
				rec.Fingerprint = "v1:" + parts[1] + ":" + parts[3]
			}
			mem := keystore.NewMemoryWithClock(f.srv.Clock)
			if _, err := mem.Create(f.ctx, rec, "earlier-version", time.Millisecond); err != nil {
				t.Fatal(err)
			}
			c1 := f.client(t, WithStore(mem), WithFingerprintSecret(tc.secrets[0], tc.secrets[1:]...))
			_, err = c1.Payments.Pix(f.ctx, p) // the same call, the same params
			t.Logf("the same call on the succeeded operation: %v", err)
			if errors.Is(err, ErrParamsMismatch) {
				t.Errorf("SUCCEEDED OPERATION ANSWERED ErrParamsMismatch (sale %s exists): %v", ch.Sale.ID, err)
				// The advice: a new operation ID.
				q := p
				q.OperationID = "pix:order-fp-legacy-2"
				if _, err := c1.Payments.Pix(f.ctx, q); err == nil {
					t.Errorf("DOUBLE CHARGE: %d sales for order-fp-legacy", f.successful("sale"))
				}
			} else if err != nil {
				t.Errorf("the call: %v", err)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// A8. A refund recorded succeeded without its claim is taken by another
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
func TestAdversarial2_UnclaimedRefundTakenByAnotherOperation(t *testing.T) {
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
			ctxA, cancelA := context.WithTimeout(f.ctx, 100*time.Millisecond)
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

// ---------------------------------------------------------------------------
// A9. contested() compares refund amounts exactly, attribution by every
// reading: a refund of R$1000 settles on a concurrent R$10 refund.
//
// wire.Amount reads the integer 1000 as 1000 centavos *or* 1000 reais
// (100000 centavos), and attribution takes a refund as the operation's when
// any reading matches. The guard for two unsettled refunds that could own
// one effect (contested, added after the first review) asks for
// o.Amount == m.Amount. Refund "rf-big" (R$1000, 100000 centavos) is
// never processed (a gateway's 502); refund "rf-small" of the same sale
// (R$10, 1000 centavos), sent after it, commits and loses its answer. The
// next call of rf-big finds rf-small's refund — amount 1000, new since its
// snapshot, unclaimed, "matching" under the reais reading — and no
// contested operation (1000 != 100000): it claims it and SUCCEEDS. rf-small
// then finds its refund claimed, resends, gets the replay and succeeds
// too. Two refund operations succeeded, R$10 was refunded, R$1000 never
// was. The control: amounts with no common reading (R$10 and R$15).
func TestAdversarial2_ContestedIgnoresAmountReadings(t *testing.T) {
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
			f.srv.Inject(pagpolartest.Fault{Route: "refund", Key: cBig.idempotencyKey("rf-big"), Action: pagpolartest.FaultGateway, Status: 502, Times: 1})
			ctx, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
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

// ---------------------------------------------------------------------------
// A10. After a 409, a cold operation's snapshot AND the time rule are both
// dropped: an earlier operation's sale is taken for this one's.
//
// A 409 means another sender of this operation's key is at work (a second
// host deriving the same key: README's answer to "two hosts with separate
// stores"). onAmbiguous records SharedFloor (the other sender began at
// most one window before, on the API's clock), and attribution then stops
// trusting the pre-send snapshot (opFacts.shared). But compareTime returns
// early whenever a snapshot was taken, so SharedFloor is never applied on
// a cold operation: every sale under the reference with the same method
// and offer — here the order's earlier PIX, ten minutes old — is "ours".
// Host B's lookup, while host A's request is still processing, settles the
// operation SUCCEEDED on the earlier operation's sale (an expired PIX the
// customer cannot pay); host A then gets the real one. Warm hosts (no
// snapshot; time excludes by SharedFloor) settle on the real sale: the
// control.
func TestAdversarial2_SharedKeyDropsSnapshotAndTime(t *testing.T) {
	for _, cold := range []bool{true, false} {
		name := "cold-hosts"
		if !cold {
			name = "control/warm-hosts"
		}
		t.Run(name, func(t *testing.T) {
			// The server holds the key for 2 s; the clients' window matches the
			// server's (3 s) and an attempt outlasts the hold.
			pol := testPolicy()
			pol.ProcessingWindow, pol.AttemptTimeout, pol.LeaseTTL = 3*time.Second, 3*time.Second, 20*time.Second
			f := newFixture(t, []pagpolartest.Option{pagpolartest.WithProcessingWindow(3 * time.Second)}, WithRetryPolicy(pol))
			ref := "order-shared"
			earlier, err := f.c.Payments.Pix(f.ctx, PixParams{OperationID: "pix:" + ref + "-attempt-1", OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer})
			if err != nil {
				t.Fatal(err)
			}
			f.srv.Clock.Advance(10 * time.Minute)
			// Two hosts with separate stores send the operation's derived key
			// at once (a barrier right before each send).
			var ready sync.WaitGroup
			ready.Add(2)
			barrier := func(_ context.Context, e Event) {
				if e.Kind == EventSaved && e.Attempt == 1 {
					ready.Done()
					ready.Wait()
				}
			}
			hostA := f.client(t, WithHook(barrier), WithRetryPolicy(pol))
			hostB := f.client(t, WithHook(barrier), WithRetryPolicy(pol))
			if !cold {
				f.warm(t, hostA)
				f.warm(t, hostB)
			}
			f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultHold, Delay: 2 * time.Second, Times: 1})
			p := PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer}
			ids, errs := concurrently(2, func(i int) (string, error) {
				c := hostA
				if i == 1 {
					c = hostB
				}
				ch, err := c.Payments.Pix(f.ctx, p)
				if err != nil {
					return "", err
				}
				return ch.Sale.ID, nil
			})
			t.Logf("earlier operation's sale %s; host A: %q %v; host B: %q %v", earlier.Sale.ID, ids[0], errs[0], ids[1], errs[1])
			for i, c := range []*Client{hostA, hostB} {
				for _, pr := range ledgerCheck(f, c, "pix:"+ref, ids[i], errs[i]) {
					t.Errorf("host %c: %s", 'A'+i, pr)
				}
				if ids[i] == earlier.Sale.ID {
					t.Errorf("host %c settled the operation on the earlier operation's sale %s", 'A'+i, earlier.Sale.ID)
				}
			}
		})
	}
}
