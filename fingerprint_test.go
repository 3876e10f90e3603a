// Params fingerprints across secret rotation and against an unsettled
// operation.

package pagpolar

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// A record fingerprinted before key IDs existed, whose secret was
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
func TestFingerprint_LegacyFormWithRotatedSecretIsComparedOnPublicFields(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
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
	// Settled, the same mismatch is a definite ErrParamsMismatch.
	f.srv.ClearFaults()
	p.Customer.Email = goodCustomer.Email
	if _, err := f.c.Payments.Pix(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Customer.Email = "corrected@exemplo.com"
	if _, err := f.c.Payments.Pix(f.ctx, p); !errors.Is(err, ErrParamsMismatch) || isUnknown(err) {
		t.Fatalf("settled + other params: %v, want ErrParamsMismatch", err)
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
	ctx, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
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
