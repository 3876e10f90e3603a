package webhook_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/webhook"
)

func TestDefaultKeyFollowsThePageTable(t *testing.T) {
	cases := []struct {
		body, key string
		dedupe    bool
	}{
		{`{"event":"TRANSACTION_PAID","data":{"transaction":{"id":"s1"}}}`, "TRANSACTION_PAID:s1", true},
		{`{"event":"TRANSACTION_CREATED","data":{"transaction":{"identifier":"s1"}}}`, "TRANSACTION_CREATED:s1", true},
		{`{"event":"TRANSACTION_ASK_REFUNDING","data":{"transaction":{"id":"s1"}}}`, "", false},
		{`{"event":"SUBSCRIPTION_RENEWED","data":{"subscription":{"id":"sub1","next_billing_at":"2031-02-01"}}}`, "SUBSCRIPTION_RENEWED:sub1:2031-02-01", true},
		// A renewal carrying its new sale too is keyed on the subscription, as the table says.
		{`{"event":"SUBSCRIPTION_RENEWED","data":{"transaction":{"id":"s9"},"subscription":{"id":"sub1","next_billing_at":"2031-03-01"}}}`, "SUBSCRIPTION_RENEWED:sub1:2031-03-01", true},
		{`{"event":"SUBSCRIPTION_DELAYED","data":{"subscription":{"id":"sub1"}}}`, "SUBSCRIPTION_DELAYED:sub1", true},
		{`{"event":"SUBSCRIPTION_CANCELED","data":{"subscription":{"id":"sub1"}}}`, "SUBSCRIPTION_CANCELED:sub1", true},
		{`{"event":"SOMETHING_NEW","data":{"subscription":{"id":"sub1"}}}`, "SOMETHING_NEW:sub1", true},
	}
	for _, c := range cases {
		env, err := webhook.ParseEnvelope([]byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		key, dedupe, err := webhook.DefaultKey(env)
		if err != nil || key != c.key || dedupe != c.dedupe {
			t.Errorf("%s: DefaultKey = %q, %v, %v; want %q, %v", c.body, key, dedupe, err, c.key, c.dedupe)
		}
	}
	// The envelope id never enters the key.
	a, _ := webhook.ParseEnvelope([]byte(`{"id":"e1","creation_date":"2031-01-01T00:00:00Z","event":"TRANSACTION_PAID","data":{"transaction":{"id":"s1"}}}`))
	b, _ := webhook.ParseEnvelope([]byte(`{"id":"e2","creation_date":"2031-01-01T00:00:30Z","event":"TRANSACTION_PAID","data":{"transaction":{"id":"s1"}}}`))
	ka, _, _ := webhook.DefaultKey(a)
	kb, _, _ := webhook.DefaultKey(b)
	if ka != kb {
		t.Errorf("two attempts of one event have keys %q and %q", ka, kb)
	}
}

func TestKeyEveryDelayed(t *testing.T) {
	env, _ := webhook.ParseEnvelope([]byte(`{"event":"SUBSCRIPTION_DELAYED","data":{"subscription":{"id":"sub1"}}}`))
	if _, dedupe, err := webhook.KeyEveryDelayed(env); dedupe || err != nil {
		t.Errorf("KeyEveryDelayed(DELAYED) dedupe = %v, %v; want false", dedupe, err)
	}
	env, _ = webhook.ParseEnvelope([]byte(`{"event":"SUBSCRIPTION_CANCELED","data":{"subscription":{"id":"sub1"}}}`))
	if key, dedupe, _ := webhook.KeyEveryDelayed(env); !dedupe || key != "SUBSCRIPTION_CANCELED:sub1" {
		t.Errorf("KeyEveryDelayed(CANCELED) = %q, %v", key, dedupe)
	}
}

// SUBSCRIPTION_DELAYED arrives once a day while late: handled once by
// default, every day with KeyEveryDelayed.
func TestDelayedNoticesDefaultAndEveryTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  webhook.KeyFunc
		want int
	}{{"default", nil, 1}, {"every time", webhook.KeyEveryDelayed, 3}} {
		t.Run(tc.name, func(t *testing.T) {
			var eff effects
			h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
				c.Key = tc.key
				c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Name); return nil }
			}).start()
			for range 3 {
				h.post(subEnv(wire.EventSubscriptionDelayed, "sub_1", "delayed", "2031-01-01"))
			}
			rs, err := h.store.List(context.Background(), webhook.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rs {
				h.waitOutcome(r.Key, webhook.StateProcessed)
			}
			h.shutdown()
			if got := eff.get(wire.EventSubscriptionDelayed); got != tc.want || len(rs) != tc.want {
				t.Errorf("3 daily notices: handled %d, stored %d; want %d", got, len(rs), tc.want)
			}
		})
	}
}

// A PayZu-shaped dedupe: id + status, so that a REFUNDED after COMPLETED is
// not lost as a duplicate of the same id, while repeats of each are.
func TestPluggableKeyByIDAndStatus(t *testing.T) {
	payzuKey := func(env *webhook.Envelope) (string, bool, error) {
		tx := env.Data.Transaction
		if tx == nil {
			return "", false, errors.New("no transaction")
		}
		return fmt.Sprintf("payzu:%s:%s", tx.ID, tx.Status), true, nil
	}
	var mu effects
	h := newHarness(t, webhook.NewMemoryStore(), nil, func(c *webhook.Config) {
		c.Key = payzuKey
		c.Default = func(_ context.Context, ev *webhook.Event) error {
			mu.add(ev.Transaction().Status)
			return nil
		}
	}).start()
	for _, st := range []string{"PENDING", "COMPLETED", "COMPLETED", "REFUNDED", "PENDING", "REFUNDED"} {
		if w := h.post(txEnv("TRANSACTION_UPDATED", "tx_1", st)); w.Code != http.StatusOK {
			t.Fatalf("%d", w.Code)
		}
	}
	for _, st := range []string{"PENDING", "COMPLETED", "REFUNDED"} {
		h.waitOutcome("payzu:tx_1:"+st, webhook.StateProcessed)
	}
	h.shutdown()
	for _, st := range []string{"PENDING", "COMPLETED", "REFUNDED"} {
		if n := mu.get(st); n != 1 {
			t.Errorf("%s handled %d times, want 1", st, n)
		}
	}
	if n := h.count(); n != 3 {
		t.Errorf("stored %d keys, want 3", n)
	}
}
