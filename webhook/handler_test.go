package webhook_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/webhook"
)

func TestHandlerRejectsWrongToken(t *testing.T) {
	h := newHarness(t, webhook.NewMemoryStore(), nil, nil)
	body := txEnv(wire.EventTransactionPaid, "sale_1", "paid")
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + token + "x", "Basic " + token, token, "Bearer", "Bearer  " + token} {
		w := deliver(h.in, body, "Authorization", auth)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %d, want 401", auth, w.Code)
		}
	}
	if n := h.count(); n != 0 {
		t.Errorf("%d events stored after rejected deliveries, want 0", n)
	}
	if w := deliver(h.in, body, "Authorization", "bearer "+token); w.Code != http.StatusOK {
		t.Errorf("scheme in lower case: %d, want 200", w.Code)
	}
}

func TestHandlerAcceptsTwoTokensWhileRotating(t *testing.T) {
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) { c.Tokens = []string{token, newToken} })
	for i, tok := range []string{token, newToken} {
		w := deliver(h.in, txEnv(wire.EventTransactionPaid, "sale_"+tok, "paid"), "Authorization", "Bearer "+tok)
		if w.Code != http.StatusOK {
			t.Errorf("token %d: %d, want 200", i, w.Code)
		}
	}
	if n := h.count(); n != 2 {
		t.Errorf("stored %d, want 2", n)
	}
}

func TestHandlerRejectsBadRequests(t *testing.T) {
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) { c.MaxBodyBytes = 1024 })
	big := `{"event":"TRANSACTION_PAID","data":{"transaction":{"id":"s1","status":"paid"}},"pad":"` + strings.Repeat("x", 1024) + `"}`
	cases := []struct {
		name string
		body string
		want int
	}{
		{"oversized", big, http.StatusRequestEntityTooLarge},
		{"not JSON", `{"event":`, http.StatusBadRequest},
		{"array", `[{"event":"TRANSACTION_PAID"}]`, http.StatusBadRequest},
		{"null", `null`, http.StatusBadRequest},
		{"no event", `{"data":{"transaction":{"id":"s1"}}}`, http.StatusBadRequest},
		{"event not a string", `{"event":5,"data":{}}`, http.StatusBadRequest},
		{"transaction without id", `{"event":"TRANSACTION_PAID","data":{"transaction":{"status":"paid"}}}`, http.StatusBadRequest},
		{"subscription without id", `{"event":"SUBSCRIPTION_CANCELED","data":{"subscription":{"status":"canceled"}}}`, http.StatusBadRequest},
		{"transaction event with a subscription only", `{"event":"TRANSACTION_PAID","data":{"subscription":{"id":"sub1"}}}`, http.StatusBadRequest},
		{"amount of the wrong type", `{"event":"TRANSACTION_PAID","data":{"transaction":{"id":"s1","amount":"99.90"}}}`, http.StatusBadRequest},
		{"trailing garbage", `{"event":"TRANSACTION_PAID","data":{"transaction":{"id":"s1"}}} x`, http.StatusBadRequest},
	}
	for _, c := range cases {
		if w := h.post([]byte(c.body)); w.Code != c.want {
			t.Errorf("%s: %d, want %d", c.name, w.Code, c.want)
		}
	}
	if w := deliver(h.in, nil, "Authorization", "Bearer "+token); w.Code != http.StatusBadRequest {
		t.Errorf("empty body: %d, want 400", w.Code)
	}
	if n := h.count(); n != 0 {
		t.Errorf("%d events stored, want 0", n)
	}
}

func TestHandlerMethodNotAllowed(t *testing.T) {
	h := newHarness(t, webhook.NewMemoryStore(), nil, nil)
	r := newRequest(http.MethodGet, nil)
	r.Header.Set("Authorization", "Bearer "+token)
	w := serve(h.in, r)
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != http.MethodPost {
		t.Errorf("GET: %d Allow %q, want 405 POST", w.Code, w.Header().Get("Allow"))
	}
}

func TestHandlerDropsTestAndEmptyEvents(t *testing.T) {
	h := newHarness(t, webhook.NewMemoryStore(), nil, nil)
	testBody := []byte(`{"id":"e1","event":"TRANSACTION_PAID","test":true,"data":{"transaction":{"id":"s1","status":"paid"}}}`)
	if w := h.post(testBody, wire.HeaderTestEvent, "true"); w.Code != http.StatusOK {
		t.Errorf("test event: %d, want 200", w.Code)
	}
	// Either marker is enough.
	if w := h.post(txEnv(wire.EventTransactionPaid, "s2", "paid"), wire.HeaderTestEvent, "true"); w.Code != http.StatusOK {
		t.Errorf("test header only: %d, want 200", w.Code)
	}
	if w := h.post([]byte(`{"event":"TRANSACTION_PAID","test":true,"data":{"transaction":{"id":"s3"}}}`)); w.Code != http.StatusOK {
		t.Errorf("test body only: %d, want 200", w.Code)
	}
	for _, body := range []string{`{"event":"TRANSACTION_PAID"}`, `{"event":"TRANSACTION_PAID","data":{}}`, `{"event":"X","data":null}`} {
		if w := h.post([]byte(body)); w.Code != http.StatusOK {
			t.Errorf("empty data %s: %d, want 200", body, w.Code)
		}
	}
	if n := h.count(); n != 0 {
		t.Errorf("%d events stored, want 0 (test and empty events are dropped)", n)
	}
}

func TestHandlerAcceptsTestEventsWhenConfigured(t *testing.T) {
	var got []*webhook.Event
	done := make(chan struct{}, 1)
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.AcceptTestEvents = true
		c.Default = func(_ context.Context, ev *webhook.Event) error {
			got = append(got, ev)
			done <- struct{}{}
			return nil
		}
	}).start()
	if w := h.post(txEnv(wire.EventTransactionPaid, "s1", "paid"), wire.HeaderTestEvent, "true"); w.Code != http.StatusOK {
		t.Fatalf("%d", w.Code)
	}
	h.waitOutcome("test:TRANSACTION_PAID:s1", webhook.StateProcessed)
	<-done
	if len(got) != 1 || !got[0].Test || got[0].Key != "test:TRANSACTION_PAID:s1" {
		t.Errorf("handler saw %+v, want one test event", got)
	}
}

func TestHandlerStoresThenAnswers(t *testing.T) {
	h := newHarness(t, webhook.NewMemoryStore(), nil, nil) // not started: storing must not need processing
	body := txEnv(wire.EventTransactionPaid, "sale_9", "paid")
	if w := h.post(body); w.Code != http.StatusOK {
		t.Fatalf("first delivery: %d", w.Code)
	}
	r := h.get("TRANSACTION_PAID:sale_9")
	if r.State != webhook.StateReceived || r.Entity != "sale:sale_9" || r.Deliveries != 1 {
		t.Errorf("stored %+v", r)
	}
	if plain, err := webhook.OpenPayload(r, testKey); err != nil || string(plain) != string(body) {
		t.Errorf("stored payload opens to %q, %v; want the body as received", plain, err)
	}
	// A resend has a new envelope id: same key, counted, not stored twice.
	if w := h.post(txEnv(wire.EventTransactionPaid, "sale_9", "paid")); w.Code != http.StatusOK {
		t.Fatalf("resend: %d", w.Code)
	}
	if r2 := h.get("TRANSACTION_PAID:sale_9"); r2.Deliveries != 2 || string(r2.Payload) != string(r.Payload) {
		t.Errorf("after resend: deliveries %d (want 2), first payload kept %v", r2.Deliveries, string(r2.Payload) == string(r.Payload))
	}
	if n := h.count(); n != 1 {
		t.Errorf("stored %d events, want 1", n)
	}
}

func TestHandlerAnswers503WhenTheStoreRefuses(t *testing.T) {
	fs := &flakyStore{Store: webhook.NewMemoryStore()}
	h := newHarness(t, fs, nil, nil)
	fs.refuse.Store(true)
	body := txEnv(wire.EventTransactionPaid, "sale_1", "paid")
	if w := h.post(body); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("store refusing: %d, want 503", w.Code)
	}
	if n := h.count(); n != 0 {
		t.Fatalf("stored %d", n)
	}
	fs.refuse.Store(false)
	if w := h.post(txEnv(wire.EventTransactionPaid, "sale_1", "paid")); w.Code != http.StatusOK {
		t.Fatalf("resend: %d, want 200", w.Code)
	}
	if r := h.get("TRANSACTION_PAID:sale_1"); r.Deliveries != 1 {
		t.Errorf("deliveries %d, want 1 (the refused one was never stored)", r.Deliveries)
	}
}

func TestHandlerNeverDedupesRefundRequests(t *testing.T) {
	h := newHarness(t, webhook.NewMemoryStore(), nil, nil)
	for range 3 {
		if w := h.post(txEnv(wire.EventTransactionAskRefunding, "sale_1", "paid")); w.Code != http.StatusOK {
			t.Fatalf("%d", w.Code)
		}
	}
	rs, err := h.store.List(context.Background(), webhook.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 {
		t.Fatalf("stored %d refund requests, want 3", len(rs))
	}
	for _, r := range rs {
		if !strings.HasPrefix(r.Key, "nodedupe:TRANSACTION_ASK_REFUNDING:sale:sale_1:") || r.Entity != "sale:sale_1" {
			t.Errorf("key %q entity %q", r.Key, r.Entity)
		}
	}
}

func TestNewValidatesConfig(t *testing.T) {
	ok := func(c *webhook.Config) {}
	cases := []struct {
		name string
		edit func(*webhook.Config)
	}{
		{"no store", func(c *webhook.Config) { c.Store = nil }},
		{"no token", func(c *webhook.Config) { c.Tokens = nil }},
		{"three tokens", func(c *webhook.Config) { c.Tokens = []string{"a", "b", "c"} }},
		{"empty token", func(c *webhook.Config) { c.Tokens = []string{token, ""} }},
		{"no handler", func(c *webhook.Config) { c.Default = nil }},
		{"nil handler", func(c *webhook.Config) { c.Handlers = map[string]webhook.HandlerFunc{"X": nil} }},
		{"negative workers", func(c *webhook.Config) { c.Workers = -1 }},
		{"neither payload keys nor plaintext", func(c *webhook.Config) { c.PlaintextPayloads = false }},
		{"payload keys and plaintext", func(c *webhook.Config) { c.PayloadKeys = []webhook.PayloadKey{testKey} }},
		{"short payload key", func(c *webhook.Config) {
			c.PlaintextPayloads, c.PayloadKeys = false, []webhook.PayloadKey{{ID: "k", Secret: make([]byte, 16)}}
		}},
		{"payload key without ID", func(c *webhook.Config) {
			c.PlaintextPayloads, c.PayloadKeys = false, []webhook.PayloadKey{{Secret: testKey.Secret}}
		}},
		{"payload key ID twice", func(c *webhook.Config) {
			c.PlaintextPayloads, c.PayloadKeys = false, []webhook.PayloadKey{testKey, testKey}
		}},
		{"retention below the minimum", func(c *webhook.Config) { c.Retention = webhook.MinRetention - time.Hour }},
	}
	base := func() webhook.Config {
		return webhook.Config{Store: webhook.NewMemoryStore(), Tokens: []string{token}, PlaintextPayloads: true,
			Default: func(context.Context, *webhook.Event) error { return nil }}
	}
	c := base()
	ok(&c)
	if _, err := webhook.New(c); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range cases {
		c := base()
		tc.edit(&c)
		if _, err := webhook.New(c); err == nil {
			t.Errorf("%s: New succeeded, want an error", tc.name)
		}
	}
}
