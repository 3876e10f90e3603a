// End-to-end inbox cases on delivery: duplicates, events out of order, a
// failing or slow handler, a restart, a store that refuses, a wrong token and
// bad bodies.

package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

func e2eDuplicates(t *testing.T, open func() webhook.Store) {
	var eff effects
	r := newRig(t, open(), nil, func(c *webhook.Config) {
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	}, pagpolartest.WithDuplicatePaid())
	var envs []wire.WebhookEnvelope
	for _, id := range []string{"s1", "s2", "s3"} {
		envs = append(envs, txWire(wire.EventTransactionCreated, id, wire.SaleStatusPending), txWire(wire.EventTransactionPaid, id, wire.SaleStatusPaid))
	}
	r.sender.SendAll(envs)
	r.flush()
	r.sender.ResendAll() // the dashboard's bulk resend
	r.flush()
	for _, e := range envs {
		r.waitOutcome(e.Event+":"+e.Data.Transaction.ID, webhook.StateProcessed)
	}
	r.shutdown()
	r.allOK()
	if n := len(r.sender.Deliveries()); n != 15 {
		t.Errorf("%d deliveries, want 15 (6 events and 3 duplicate PAID, then the 6 events resent)", n)
	}
	for _, e := range envs {
		k := e.Event + ":" + e.Data.Transaction.ID
		if got := eff.get(k); got != 1 {
			t.Errorf("%s ran %d times, want 1", k, got)
		}
	}
	if total := eff.total(); total != 6 {
		t.Errorf("%d runs in all, want 6", total)
	}
}

func e2eConcurrentDuplicates(t *testing.T, open func() webhook.Store) {
	var eff effects
	r := newRig(t, open(), nil, func(c *webhook.Config) {
		c.Workers = 8
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	}, pagpolartest.WithConcurrency(16))
	var envs []wire.WebhookEnvelope
	for range 16 {
		envs = append(envs, txWire(wire.EventTransactionPaid, "s1", wire.SaleStatusPaid))
	}
	r.sender.SendAll(envs)
	r.flush()
	r.waitOutcome("TRANSACTION_PAID:s1", webhook.StateProcessed)
	r.shutdown()
	r.allOK()
	if got := eff.get("TRANSACTION_PAID:s1"); got != 1 {
		t.Errorf("16 concurrent deliveries ran the handler %d times, want 1", got)
	}
	if rec := r.get("TRANSACTION_PAID:s1"); rec.Deliveries != 16 {
		t.Errorf("deliveries %d, want 16", rec.Deliveries)
	}
}

// orders is the application's own table: the status it holds per sale.
type orders struct {
	mu sync.Mutex
	m  map[string]string
}

func (o *orders) get(id string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.m[id]
}

func (o *orders) set(id, st string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[string]string)
	}
	o.m[id] = st
}

// CREATED fails on the way and arrives 30 s later, after PAID: the order
// must stay paid.
func e2eCreatedAfterPaid(t *testing.T, open func() webhook.Store) {
	var book orders
	api := &fakeAPI{sales: map[string]webhook.Sale{"s1": {Identifier: "s1", Status: "paid"}}}
	var mu sync.Mutex
	var seen []string
	apply := func(ctx context.Context, ev *webhook.Event) error {
		tx := ev.Transaction()
		res, _, err := webhook.ResolveSale(ctx, api, nil, book.get(tx.ID), tx)
		if err != nil {
			return err
		}
		if res.Apply {
			book.set(tx.ID, res.Status)
		}
		mu.Lock()
		seen = append(seen, ev.Name+"→"+book.get(tx.ID))
		mu.Unlock()
		return nil
	}
	r := newRig(t, open(), nil, func(c *webhook.Config) {
		c.Handlers = map[string]webhook.HandlerFunc{wire.EventTransactionCreated: apply, wire.EventTransactionPaid: apply}
	}, pagpolartest.WithLoss(func(env wire.WebhookEnvelope, attempt int) bool {
		return env.Event == wire.EventTransactionCreated && attempt == 1
	}))
	r.sender.Send(txWire(wire.EventTransactionCreated, "s1", wire.SaleStatusPending))
	r.sender.Send(txWire(wire.EventTransactionPaid, "s1", wire.SaleStatusPaid))
	r.flush()
	r.waitOutcome("TRANSACTION_PAID:s1", webhook.StateProcessed)
	r.clock.Advance(30 * time.Second)
	r.flush()
	r.waitOutcome("TRANSACTION_CREATED:s1", webhook.StateProcessed)
	r.shutdown()
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "TRANSACTION_PAID→paid,TRANSACTION_CREATED→paid" || book.get("s1") != "paid" {
		t.Errorf("applied %v, order %s; want PAID then a CREATED that leaves it paid", seen, book.get("s1"))
	}
	if api.calls != 1 {
		t.Errorf("%d API reads, want 1 (the late CREATED)", api.calls)
	}
}

// e2eBackoff is the retry wait of the scenarios that fail on purpose: the
// store's own clock decides when an event is due again, so it is real time.
const e2eBackoff = 100 * time.Millisecond

func e2eFailsThenSucceeds(t *testing.T, open func() webhook.Store) {
	var calls int
	var mu sync.Mutex
	r := newRig(t, open(), nil, func(c *webhook.Config) {
		c.Backoff = func(int) time.Duration { return e2eBackoff }
		c.Default = func(context.Context, *webhook.Event) error {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 1 {
				return errors.New("orders database unavailable")
			}
			return nil
		}
	})
	r.sender.Send(txWire(wire.EventTransactionPaid, "s1", wire.SaleStatusPaid))
	r.flush()
	failed := r.waitOutcome("TRANSACTION_PAID:s1", webhook.StateError)
	if d := failed.NextAttemptAt.Sub(failed.UpdatedAt); d != e2eBackoff {
		t.Errorf("due again %v after the failure, want the backoff %v", d, e2eBackoff)
	}
	rec := r.waitOutcome("TRANSACTION_PAID:s1", webhook.StateProcessed)
	r.shutdown()
	r.allOK()
	if rec.Attempts != 2 || len(r.sender.Deliveries()) != 1 {
		t.Errorf("attempts %d, deliveries %d; want 2 runs of one delivery", rec.Attempts, len(r.sender.Deliveries()))
	}
}

func e2eDead(t *testing.T, open func() webhook.Store) {
	r := newRig(t, open(), nil, func(c *webhook.Config) {
		c.Backoff = func(int) time.Duration { return e2eBackoff }
		c.Default = func(context.Context, *webhook.Event) error { return errors.New("poison") }
	})
	r.sender.Send(txWire(wire.EventTransactionPaid, "s1", wire.SaleStatusPaid))
	r.flush()
	for i := 1; i < 3; i++ {
		r.waitOutcome("TRANSACTION_PAID:s1", webhook.StateError)
	}
	dead := r.waitOutcome("TRANSACTION_PAID:s1", webhook.StateDead)
	rs, err := r.in.List(context.Background(), webhook.Filter{States: []webhook.State{webhook.StateDead}})
	if err != nil || len(rs) != 1 || rs[0].Key != dead.Key || rs[0].Attempts != 3 {
		t.Errorf("List(dead) = %+v, %v", rs, err)
	}
	r.allOK()
}

func e2eSlowHandler(t *testing.T, open func() webhook.Store) {
	release := make(chan struct{})
	entered := make(chan struct{})
	r := newRig(t, open(), nil, func(c *webhook.Config) {
		c.Default = func(ctx context.Context, _ *webhook.Event) error {
			close(entered)
			<-release // far slower than 10 s on the clock
			return nil
		}
	})
	r.sender.Send(txWire(wire.EventTransactionPaid, "s1", wire.SaleStatusPaid))
	<-entered
	r.flush() // the attempt ended while the handler is still blocked
	d := r.sender.Deliveries()
	if len(d) != 1 || !d[0].OK() || d[0].Slow {
		t.Fatalf("with the handler still running, the sender saw %+v; want one fast 200", d)
	}
	r.clock.Advance(15 * time.Second)
	r.flush()
	if n := len(r.sender.Deliveries()); n != 1 || r.sender.Waiting() != 0 {
		t.Errorf("%d deliveries, %d waiting after 15 s: the sender resent", n, r.sender.Waiting())
	}
	close(release)
	r.waitOutcome("TRANSACTION_PAID:s1", webhook.StateProcessed)
}

func e2eRestart(t *testing.T, open func() webhook.Store) {
	clock := pagpolartest.NewClock()
	var eff effects
	zombie := make(chan struct{})
	entered := make(chan struct{})
	// The first process's view of the store, which its crash cuts off: a
	// process that is gone neither renews its leases nor completes.
	firstStore := &cutStore{Store: open()}
	first := newRig(t, firstStore, clock, func(c *webhook.Config) {
		c.Owner = "process-1"
		c.LeaseTTL = time.Second // expires by the store's clock, in real time
		c.Default = func(ctx context.Context, ev *webhook.Event) error {
			if ev.Transaction().ID == "B" {
				close(entered)
				<-zombie
				return errors.New("killed")
			}
			eff.add(ev.Key)
			return nil
		}
	})
	first.sender.Send(txWire(wire.EventTransactionPaid, "A", wire.SaleStatusPaid))
	first.flush()
	first.waitOutcome("TRANSACTION_PAID:A", webhook.StateProcessed)
	first.sender.Send(txWire(wire.EventTransactionPaid, "B", wire.SaleStatusPaid))
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = first.in.Shutdown(ctx) // dies: B stays leased
	first.sender.Send(txWire(wire.EventTransactionPaid, "C", wire.SaleStatusPaid))
	first.flush() // stored by the dying process's listener, never processed there
	firstStore.down.Store(true)

	second := newRig(t, open(), clock, func(c *webhook.Config) {
		c.Owner = "process-2"
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	})
	second.waitOutcome("TRANSACTION_PAID:C", webhook.StateProcessed)
	b := second.waitOutcome("TRANSACTION_PAID:B", webhook.StateProcessed) // once process-1's lease expired
	if b.Attempts != 2 {
		t.Errorf("B attempts %d, want 2 (the crashed one counts)", b.Attempts)
	}
	firstStore.down.Store(false)
	close(zombie)
	for _, id := range []string{"A", "B", "C"} { // duplicates after the restart
		second.sender.Send(txWire(wire.EventTransactionPaid, id, wire.SaleStatusPaid))
	}
	second.flush()
	second.shutdown()
	first.shutdown() // waits for the zombie, whose outcome is fenced off
	for _, id := range []string{"A", "B", "C"} {
		k := "TRANSACTION_PAID:" + id
		if n := eff.get(k); n != 1 {
			t.Errorf("%s applied %d times, want 1", id, n)
		}
		if rec := second.get(k); rec.State != webhook.StateProcessed {
			t.Errorf("%s is %s", id, rec.State)
		}
	}
	first.allOK()
	second.allOK()
}

func e2eStoreRefuses(t *testing.T, open func() webhook.Store) {
	fs := &flakyStore{Store: open()}
	var eff effects
	r := newRig(t, fs, nil, func(c *webhook.Config) {
		c.Default = func(_ context.Context, ev *webhook.Event) error { eff.add(ev.Key); return nil }
	})
	fs.refuse.Store(true)
	r.sender.Send(txWire(wire.EventTransactionPaid, "s1", wire.SaleStatusPaid))
	r.flush()
	d := r.sender.Deliveries()
	if len(d) != 1 || d[0].Status != http.StatusServiceUnavailable || r.sender.Waiting() != 1 {
		t.Fatalf("with the store refusing: %+v", d)
	}
	fs.refuse.Store(false)
	r.clock.Advance(30 * time.Second)
	r.flush()
	r.waitOutcome("TRANSACTION_PAID:s1", webhook.StateProcessed)
	r.shutdown()
	if d := r.sender.Deliveries(); len(d) != 2 || !d[1].OK() {
		t.Errorf("resend: %+v", d)
	}
	if n := eff.get("TRANSACTION_PAID:s1"); n != 1 {
		t.Errorf("ran %d times", n)
	}
}

func e2eWrongToken(t *testing.T, open func() webhook.Store) {
	r := newRig(t, open(), nil, nil)
	bad := pagpolartest.NewWebhookSender(r.url, "not-the-token", pagpolartest.WithSenderClock(r.clock.(*pagpolartest.Clock)), pagpolartest.WithAttempts(2))
	defer bad.Close()
	bad.Send(txWire(wire.EventTransactionPaid, "s1", wire.SaleStatusPaid))
	if err := bad.Flush(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(30 * time.Second)
	if err := bad.Flush(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	for _, d := range bad.Deliveries() {
		if d.Status != http.StatusUnauthorized {
			t.Errorf("wrong token answered %d, want 401", d.Status)
		}
	}
	if n := len(bad.Deliveries()); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	rs, err := r.store.List(context.Background(), webhook.Filter{})
	if err != nil || len(rs) != 0 {
		t.Errorf("stored %d events (%v) from a wrong token, want 0", len(rs), err)
	}
}

func e2eBadBodies(t *testing.T, open func() webhook.Store) {
	r := newRig(t, open(), nil, func(c *webhook.Config) { c.MaxBodyBytes = 4 << 10 })
	post := func(body []byte) int {
		req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	big, _ := json.Marshal(map[string]any{"event": "TRANSACTION_PAID", "data": map[string]any{"transaction": map[string]any{"id": "s1"}}, "pad": strings.Repeat("x", 8<<10)})
	if code := post(big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized: %d, want 413", code)
	}
	for _, body := range []string{`{"event":`, `not json`, `{"event":"TRANSACTION_PAID","data":{"transaction":{"status":"paid"}}}`, `[]`} {
		if code := post([]byte(body)); code != http.StatusBadRequest {
			t.Errorf("%q: %d, want 400", body, code)
		}
	}
	if code := post(txEnv(wire.EventTransactionPaid, "ok", "paid")); code != http.StatusOK {
		t.Errorf("a good body after bad ones: %d", code)
	}
	rs, err := r.store.List(context.Background(), webhook.Filter{})
	if err != nil || len(rs) != 1 {
		t.Errorf("stored %d events (%v), want only the good one", len(rs), err)
	}
}
