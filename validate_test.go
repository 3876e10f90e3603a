package pagpolar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// countingServer counts every request and answers 500, so a test that
// expects no request fails loudly if one is made.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

var goodCustomer = Customer{Name: "Maria Silva", Email: "maria@example.com", Document: "123.456.789-09", Phone: "+55 11 91234-5678"}

func TestInvalidParamsMakeNoRequestAndNoStoreWrite(t *testing.T) {
	srv, hits := countingServer(t)
	store := keystore.NewMemory()
	c, err := NewClient("cred", StaticToken("tok"), WithBaseURL(srv.URL+"/v1"), WithStore(store))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cust := func(f func(*Customer)) Customer { c := goodCustomer; f(&c); return c }
	cases := []struct {
		field string
		call  func() error
	}{
		{"OfferID", func() error {
			_, err := c.Payments.Pix(ctx, PixParams{ExternalReference: "o1", Customer: goodCustomer})
			return err
		}},
		{"ExternalReference", func() error {
			_, err := c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", Customer: goodCustomer})
			return err
		}},
		{"ExternalReference", func() error {
			_, err := c.Payments.Pix(ctx, PixParams{OfferID: "offer-basic", ExternalReference: "has space", Customer: goodCustomer})
			return err
		}},
		{"Customer.Name", func() error {
			_, err := c.Payments.Pix(ctx, PixParams{OfferID: "o", ExternalReference: "r", Customer: cust(func(c *Customer) { c.Name = "" })})
			return err
		}},
		{"Customer.Email", func() error {
			_, err := c.Payments.Boleto(ctx, BoletoParams{OfferID: "o", ExternalReference: "r", Customer: cust(func(c *Customer) { c.Email = "maria.example.com" })})
			return err
		}},
		{"Customer.Document", func() error {
			_, err := c.Payments.Pix(ctx, PixParams{OfferID: "o", ExternalReference: "r", Customer: cust(func(c *Customer) { c.Document = "123" })})
			return err
		}},
		{"Customer.Phone", func() error {
			_, err := c.Payments.Pix(ctx, PixParams{OfferID: "o", ExternalReference: "r", Customer: cust(func(c *Customer) { c.Phone = "12" })})
			return err
		}},
		{"CardToken", func() error {
			_, err := c.Payments.CreditCard(ctx, CreditCardParams{OfferID: "o", ExternalReference: "r", Customer: goodCustomer})
			return err
		}},
		{"CardToken", func() error {
			_, err := c.Payments.CreditCard(ctx, CreditCardParams{OfferID: "o", ExternalReference: "r", Customer: goodCustomer, CardToken: "4111 1111 1111 1111"})
			return err
		}},
		{"Installments", func() error {
			_, err := c.Payments.CreditCard(ctx, CreditCardParams{OfferID: "o", ExternalReference: "r", Customer: goodCustomer, CardToken: "tok_ok", Installments: 13})
			return err
		}},
		{"OperationID", func() error { _, err := c.Refunds.Create(ctx, RefundParams{SaleID: "sale_1", Amount: 100}); return err }},
		{"Amount", func() error {
			_, err := c.Refunds.Create(ctx, RefundParams{OperationID: "rf-1", SaleID: "sale_1"})
			return err
		}},
		{"SaleID", func() error {
			_, err := c.Refunds.Create(ctx, RefundParams{OperationID: "rf-1", Amount: 1})
			return err
		}},
		{"PaymentMethod", func() error {
			_, err := c.Subscriptions.Subscribe(ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "s1", Customer: goodCustomer, PaymentMethod: "cash"})
			return err
		}},
		{"CardToken", func() error {
			_, err := c.Subscriptions.Subscribe(ctx, SubscribeParams{OfferID: "plan-basic", ExternalReference: "s1", Customer: goodCustomer, PaymentMethod: "credit_card"})
			return err
		}},
		{"OperationID", func() error {
			_, err := c.Subscriptions.ChangePlan(ctx, ChangePlanParams{SubscriptionID: "sub_1", NewOfferID: "plan-pro"})
			return err
		}},
		{"NewOfferID", func() error {
			_, err := c.Subscriptions.ChangePlan(ctx, ChangePlanParams{OperationID: "pc-1", SubscriptionID: "sub_1"})
			return err
		}},
	}
	for i, tc := range cases {
		t.Run(fmt.Sprintf("%d_%s", i, tc.field), func(t *testing.T) {
			err := tc.call()
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, ErrValidation) {
				t.Fatalf("want a ValidationError naming %s, got %v", tc.field, err)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("invalid params made %d requests", n)
	}
	recs, err := store.List(ctx, keystore.Filter{})
	if err != nil || len(recs) != 0 {
		t.Fatalf("invalid params wrote %d records (err %v)", len(recs), err)
	}
}

// failingStore refuses every call, like a database that went away.
type failingStore struct{ keystore.Store }

func (failingStore) Create(context.Context, keystore.Record, string, time.Duration) (keystore.Record, error) {
	return keystore.Record{}, fmt.Errorf("%w: connection refused", keystore.ErrUnavailable)
}

func TestSafetyRule1_NoStoreNoSend(t *testing.T) {
	srv, hits := countingServer(t)
	c, err := NewClient("cred", StaticToken("tok"), WithBaseURL(srv.URL+"/v1"), WithStore(failingStore{keystore.NewMemory()}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Payments.Pix(context.Background(), PixParams{OfferID: "offer-basic", ExternalReference: "order-1", Customer: goodCustomer})
	if !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("want ErrStoreUnavailable, got %v", err)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("a failing store still let %d requests through", n)
	}
}

func TestNewClientValidation(t *testing.T) {
	if _, err := NewClient("", StaticToken("t")); !errors.Is(err, ErrValidation) {
		t.Fatalf("empty credential ID: %v", err)
	}
	if _, err := NewClient("c", nil); !errors.Is(err, ErrValidation) {
		t.Fatalf("nil token source: %v", err)
	}
	if _, err := NewClient("c", StaticToken("t"), WithBaseURL("not a url")); err == nil {
		t.Fatal("bad base URL accepted")
	}
	if _, err := NewClient("c", StaticToken("t"), WithFingerprintSecret([]byte("short"))); err == nil {
		t.Fatal("short fingerprint secret accepted")
	}
	// The defaults, and any policy that leaves LeaseTTL to them, are valid.
	for _, p := range []RetryPolicy{{}, DefaultRetryPolicy, {MaxAttempts: 3}, {ProcessingWindow: 5 * time.Second}, {AttemptTimeout: time.Minute}} {
		if _, err := NewClient("c", StaticToken("t"), WithStore(keystore.NewMemory()), WithRetryPolicy(p)); err != nil {
			t.Fatalf("WithRetryPolicy(%+v): %v", p, err)
		}
	}
	if _, err := NewClient("c", StaticToken("t"), WithStore(keystore.NewMemory()), WithRetryPolicy(RetryPolicy{AttemptTimeout: time.Minute, LeaseTTL: time.Minute})); !errors.Is(err, ErrValidation) {
		t.Fatalf("a lease no longer than an attempt was accepted: %v", err)
	}
}

func TestDerivedKeysAreStableAndScopedByCredential(t *testing.T) {
	a, _ := NewClient("cred-a", StaticToken("t1"), WithStore(keystore.NewMemory()))
	a2, _ := NewClient("cred-a", StaticToken("t2-rotated"), WithStore(keystore.NewMemory()))
	b, _ := NewClient("cred-b", StaticToken("t1"), WithStore(keystore.NewMemory()))
	if a.idempotencyKey("pix:o1") != a2.idempotencyKey("pix:o1") {
		t.Fatal("key changed with the token; it must depend on the credential ID only")
	}
	if a.idempotencyKey("pix:o1") == b.idempotencyKey("pix:o1") {
		t.Fatal("two credentials derived the same key")
	}
	if a.idempotencyKey("pix:o1") == a.idempotencyKey("pix:o2") {
		t.Fatal("two operations derived the same key")
	}
	r, _ := NewClient("cred-a", StaticToken("t"), WithRandomKeys(), WithStore(keystore.NewMemory()))
	if k1, k2 := r.idempotencyKey("pix:o1"), r.idempotencyKey("pix:o1"); k1 == k2 {
		t.Fatal("random keys repeated")
	}
}

// TestCustomerAsInTheDocsExample: the API's own PIX example sends
// "document": "" and "phone": ""; the SDK accepts that customer, sends both
// members, and the fake (as strict as the documented request) creates the
// sale. A document that is given must still be a CPF or CNPJ.
func TestCustomerAsInTheDocsExample(t *testing.T) {
	srv := pagpolartest.NewServer(t)
	c, err := NewClient(srv.CredentialID, StaticToken(srv.Token), WithBaseURL(srv.URL), WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Payments.Pix(context.Background(), PixParams{OfferID: "offer-basic", ExternalReference: "PEDIDO-1234",
		Customer: Customer{Name: "Maria Silva", Email: "cliente@exemplo.com", Document: "", Phone: ""}})
	if err != nil {
		t.Fatalf("the docs' example customer: %v", err)
	}
	if ch.Sale.ID == "" {
		t.Fatal("no sale")
	}
	for _, doc := range []string{"123", " ", "abc.def.ghi-jk"} {
		_, err := c.Payments.Pix(context.Background(), PixParams{OfferID: "offer-basic", ExternalReference: "PEDIDO-1235",
			Customer: Customer{Name: "Maria Silva", Email: "cliente@exemplo.com", Document: doc}})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "Customer.Document" {
			t.Errorf("document %q: %v, want a ValidationError naming Customer.Document", doc, err)
		}
	}
}

// Invalid UTF-8 passed validation (sent as U+FFFD, looked up by its raw
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
