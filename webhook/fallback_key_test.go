package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// A SUBSCRIPTION_RENEWED without next_billing_at must not be answered 400
// (PagPolar would resend it forever). It is
// stored under the fallback key and answered 200; its resends dedupe, a
// renewal with other data does not.
func TestRenewedWithoutNextBillingIsStoredUnderFallbackKey(t *testing.T) {
	runs := make(chan *webhook.Event, 8)
	h := newHarness(t, nil, nil, func(c *webhook.Config) {
		c.Default = func(_ context.Context, ev *webhook.Event) error { runs <- ev; return nil }
	}).start()
	first := `{"id":"evt_1","creation_date":"2031-01-01T00:00:00Z","event":"SUBSCRIPTION_RENEWED","data":{"subscription":{"id":"sub_1","status":"active","amount":9990,"cycle":3}}}`
	// A resend: new id and creation_date, the same data with its keys in
	// another order and other spacing.
	resend := `{"event":"SUBSCRIPTION_RENEWED","id":"evt_2","creation_date":"2031-01-01T00:00:30Z","data":{ "subscription" : {"cycle":3, "amount":9990,"status":"active","id":"sub_1"}}}`
	// The next cycle's renewal differs only in a field this SDK does not know.
	next := `{"id":"evt_3","event":"SUBSCRIPTION_RENEWED","data":{"subscription":{"id":"sub_1","status":"active","amount":9990,"cycle":4}}}`
	for i, body := range []string{first, resend, next} {
		if w := h.post([]byte(body)); w.Code != http.StatusOK {
			t.Fatalf("delivery %d: %d %s, want 200", i+1, w.Code, w.Body.String())
		}
	}
	rs, err := h.store.List(context.Background(), webhook.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 {
		t.Fatalf("stored %d events, want 2 (the first and its resend under one key, the next cycle under another)", len(rs))
	}
	byKey := map[string]webhook.Record{}
	for _, r := range rs {
		if !strings.HasPrefix(r.Key, "SUBSCRIPTION_RENEWED:sub_1:data-") || len(r.Key) != len("SUBSCRIPTION_RENEWED:sub_1:data-")+32 {
			t.Errorf("key %q, want SUBSCRIPTION_RENEWED:sub_1:data-<32 hex>", r.Key)
		}
		if r.Entity != "subscription:sub_1" {
			t.Errorf("entity %q", r.Entity)
		}
		byKey[r.Key] = r
	}
	env1, _ := webhook.ParseEnvelope([]byte(first))
	k1, err := webhook.FallbackKey(env1, []byte(first))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := byKey[k1]; !ok || r.Deliveries != 2 {
		t.Errorf("the first renewal under %s: %+v, want 2 deliveries", k1, r)
	}
	h.waitOutcome(k1, webhook.StateProcessed)
	if d, _, err := webhook.DefaultKey(env1); !errors.Is(err, webhook.ErrUseFallbackKey) || d != "" {
		t.Errorf("DefaultKey of a renewal without next_billing_at = %q, %v; want ErrUseFallbackKey", d, err)
	}
	for range 2 {
		ev := <-runs
		if ev.Subscription().ID != "sub_1" {
			t.Errorf("handler saw %+v", ev.Subscription())
		}
	}
}
