// Record identity: a credential's records are its own, in one form.

package pagpolar

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// Credential "acme"'s ResumeAll picked up "acme/eu"'s operations (by the
// prefix "acme/") and settled them with the wrong token as not executed:
// the next call charged twice.
func TestRecordIdentity_CredentialPrefixesDoNotCollide(t *testing.T) {
	f := newFixture(t, nil)
	eu := f.srv.AddToken("acme/eu")
	cEU, err := NewClient("acme/eu", StaticToken(eu), WithBaseURL(f.srv.URL), WithStore(f.store), WithClock(f.srv.Clock), WithRetryPolicy(testPolicy()), WithLogger(quiet), WithHook(endAtAnswerHook))
	if err != nil {
		t.Fatal(err)
	}
	f.warm(t, cEU)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	ctx, cancel := endAtAnswer(f.ctx)
	defer cancel()
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-eu", Customer: goodCustomer}
	if _, err := cEU.Payments.Pix(ctx, p); !isUnknown(err) {
		t.Fatalf("acme/eu: %v", err)
	}
	f.srv.ClearFaults()
	f.srv.Clock.Advance(time.Second)
	acme := f.srv.AddToken("acme")
	cAcme, err := NewClient("acme", StaticToken(acme), WithBaseURL(f.srv.URL), WithStore(f.store), WithClock(f.srv.Clock), WithRetryPolicy(testPolicy()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cAcme.ResumeAll(f.ctx)
	if err != nil || len(rs) != 0 {
		t.Fatalf("acme's ResumeAll touched %+v (%v), want nothing of acme/eu's", rs, err)
	}
	if _, err := cEU.Payments.Pix(f.ctx, p); err != nil {
		t.Fatal(err)
	}
	if f.successful("sale") != 1 {
		t.Fatalf("%d sales, want 1", f.successful("sale"))
	}
	if RecordID("acme/eu", "pix:x") == RecordID("acme", "eu/pix:x") {
		t.Fatal("two credentials' IDs collide")
	}
	if c, o, ok := SplitRecordID(RecordID("a%b/c", "op/1")); !ok || c != "a%b/c" || o != "op/1" {
		t.Fatalf("SplitRecordID round trip: %q %q %v", c, o, ok)
	}
}

// One record-ID form: a record under this credential's prefix whose key
// is not this credential's (another credential's record written in the
// unescaped form) is refused by Resume and ResumeAll, never settled, with
// derived and with random keys alike.
func TestRecordIdentity_OneFormOtherCredentialsRecordsRefused(t *testing.T) {
	for _, random := range []bool{false, true} {
		name := "derived keys"
		if random {
			name = "random keys"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, nil)
			tok := f.srv.AddToken("acme")
			opts := []Option{WithBaseURL(f.srv.URL), WithStore(f.store), WithClock(f.srv.Clock), WithRetryPolicy(testPolicy()), WithLogger(quiet)}
			if random {
				opts = append(opts, WithRandomKeys())
			}
			acme, err := NewClient("acme", StaticToken(tok), opts...)
			if err != nil {
				t.Fatal(err)
			}
			// A record of credential "acme/eu" under the unescaped form
			// "acme/eu/order-9": under acme's prefix it reads as acme's
			// operation "eu/order-9", but its key is not acme's.
			other := keystore.Record{OperationID: "acme/eu/order-9", Key: uuid.NewString(), Kind: kindPix, State: keystore.StateUnknown,
				Attempts: 1, Meta: mustJSON(opMeta{Path: "/payments/pix", ExternalReference: "order-9", OfferID: "offer-basic", Method: "pix"})}
			if _, err := f.store.Create(f.ctx, other, "x", time.Millisecond); err != nil {
				t.Fatal(err)
			}
			res, err := acme.ResumeAll(f.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != 1 || !errors.Is(res[0].Err, ErrForeignRecord) {
				t.Fatalf("ResumeAll: %+v, want the other credential's record reported as foreign", res)
			}
			if _, err := acme.Resume(f.ctx, "eu/order-9"); !errors.Is(err, ErrForeignRecord) {
				t.Fatalf("Resume: %v, want ErrForeignRecord", err)
			}
			if got, _ := f.store.Get(f.ctx, "acme/eu/order-9"); got.State != keystore.StateUnknown {
				t.Fatalf("the other credential's record was settled %s", got.State)
			}
			// acme's own operations, in the one form, still work.
			if _, err := acme.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-own", Customer: goodCustomer}); err != nil {
				t.Fatal(err)
			}
			if r, err := acme.Resume(f.ctx, "pix:order-own"); err != nil || r.State != keystore.StateSucceeded {
				t.Fatalf("Resume of acme's own record: %+v %v", r, err)
			}
		})
	}
}
