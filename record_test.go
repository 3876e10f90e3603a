package pagpolar

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestSettledRecordsAreLean: a succeeded or failed
// record keeps in its meta only what identifies the operation, never what
// its attempts learned (snapshot, clock bounds, trust moments), and no
// record stores a zero time ("0001-01-01").
func TestSettledRecordsAreLean(t *testing.T) {
	f := newFixture(t, nil)
	f.warm(t, f.c)
	// One settled by the answer, one by a lookup after a lost answer, one
	// refused; and one left unknown, which keeps its bookkeeping.
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "lean-ok", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "lean-lookup", Customer: goodCustomer}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "no-such-offer", ExternalReference: "lean-failed", Customer: goodCustomer}); err == nil {
		t.Fatal("an unknown offer succeeded")
	}
	for _, op := range []string{"pix:lean-ok", "pix:lean-lookup", "pix:lean-failed"} {
		rec, err := f.store.Get(f.ctx, RecordID(f.srv.CredentialID, op))
		if err != nil {
			t.Fatal(err)
		}
		if !rec.State.Settled() {
			t.Fatalf("%s: state %s, want settled", op, rec.State)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(rec.Meta, &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			switch k {
			case "path", "external_reference", "offer_id", "method", "amount", "sale_id", "subscription_id":
			default:
				t.Errorf("%s (%s): meta keeps %q: %s", op, rec.State, k, rec.Meta)
			}
		}
		if bytes.Contains(rec.Meta, []byte("0001-01-01")) || bytes.Contains(rec.Result, []byte("0001-01-01")) {
			t.Errorf("%s: a zero time is stored: %s %s", op, rec.Meta, rec.Result)
		}
	}

	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	ctx, cancel := context.WithTimeout(f.ctx, testWindow/2)
	_, err := f.c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "lean-unknown", Customer: goodCustomer})
	cancel()
	f.srv.ClearFaults()
	rec, gerr := f.store.Get(f.ctx, RecordID(f.srv.CredentialID, "pix:lean-unknown"))
	if gerr != nil || rec.State != keystore.StateUnknown {
		t.Fatalf("unknown case: %v, %v, state %s", err, gerr, rec.State)
	}
	var m opMeta
	if err := json.Unmarshal(rec.Meta, &m); err != nil || m.TrustAfter.IsZero() || m.Floor.IsZero() {
		t.Fatalf("an unsettled record lost its bookkeeping: %v %s", err, rec.Meta)
	}
	if bytes.Contains(rec.Meta, []byte("0001-01-01")) {
		t.Errorf("unknown record stores a zero time: %s", rec.Meta)
	}
}
