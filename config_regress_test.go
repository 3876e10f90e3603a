// Regression tests for "identity, configuration and advice that cannot lead
// a caller into a second charge": each failed before its fix.

package pagpolar

import (
	"context"
	"errors"
	"github.com/google/uuid"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// 1. An unsettled operation called again with changed params answered
// ErrParamsMismatch ("use a new operation ID"), which a caller reads as a
// definite answer: following the advice charges twice.
func TestAdvice_UnsettledWithOtherParamsIsUnknown(t *testing.T) {
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

// 2. Rotating the fingerprint secret turned every recorded operation,
// succeeded ones included, into a params mismatch.
func TestFingerprintSecretRotation(t *testing.T) {
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

// 3. Credential "acme"'s ResumeAll picked up "acme/eu"'s operations (by the
// prefix "acme/") and settled them with the wrong token as not executed:
// the next call charged twice.
func TestRecordIdentity_CredentialPrefixesDoNotCollide(t *testing.T) {
	f := newFixture(t, nil)
	eu := f.srv.AddToken("acme/eu")
	cEU, err := NewClient("acme/eu", StaticToken(eu), WithBaseURL(f.srv.URL), WithStore(f.store), WithClock(f.srv.Clock), WithRetryPolicy(testPolicy()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	f.warm(t, cEU)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	f.srv.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
	ctx, cancel := context.WithTimeout(f.ctx, 100*time.Millisecond)
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

// 3b. One record-ID form: a record under this credential's prefix whose key
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

// 4. Invalid UTF-8 passed validation (sent as U+FFFD, looked up by its raw
// bytes: never found, charged twice), and a 255-byte reference gave a
// derived operation ID that Resume refused.
func TestIdentifiers_InvalidUTF8AndDerivedLength(t *testing.T) {
	f := newFixture(t, nil)
	for _, ref := range []string{"order-\xff", "order-\x00", "order-\u00a0x"} {
		_, err := f.c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: ref, Customer: goodCustomer})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "ExternalReference" {
			t.Errorf("reference %q: %v, want a ValidationError naming ExternalReference", ref, err)
		}
	}
	long := strings.Repeat("r", maxReference)
	if _, err := f.c.Payments.CreditCard(f.ctx, CreditCardParams{OfferID: "offer-basic", ExternalReference: long, Customer: goodCustomer, CardToken: "tok_ok"}); err != nil {
		t.Fatal(err)
	}
	if r, err := f.c.Resume(f.ctx, "credit_card:"+long); err != nil || r.State != keystore.StateSucceeded {
		t.Fatalf("the longest derived operation ID cannot be resumed: %+v %v", r, err)
	}
	if f.posts("pix") != 0 {
		t.Fatal("an invalid identifier was sent")
	}
}

// 5. A definite answer (404) whose "failed" could not be written left the
// record pending: a later call sent again and charged.
func TestDefiniteAnswerNotRecorded(t *testing.T) {
	f := newFixture(t, nil)
	st := &failingUpdateStore{Memory: keystore.NewMemoryWithClock(f.srv.Clock)}
	c := f.client(t, WithStore(st))
	f.warm(t, c)
	p := PixParams{OfferID: "no-such-offer", ExternalReference: "order-unrec", Customer: goodCustomer}
	st.failing.Store(true)
	_, err := c.Payments.Pix(f.ctx, p)
	if !errors.Is(err, ErrNotRecorded) || !errors.Is(err, ErrNotFound) {
		t.Fatalf("want the API's 404 and ErrNotRecorded, got %v", err)
	}
	st.failing.Store(false)
	f.srv.AddOffer(pagpolartest.Offer{ID: "no-such-offer", Amount: 100}) // the condition went away
	_, err = c.Payments.Pix(f.ctx, p)
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("the later call: %v, want the same recorded failure", err)
	}
	if f.successful("sale") != 0 || f.posts("pix") != 1 {
		t.Fatalf("%d sales, %d POSTs: the known failure was turned into a charge", f.successful("sale"), f.posts("pix"))
	}
	mustStateIn(t, st.Memory, c, "pix:order-unrec", keystore.StateFailed)
}

type failingUpdateStore struct {
	*keystore.Memory
	failing atomic.Bool
}

func (s *failingUpdateStore) Update(ctx context.Context, r keystore.Record) (keystore.Record, error) {
	if s.failing.Load() && r.State.Settled() {
		return keystore.Record{}, keystore.ErrUnavailable
	}
	return s.Memory.Update(ctx, r)
}

func mustStateIn(t *testing.T, st *keystore.Memory, c *Client, opID string, want keystore.State) {
	t.Helper()
	rec, err := st.Get(context.Background(), c.storeID(opID))
	if err != nil || rec.State != want {
		t.Fatalf("record %s: %s %v, want %s", opID, rec.State, err, want)
	}
}

// 6. A base URL without /v1 got the router's 404, stored as failed for
// good; StaticToken("") was accepted.
func TestMisconfiguration_RouterNotFoundIsNotExecuted(t *testing.T) {
	f := newFixture(t, nil)
	wrong := f.client(t, WithStore(f.store), WithBaseURL(strings.TrimSuffix(f.srv.URL, "/v1")))
	warmClock(f, wrong) // a validated view of the API's clock: no snapshot first
	p := PixParams{OfferID: "offer-basic", ExternalReference: "order-conf", Customer: goodCustomer}
	_, err := wrong.Payments.Pix(f.ctx, p)
	if err == nil || !strings.Contains(err.Error(), "base URL") {
		t.Fatalf("wrong base URL: %v, want an error naming the probable misconfiguration", err)
	}
	mustState(t, f, wrong, "pix:order-conf", keystore.StateNotExecuted)
	ch, err := f.c.Payments.Pix(f.ctx, p) // the URL fixed
	if err != nil || ch.Operation.Source != SourceResponse {
		t.Fatalf("after fixing the URL: %v", err)
	}
	if _, err := NewClient("c", StaticToken(""), WithStore(keystore.NewMemory())); !errors.Is(err, ErrValidation) {
		t.Fatalf("StaticToken(\"\"): %v, want a ValidationError", err)
	}
}

// 7. NewClient without WithStore quietly kept keys in memory.
func TestNoSilentInMemoryStore(t *testing.T) {
	_, err := NewClient("c", StaticToken("t"))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "WithStore" || !strings.Contains(err.Error(), "keystore.NewMemory()") {
		t.Fatalf("NewClient without a store: %v", err)
	}
	if _, err := NewClient("c", StaticToken("t"), WithStore(keystore.NewMemory())); err != nil {
		t.Fatal(err)
	}
}

// 8. An accepted policy under which one 429 with a long Retry-After (and a
// slow token source) made a call lose its own lease: ErrLeaseLost,
// "another worker took over", with no other worker.
func TestLease_LongWaitsKeepTheLease(t *testing.T) {
	pol := testPolicy()
	pol.AttemptTimeout, pol.MaxRetryAfter, pol.LeaseTTL = 400*time.Millisecond, time.Second, 1900*time.Millisecond
	var slow atomic.Bool
	// Every answer takes most of an attempt, and so does the token source.
	f := newFixture(t, []pagpolartest.Option{pagpolartest.WithLatency(350 * time.Millisecond)})
	c, err := NewClient(f.srv.CredentialID, TokenFunc(func(ctx context.Context) (string, error) {
		if slow.Load() {
			select {
			case <-time.After(350 * time.Millisecond):
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return f.srv.Token, nil
	}), WithBaseURL(f.srv.URL), WithStore(f.store), WithRetryPolicy(pol), WithLogger(quiet))
	if err != nil {
		t.Fatalf("the policy is valid: %v", err)
	}
	warmClock(f, c)
	slow.Store(true)
	f.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultRateLimit, Delay: time.Minute, Times: 1})
	if _, err := c.Payments.Pix(f.ctx, PixParams{OfferID: "offer-basic", ExternalReference: "order-lease", Customer: goodCustomer}); err != nil {
		t.Fatalf("%v (lease lost: %v)", err, errors.Is(err, ErrLeaseLost))
	}
	// A policy whose lease cannot outlast a wait and an attempt is refused.
	pol.LeaseTTL = time.Second
	if _, err := NewClient("c", StaticToken("t"), WithStore(keystore.NewMemory()), WithRetryPolicy(pol)); !errors.Is(err, ErrValidation) {
		t.Fatalf("short lease accepted: %v", err)
	}
}

// 9. Redaction replaced every occurrence of a short token, inside words:
// with the token "t", errors read `Pos[redacted] "h[redacted][redacted]p://`.
func TestRedaction_OnlyWholeValues(t *testing.T) {
	for _, c := range []struct{ in, tok, want string }{
		{`Post "http://x/v1": Bearer t`, "t", `Post "http://x/v1": Bearer [redacted]`},
		{`token=abc123&x=1`, "abc123", `token=[redacted]&x=1`},
		{`xabc123 abc123y`, "abc123", `xabc123 abc123y`},
		{`"abc123"`, "abc123", `"[redacted]"`},
	} {
		if got := redactToken(c.in, c.tok); got != c.want {
			t.Errorf("redactToken(%q, %q) = %q, want %q", c.in, c.tok, got, c.want)
		}
	}
	f := newFixture(t, nil)
	bad, err := NewClient(f.srv.CredentialID, StaticToken("t"), WithBaseURL(f.srv.URL), WithStore(keystore.NewMemory()), WithRetryPolicy(testPolicy()), WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Payments.GetSale(f.ctx, "sale_x")
	if err == nil || strings.Contains(err.Error(), "[redacted]") && strings.Contains(err.Error(), "h[redacted]") {
		t.Fatalf("%v", err)
	}
}

// warmClock is warm without a request: a Date of the fake's clock, and the
// view validated.
func warmClock(f *fixture, c *Client) {
	now := c.clock.Now()
	c.srvClock.observe(http.Header{"Date": {f.srv.Clock.Now().UTC().Format(http.TimeFormat)}}, now, now, 0)
	c.srvClock.mu.Lock()
	c.srvClock.validated = true
	c.srvClock.mu.Unlock()
}
