package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// Second review, A2 through the inbox: with AcceptTestEvents (a staging
// receiver, or production with the Playground wired to it), a Playground
// test event reaches Config.Settle like a real one. process.go wraps the
// handler with SettleFromWebhook without looking at Event.Test, and
// SettleFromWebhook does not read the flag either (and cannot see the
// X-PagPolar-Test header at all). A test transaction naming the order's
// reference settles the unknown charge SUCCEEDED on a sale that does not
// exist; the next call answers it from the record. CONTRACT.md: "in
// production, discard test events before processing" — the SDK's own
// settling is processing.
func TestAdversarial2_InboxTestEventSettlesRealOperation(t *testing.T) {
	for _, how := range []string{"body-test-flag", "header-only"} {
		t.Run(how, func(t *testing.T) {
			clock, api, keys, client := settleClient(t)
			ctx := ctxFor(t)
			cust := settleCustomer
			if _, err := client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "warm-up", Customer: cust}); err != nil {
				t.Fatal(err)
			}
			// The charge is never processed, its lookups fail, the caller's
			// deadline ends: unknown, and no sale exists.
			api.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultDropBeforeProcessing, Times: 1})
			api.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
			p := pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "PEDIDO-1234", Customer: cust}
			cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
			_, err := client.Payments.Pix(cctx, p)
			cancel()
			if !errors.Is(err, pagpolar.ErrOutcomeUnknown) {
				t.Fatalf("charge: %v, want unknown", err)
			}
			api.ClearFaults()
			clock.Advance(5 * time.Second)

			r := newHarness(t, nil, clock, func(c *webhook.Config) { c.Settle = client; c.AcceptTestEvents = true }).start()
			now := clock.Now().UTC()
			env := map[string]any{
				"id": "evt_playground_1", "creation_date": now.Format(time.RFC3339), "event": wire.EventTransactionPaid,
				"data": map[string]any{"transaction": map[string]any{
					"id": "sale_playground_0001", "identifier": "sale_playground_0001", "status": "paid",
					"external_reference": "PEDIDO-1234", "payment_method": "pix", "offer_identifier": "offer-basic",
					"amount": 9990, "created_at": now.Format(time.RFC3339Nano),
				}},
			}
			var hdr []string
			if how == "body-test-flag" {
				env["test"] = true
			} else {
				hdr = []string{wire.HeaderTestEvent, "true"}
			}
			body, _ := json.Marshal(env)
			if w := r.post(body, hdr...); w.Code != 200 {
				t.Fatalf("delivery answered %d", w.Code)
			}
			r.waitOutcome("test:"+wire.EventTransactionPaid+":sale_playground_0001", webhook.StateProcessed)
			rec, err := keys.Get(ctx, pagpolar.RecordID(api.CredentialID, "pix:PEDIDO-1234"))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the charge's record after the test event: %s %q", rec.State, rec.ResultRef)
			if rec.State == keystore.StateSucceeded {
				t.Errorf("SUCCEEDED WITHOUT EFFECT: a Playground test event settled the real charge on sale %q; sales in the ledger under the reference: %d",
					rec.ResultRef, salesUnderRef(api, "PEDIDO-1234"))
			}
		})
	}
}

func salesUnderRef(api *pagpolartest.Server, ref string) int {
	n := 0
	for _, s := range api.Ledger().Sales {
		if s.ExternalReference == ref {
			n++
		}
	}
	return n
}
