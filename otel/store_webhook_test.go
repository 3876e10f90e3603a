package pagpolarotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	pagpolarotel "github.com/pagpolar/pagpolar-go/otel"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// storeSpans returns the calls ("create", "update", ...) of the store
// spans directly under parent, and fails on one without its attributes.
func storeSpans(t *testing.T, all map[string]sdktrace.ReadOnlySpan, parent sdktrace.ReadOnlySpan) map[string]int {
	t.Helper()
	calls := map[string]int{}
	for _, c := range children(all, parent) {
		call, ok := attr(c, "pagpolar.store.call")
		if !ok {
			continue
		}
		if c.Name() != "pagpolar.store."+call.AsString() {
			t.Errorf("store span named %q for call %q", c.Name(), call.AsString())
		}
		if res, ok := attr(c, "pagpolar.store.result"); !ok || res.AsString() == "" {
			t.Errorf("store span %s without a result", c.Name())
		}
		calls[call.AsString()]++
	}
	return calls
}

func TestLostAnswerThenLookup_StoreCallsAreSpansUnderTheOperation(t *testing.T) {
	r := newRig(t)
	r.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultCommitDropRelease, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := r.client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "order-lost-store", Customer: customer})
	if err != nil {
		t.Fatalf("charge: %v", err)
	}
	all, ops := r.tree(t)
	calls := storeSpans(t, all, ops[0])
	// The record is created before the send and updated with the outcome.
	if calls["create"] != 1 || calls["update"] == 0 {
		t.Errorf("store calls under the operation %v: want one create and at least one update", calls)
	}
	for _, s := range all {
		if _, ok := attr(s, "pagpolar.store.call"); ok && s.Status().Code == codes.Error {
			t.Errorf("store span %s has status Error on a store that never failed", s.Name())
		}
	}
	if n := r.counter(t, "pagpolar.client.store.duration", attribute.String("pagpolar.store.call", "create"), attribute.String("pagpolar.store.result", "ok")); n != 1 {
		t.Errorf("store.duration{create,ok} count = %d, want 1", n)
	}
	r.noSecrets(t, ch.Operation.Key)
}

func TestInProgress409Wait_RetryCountedByCauseAndStoreLeaseSpans(t *testing.T) {
	r := newRig(t)
	r.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultHold, Delay: 250 * time.Millisecond, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	other, err := pagpolar.NewClient(r.srv.CredentialID, pagpolar.StaticToken(r.srv.Token), pagpolar.WithBaseURL(r.srv.URL),
		pagpolar.WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	params := pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "order-409-store", Customer: customer}
	first := make(chan error, 1)
	go func() { _, err := other.Payments.Pix(ctx, params); first <- err }()
	if err := r.srv.WaitHolds(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_, err = r.client.Payments.Pix(ctx, params)
	<-first
	all, ops := r.tree(t)
	saw409 := false
	for _, c := range children(all, ops[0]) {
		if v, _ := attr(c, "http.response.status_code"); v.AsInt64() == 409 {
			saw409 = true
		}
	}
	if !saw409 {
		t.Fatalf("no 409 attempt under the operation (err %v)", err)
	}
	// A 409 is not resent: the operation is settled by lookup.
	lookups := 0
	for _, c := range children(all, ops[0]) {
		if c.Name() == "pagpolar.lookup" {
			lookups++
		}
	}
	if lookups == 0 {
		t.Error("no lookup span under the operation after its 409")
	}
	if n := r.counter(t, "pagpolar.client.retries", attribute.String("pagpolar.cause", "409")); n != 0 {
		t.Errorf("%d retries counted with cause 409: a 409 is never resent", n)
	}
	if calls := storeSpans(t, all, ops[0]); calls["create"] != 1 {
		t.Errorf("store calls under the operation %v: want one create", calls)
	}
	r.noSecrets(t)
}

func TestRateLimited_RetryCountedByCause(t *testing.T) {
	r := newRig(t)
	r.srv.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultRateLimit, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "order-429", Customer: customer}); err != nil {
		t.Fatalf("charge: %v", err)
	}
	if n := r.counter(t, "pagpolar.client.retries", attribute.String("pagpolar.cause", "429")); n != 1 {
		t.Errorf("retries{cause=429} = %d, want 1", n)
	}
	all, ops := r.tree(t)
	posts := 0
	for _, c := range children(all, ops[0]) {
		if c.Name() == "POST" {
			posts++
		}
	}
	if posts != 2 {
		t.Errorf("%d POST attempts under the operation, want 2 (the 429 and its resend)", posts)
	}
	r.noSecrets(t)
}

func TestDeclinedCard_StoreRecordsTheFailureWithoutCardData(t *testing.T) {
	r := newRig(t)
	r.srv.Inject(pagpolartest.Fault{Route: "credit_card", Action: pagpolartest.FaultDecline, Times: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := r.client.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: "offer-basic", ExternalReference: "order-card-store",
		Customer: customer, CardToken: cardToken})
	if !errors.Is(err, pagpolar.ErrDeclined) {
		t.Fatalf("err %v, want ErrDeclined", err)
	}
	all, ops := r.tree(t)
	if calls := storeSpans(t, all, ops[0]); calls["create"] != 1 || calls["update"] == 0 {
		t.Errorf("store calls under the operation %v: want one create and the failure's update", calls)
	}
	if n := r.counter(t, "pagpolar.client.store.duration", attribute.String("pagpolar.store.call", "update"), attribute.String("pagpolar.store.result", "ok")); n == 0 {
		t.Error("no store.duration{update,ok} recorded")
	}
	r.noSecrets(t)
}

func TestInboxOnOutcome_CountsEventsByState(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	outcomes := make(chan webhook.Record, 8)
	onOutcome, err := pagpolarotel.InboxOnOutcome(func(r webhook.Record) { outcomes <- r }, pagpolarotel.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	const whToken = "whk_otel_token"
	in, err := webhook.New(webhook.Config{
		Store: webhook.NewMemoryStore(), Tokens: []string{whToken}, PlaintextPayloads: true,
		Handlers: map[string]webhook.HandlerFunc{
			"TRANSACTION_PAID":     func(context.Context, *webhook.Event) error { return nil },
			"TRANSACTION_REFUNDED": func(context.Context, *webhook.Event) error { return webhook.Permanent(errors.New("refused")) },
		},
		PollInterval: 20 * time.Millisecond, OnOutcome: onOutcome,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = in.Shutdown(ctx)
	})
	for i, ev := range []string{"TRANSACTION_PAID", "TRANSACTION_REFUNDED"} {
		env := webhook.Envelope{ID: "evt_otel_" + ev, CreationDate: time.Now().UTC().Format(time.RFC3339), Event: ev,
			Data: webhook.Data{Transaction: &webhook.Transaction{ID: "sale_otel_" + string(rune('a'+i)), Sale: webhook.Sale{
				Identifier: "sale_otel_" + string(rune('a'+i)), Status: "paid", PaymentMethod: "pix", Amount: 9990}}}}
		body, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/webhooks/pagpolar", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+whToken)
		w := httptest.NewRecorder()
		in.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("delivery of %s answered %d: %s", ev, w.Code, w.Body)
		}
	}
	timeout := time.After(10 * time.Second)
	for n := 0; n < 2; n++ {
		select {
		case <-outcomes:
		case <-timeout:
			t.Fatalf("%d of 2 outcomes recorded in 10 s", n)
		}
	}
	r := &rig{metrics: reader}
	if n := r.counter(t, "pagpolar.webhook.events", attribute.String("pagpolar.webhook.event", "TRANSACTION_PAID"), attribute.String("pagpolar.webhook.state", "processed")); n != 1 {
		t.Errorf("webhook.events{TRANSACTION_PAID,processed} = %d, want 1", n)
	}
	if n := r.counter(t, "pagpolar.webhook.events", attribute.String("pagpolar.webhook.event", "TRANSACTION_REFUNDED"), attribute.String("pagpolar.webhook.state", "dead")); n != 1 {
		t.Errorf("webhook.events{TRANSACTION_REFUNDED,dead} = %d, want 1", n)
	}
}
