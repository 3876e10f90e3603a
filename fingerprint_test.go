// Params fingerprints across secret rotation and against an unsettled
// operation.

package pagpolar

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestFingerprint_OtherFormIsRefusedAsForeign: a record whose fingerprint
// has a form this SDK does not write (here "v1:<public>:<hmac>", which no
// released version wrote) is refused as foreign, nothing sent, the record
// left as it is — never answered ErrParamsMismatch, whose advice (a new
// operation ID) would charge the order again. Control: a v2 record whose
// secret was rotated out is compared on its public fields and answered.
func TestFingerprint_OtherFormIsRefusedAsForeign(t *testing.T) {
	oldSecret, newSecret := []byte("old-secret-0123456789"), []byte("new-secret-0123456789")
	for _, tc := range []struct {
		name  string
		other bool
	}{
		{"v1-with-hmac", true},
		{"control/v2-record/old-secret-dropped", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			c0 := f.client(t, WithStore(f.store), WithFingerprintSecret(oldSecret))
			p := PixParams{OfferID: "offer-basic", ExternalReference: "order-fp-form", Customer: goodCustomer}
			opID := "pix:order-fp-form"
			ch, err := c0.Payments.Pix(f.ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			rec, _ := f.store.Get(f.ctx, c0.storeID(opID))
			if tc.other {
				parts := strings.Split(rec.Fingerprint, ":")
				if len(parts) != 4 {
					t.Fatalf("fingerprint %q", rec.Fingerprint)
				}
				rec.Fingerprint = "v1:" + parts[1] + ":" + parts[3]
			}
			mem := keystore.NewMemoryWithClock(f.srv.Clock)
			if _, err := mem.Create(f.ctx, rec, "another-writer", time.Millisecond); err != nil {
				t.Fatal(err)
			}
			c1 := f.client(t, WithStore(mem), WithFingerprintSecret(newSecret))
			posts := f.posts("pix")
			_, err = c1.Payments.Pix(f.ctx, p) // the same call, the same params
			switch {
			case tc.other && !errors.Is(err, ErrForeignRecord):
				t.Fatalf("record of another fingerprint form: %v, want ErrForeignRecord", err)
			case tc.other && errors.Is(err, ErrParamsMismatch):
				t.Fatalf("answered ErrParamsMismatch (sale %s exists): %v", ch.Sale.ID, err)
			case !tc.other && err != nil:
				t.Fatalf("v2 record with a rotated secret: %v", err)
			}
			if n := f.posts("pix"); n != posts {
				t.Fatalf("%d POSTs sent for a record already settled", n-posts)
			}
			if got, _ := mem.Get(f.ctx, rec.OperationID); tc.other && got.Fingerprint != rec.Fingerprint {
				t.Fatalf("the refused record was rewritten: %q", got.Fingerprint)
			}
			if f.successful("sale") != 1 {
				t.Fatalf("%d sales for one order", f.successful("sale"))
			}
		})
	}
}

// An unsettled operation called again with changed params answered
// ErrParamsMismatch ("use a new operation ID"), which a caller reads as a
// definite answer: following the advice charges twice.
func TestParamsMismatch_UnsettledOperationIsUnknown(t *testing.T) {
	f := newFixture(t, nil)
	f.c = f.client(t, WithStore(f.store), WithFingerprintSecret([]byte("a-secret-of-16-bytes+"))) // the customer is fingerprinted
	f.warm(t, f.c)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-adv", Customer: goodCustomer}
	ctx, cancel := endAtAnswer(f.ctx)
	defer cancel()
	if _, err := f.c.Payments.Pix(ctx, p); !isUnknown(err) {
		t.Fatalf("first call: %v", err)
	}
	p.Customer.Email = "corrected@exemplo.com" // the caller fixed a typo
	_, err := f.c.Payments.Pix(f.ctx, p)
	if !isUnknown(err) || errors.Is(err, ErrParamsMismatch) {
		t.Fatalf("unsettled + other params: %v; want ErrOutcomeUnknown and not ErrParamsMismatch", err)
	}
	for _, want := range []string{"Settle it first", "never use a new operation ID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the advice lacks %q: %v", want, err)
		}
	}
	// Succeeded, the same mismatch is a definite ErrParamsMismatch that
	// says the order is charged. Its branch is unknown, never not
	// executed: the effect exists, and a checkout that read "not
	// executed" would tell the buyer to pay again another way.
	f.srv.ClearFaults()
	p.Customer.Email = goodCustomer.Email
	if _, err := f.c.Payments.Pix(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Customer.Email = "corrected@exemplo.com"
	_, err = f.c.Payments.Pix(f.ctx, p)
	if !errors.Is(err, ErrParamsMismatch) || OutcomeOf(err) != OutcomeUnknown || errors.Is(err, ErrNotExecuted) || !strings.Contains(err.Error(), "the order is charged") {
		t.Fatalf("succeeded + other params: %v (%s), want ErrParamsMismatch, unknown, saying the order is charged", err, OutcomeOf(err))
	}
}

// A not_executed record is settled but not over: a call with its recorded
// params sends it, and a worker that stalled past its lease may take it
// back and send. A call with other params on it is therefore unknown
// (ErrParamsMismatch, never not executed), whoever holds the lease; and
// the recorded params' call then charges once. Unknown without
// ErrParamsMismatch, as for any unsettled record: that sentinel's advice (a
// new operation ID) would charge twice.
func TestParamsMismatch_NotExecutedRecordIsUnknown(t *testing.T) {
	f := newFixture(t, nil)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultRateLimit, Times: 100})
	p := PixParams{OperationID: "pix:order-ne", OfferID: "offer-basic", ExternalReference: "order-ne", Customer: goodCustomer}
	if _, err := f.c.Payments.Pix(f.ctx, p); OutcomeOf(err) != OutcomeNotExecuted {
		t.Fatalf("first call: %v, want not executed", err)
	}
	f.srv.ClearFaults()
	other := p
	other.OfferID = "offer-premium"
	id := f.c.storeID(p.OperationID)
	held, err := f.store.Acquire(f.ctx, id, "another-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		_, err := f.c.Payments.Pix(f.ctx, other)
		if OutcomeOf(err) != OutcomeUnknown || errors.Is(err, ErrParamsMismatch) || errors.Is(err, ErrNotExecuted) {
			t.Fatalf("%s + other params: %v (%s), want unknown, not ErrParamsMismatch", when, err, OutcomeOf(err))
		}
	}
	check("leased elsewhere")
	if err := f.store.Release(f.ctx, id, held.LeaseToken); err != nil {
		t.Fatal(err)
	}
	check("free")
	if n := f.posts("pix"); n != 6 {
		t.Errorf("%d POSTs, want the first call's 6 and none for other params", n)
	}
	if _, err := f.c.Payments.Pix(f.ctx, p); err != nil {
		t.Fatalf("the recorded params' call: %v", err)
	}
	if n := f.successful("sale"); n != 1 {
		t.Fatalf("%d sales, want the recorded params' one", n)
	}
}

// Rotating the fingerprint secret turned every recorded operation,
// succeeded ones included, into a params mismatch.
func TestFingerprint_SecretRotationKeepsRecordsMatching(t *testing.T) {
	f := newFixture(t, nil)
	oldSecret, newSecret := []byte("old-secret-0123456789"), []byte("new-secret-0123456789")
	c1 := f.client(t, WithStore(f.store), WithFingerprintSecret(oldSecret))
	done := PixParams{OfferID: "offer-basic", ExternalReference: "order-rot-1", Customer: goodCustomer}
	if _, err := c1.Payments.Pix(f.ctx, done); err != nil {
		t.Fatal(err)
	}
	// An operation left unknown under the old secret.
	f.warm(t, c1)
	open := PixParams{OfferID: "offer-basic", ExternalReference: "order-rot-2", Customer: goodCustomer}
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	ctx, cancel := endAtAnswer(f.ctx)
	defer cancel()
	if _, err := c1.Payments.Pix(ctx, open); !isUnknown(err) {
		t.Fatalf("open op: %v", err)
	}
	f.srv.ClearFaults()

	c2 := f.client(t, WithStore(f.store), WithFingerprintSecret(newSecret, oldSecret))
	if ch, err := c2.Payments.Pix(f.ctx, done); err != nil || ch.Operation.Source != SourceLocalRecord {
		t.Fatalf("settled op after rotation: %v", err)
	}
	if _, err := c2.Payments.Pix(f.ctx, open); err != nil {
		t.Fatalf("unsettled op after rotation: %v", err)
	}
	rec := mustState(t, f, c2, "pix:order-rot-2", keystore.StateSucceeded)
	if !strings.Contains(rec.Fingerprint, newFPSecret(newSecret).id) {
		t.Errorf("the record written after the rotation keeps fingerprint %q, want the new key ID", rec.Fingerprint)
	}
	// Other private params are still caught, under either secret.
	other := done
	other.Customer.Document = "11.222.333/0001-81"
	if _, err := c2.Payments.Pix(f.ctx, other); !errors.Is(err, ErrParamsMismatch) {
		t.Fatalf("another customer under the old record: %v, want ErrParamsMismatch", err)
	}
	if f.successful("sale") != 2 {
		t.Fatalf("%d sales, want 2", f.successful("sale"))
	}
}
