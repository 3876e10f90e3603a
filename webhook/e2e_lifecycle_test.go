// End-to-end inbox cases over an event's life: the fake's own sender, a
// shutdown that interrupts a handler, a renewal under its fallback key,
// sealed bodies, and Reap; with the store that is cut off mid-run.

package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// The fake API's own business events, delivered as PagPolar would.
func e2eFakeServer(t *testing.T, open func() webhook.Store) {
	clock := pagpolartest.NewClock()
	api := pagpolartest.NewServer(t, pagpolartest.WithClock(clock))
	var eff effects
	r := newRig(t, open(), clock, func(c *webhook.Config) {
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	})
	sender := pagpolartest.NewWebhookSenderFor(api, r.url, token, pagpolartest.WithDuplicatePaid())
	defer sender.Close()
	body, _ := json.Marshal(wire.PixRequest{OfferIdentifier: "offer-basic", ExternalReference: "order-1",
		Customer: wire.Customer{Name: "Ana", Email: "ana@example.com", Document: "00000000000", Phone: "11999999999"}})
	req, _ := http.NewRequest(http.MethodPost, api.URL+wire.RoutePix, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+api.Token)
	req.Header.Set(wire.HeaderIdempotencyKey, "key-"+randomName())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sale wire.Sale
	err = json.NewDecoder(resp.Body).Decode(&sale)
	resp.Body.Close()
	if err != nil || resp.StatusCode/100 != 2 {
		t.Fatalf("PIX sale: %d %v", resp.StatusCode, err)
	}
	if err := api.Pay(sale.Identifier); err != nil {
		t.Fatal(err)
	}
	if err := sender.Flush(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{wire.EventTransactionCreated, wire.EventTransactionPaid} {
		r.waitOutcome(ev+":"+sale.Identifier, webhook.StateProcessed)
	}
	r.shutdown()
	if eff.get("TRANSACTION_PAID:"+sale.Identifier) != 1 || eff.get("TRANSACTION_CREATED:"+sale.Identifier) != 1 || eff.total() != 2 {
		t.Errorf("runs %v, want CREATED and PAID once each (PAID was delivered twice)", eff.n)
	}
	if n := len(sender.Deliveries()); n != 3 {
		t.Errorf("%d deliveries, want 3", n)
	}
}

// A shutdown that interrupts a handler gives
// the attempt back. Three interrupted deploys left the event with 3 of its 3
// attempts spent, and the fourth deploy would mark it dead without running
// it.
func e2eShutdownHandBacks(t *testing.T, open func() webhook.Store) {
	const key = "TRANSACTION_PAID:s1"
	runs := 0
	for deploy := 1; deploy <= 3; deploy++ {
		entered := make(chan struct{})
		h := newHarness(t, open(), nil, func(c *webhook.Config) {
			c.Owner = fmt.Sprintf("deploy-%d", deploy)
			c.Default = func(ctx context.Context, _ *webhook.Event) error {
				close(entered)
				<-ctx.Done() // a long handler: the deploy does not wait for it
				return ctx.Err()
			}
		})
		if deploy == 1 {
			if w := h.post(txEnv(wire.EventTransactionPaid, "s1", "paid")); w.Code != http.StatusOK {
				t.Fatalf("delivery: %d", w.Code)
			}
		}
		h.start()
		select {
		case <-entered:
		case <-time.After(waitFor):
			t.Fatalf("deploy %d never ran the event", deploy)
		}
		runs++
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := h.in.Shutdown(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("deploy %d: Shutdown = %v, want context.Canceled", deploy, err)
		}
		r := h.waitOutcome(key, webhook.StateReceived)
		if r.Attempts != 0 || !strings.HasPrefix(r.LastError, "interrupted by shutdown") {
			t.Fatalf("after interrupted deploy %d: %s attempts %d error %q; want received with 0 attempts spent", deploy, r.State, r.Attempts, r.LastError)
		}
		if g := h.get(key); g.State != webhook.StateReceived || g.Attempts != 0 {
			t.Fatalf("stored after deploy %d: %s attempts %d", deploy, g.State, g.Attempts)
		}
	}
	var eff effects
	h := newHarness(t, open(), nil, func(c *webhook.Config) {
		c.Owner = "deploy-4"
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	}).start()
	r := h.waitOutcome(key, webhook.StateProcessed)
	if r.Attempts != 1 || eff.get(key) != 1 {
		t.Errorf("fourth deploy: %s attempts %d, %d effects; want processed on its first counted attempt, once (MaxAttempts is 3)", r.State, r.Attempts, eff.get(key))
	}
	if runs != 3 {
		t.Errorf("%d interrupted runs, want 3", runs)
	}
}

// Through a store, a renewal without next_billing_at is
// answered 200 and deduped under its fallback key.
func e2eRenewedFallback(t *testing.T, open func() webhook.Store) {
	var eff effects
	h := newHarness(t, open(), nil, func(c *webhook.Config) {
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	}).start()
	a := `{"id":"evt_a","event":"SUBSCRIPTION_RENEWED","data":{"subscription":{"id":"sub_1","status":"active","period":"2031-01"}}}`
	aResend := `{"id":"evt_b","creation_date":"2031-01-02T00:00:00Z","event":"SUBSCRIPTION_RENEWED","data":{"subscription":{"period":"2031-01","status":"active","id":"sub_1"}}}`
	b := `{"id":"evt_c","event":"SUBSCRIPTION_RENEWED","data":{"subscription":{"id":"sub_1","status":"active","period":"2031-02"}}}`
	for _, body := range []string{a, aResend, b} {
		if w := h.post([]byte(body)); w.Code != http.StatusOK {
			t.Fatalf("renewal without next_billing_at: %d %s, want 200", w.Code, w.Body.String())
		}
	}
	var keys []string
	for _, body := range []string{a, b} {
		env, _ := webhook.ParseEnvelope([]byte(body))
		k, err := webhook.FallbackKey(env, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		h.waitOutcome(k, webhook.StateProcessed)
	}
	h.shutdown()
	if n := h.count(); n != 2 {
		t.Errorf("stored %d events, want 2", n)
	}
	if r := h.get(keys[0]); r.Deliveries != 2 {
		t.Errorf("first renewal: %d deliveries, want 2 (its resend deduped)", r.Deliveries)
	}
	if eff.total() != 2 || eff.get(keys[0]) != 1 || eff.get(keys[1]) != 1 {
		t.Errorf("runs %v, want each renewal once", eff.n)
	}
}

// Every store keeps only the sealed body.
func e2eSealed(t *testing.T, open func() webhook.Store) {
	seen := make(chan []byte, 1)
	h := newHarness(t, open(), nil, func(c *webhook.Config) {
		c.Default = func(_ context.Context, ev *webhook.Event) error { seen <- ev.Raw; return nil }
	}).start()
	if w := h.post([]byte(customerBody)); w.Code != http.StatusOK {
		t.Fatalf("%d", w.Code)
	}
	h.waitOutcome("TRANSACTION_PAID:sale_9", webhook.StateProcessed)
	if raw := <-seen; string(raw) != customerBody {
		t.Errorf("handler saw %q", raw)
	}
	stored := h.get("TRANSACTION_PAID:sale_9")
	for _, pii := range []string{"Maria", "maria@exemplo.com", "123.456.789-09"} {
		if bytes.Contains(stored.Payload, []byte(pii)) {
			t.Errorf("the store keeps %q in clear", pii)
		}
	}
	if plain, err := webhook.OpenPayload(stored, testKey); err != nil || string(plain) != customerBody {
		t.Errorf("OpenPayload = %q, %v", plain, err)
	}
}

// Reap removes processed and dead events past retention,
// batch by batch, and keeps unfinished ones; its dry run lists the same.
func e2eReap(t *testing.T, open func() webhook.Store) {
	h := newHarness(t, open(), nil, func(c *webhook.Config) {
		c.Backoff = func(int) time.Duration { return time.Hour }
		c.Handlers = map[string]webhook.HandlerFunc{
			wire.EventTransactionPaid:     func(context.Context, *webhook.Event) error { return nil },
			wire.EventTransactionDeclined: func(context.Context, *webhook.Event) error { return webhook.Permanent(errors.New("poison")) },
			wire.EventTransactionCreated:  func(context.Context, *webhook.Event) error { return errors.New("not yet") },
		}
	}).start()
	for _, id := range []string{"p1", "p2", "p3"} {
		h.post(txEnv(wire.EventTransactionPaid, id, "paid"))
		h.waitOutcome("TRANSACTION_PAID:"+id, webhook.StateProcessed)
	}
	h.post(txEnv(wire.EventTransactionDeclined, "d1", "declined"))
	h.waitOutcome("TRANSACTION_DECLINED:d1", webhook.StateDead)
	h.post(txEnv(wire.EventTransactionCreated, "e1", "pending"))
	h.waitOutcome("TRANSACTION_CREATED:e1", webhook.StateError)
	h.shutdown()
	h.storeOnly(t, "TRANSACTION_PAID:pending", txEnv(wire.EventTransactionPaid, "pending", "paid")) // received, never run

	ctx := ctxFor(t)
	if n, err := h.in.Reap(ctx); err != nil || n != 0 {
		t.Fatalf("Inbox.Reap now = %d, %v; want nothing removed (all recent)", n, err)
	}
	later := webhook.ReapOptions{Now: time.Now().Add(webhook.DefaultRetention + 24*time.Hour), Batch: 2}
	cands, err := webhook.ReapCandidates(ctx, h.store, later, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ck []string
	for _, r := range cands {
		ck = append(ck, r.Key)
	}
	slices.Sort(ck) // the order (oldest first) is the conformance suite's subject
	if strings.Join(ck, ",") != "TRANSACTION_DECLINED:d1,TRANSACTION_PAID:p1,TRANSACTION_PAID:p2,TRANSACTION_PAID:p3" {
		t.Errorf("dry run lists %v, want d1, p1, p2 and p3", ck)
	}
	n, err := webhook.Reap(ctx, h.store, later)
	if err != nil || n != 4 {
		t.Fatalf("Reap 31 days later = %d, %v; want 4 (in batches of 2)", n, err)
	}
	for _, r := range cands {
		if _, err := h.store.Get(ctx, r.Key); !errors.Is(err, webhook.ErrNotFound) {
			t.Errorf("%s after Reap: %v, want removed", r.Key, err)
		}
	}
	for _, k := range []string{"TRANSACTION_CREATED:e1", "TRANSACTION_PAID:pending"} {
		if _, err := h.store.Get(ctx, k); err != nil {
			t.Errorf("unfinished %s after Reap: %v, want kept", k, err)
		}
	}
	if _, err := webhook.Reap(ctx, h.store, webhook.ReapOptions{Retention: webhook.MinRetention - time.Second}); err == nil {
		t.Errorf("Reap below MinRetention succeeded")
	}
}

// storeOnly stores body through a second Inbox on the same store that is
// never started: the event stays received.
func (h *harness) storeOnly(t *testing.T, key string, body []byte) {
	t.Helper()
	other := newHarness(t, h.store, h.clock, nil)
	if w := other.post(body); w.Code != http.StatusOK {
		t.Fatalf("storing %s: %d", key, w.Code)
	}
}

// cutStore is a process's view of a store that its crash cuts off: while
// down, every write fails as unavailable.
type cutStore struct {
	webhook.Store
	down atomic.Bool
}

func (c *cutStore) Claim(ctx context.Context, key, owner string, ttl time.Duration) (webhook.Record, error) {
	if c.down.Load() {
		return webhook.Record{}, errCut
	}
	return c.Store.Claim(ctx, key, owner, ttl)
}

func (c *cutStore) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (webhook.Record, error) {
	if c.down.Load() {
		return webhook.Record{}, errCut
	}
	return c.Store.Renew(ctx, key, token, ttl)
}

func (c *cutStore) Complete(ctx context.Context, key string, token int64, out webhook.Outcome) (webhook.Record, error) {
	if c.down.Load() {
		return webhook.Record{}, errCut
	}
	return c.Store.Complete(ctx, key, token, out)
}

func (c *cutStore) Due(ctx context.Context, limit int) ([]webhook.Record, error) {
	if c.down.Load() {
		return nil, errCut
	}
	return c.Store.Due(ctx, limit)
}

var errCut = fmt.Errorf("%w: the process is gone", webhook.ErrUnavailable)
