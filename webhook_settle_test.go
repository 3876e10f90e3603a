package pagpolar

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

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
	ctx, cancel := contextWithTimeout(f, 100e6)
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

// Issue 14, item 6: the API's error message is stored, scrubbed of the
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
