package webhook_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
	"github.com/pagpolar/pagpolar-go/webhook/sqlinbox"
)

// A backend opens handles on one inbox's data: each call of open is a new
// process's view of the same events (a restart).
type backend struct {
	name string
	new  func(t testing.TB) (open func() webhook.Store)
}

func randomName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func backends() []backend {
	return []backend{
		{"memory", func(t testing.TB) func() webhook.Store {
			s := webhook.NewMemoryStore()
			return func() webhook.Store { return s }
		}},
		{"sqlite", func(t testing.TB) func() webhook.Store {
			path := filepath.Join(t.TempDir(), "inbox.db")
			return func() webhook.Store {
				s, err := sqlinbox.OpenSQLite(path)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				if err := s.Migrate(context.Background()); err != nil {
					t.Fatal(err)
				}
				return s
			}
		}},
		{"postgres", func(t testing.TB) func() webhook.Store {
			dsn := os.Getenv("PAGPOLAR_TEST_POSTGRES_DSN")
			if dsn == "" {
				t.Skip("PAGPOLAR_TEST_POSTGRES_DSN is not set: skipping PostgreSQL")
			}
			table := "inbox_e2e_" + randomName()
			t.Cleanup(func() {
				db, err := sql.Open("pgx", dsn)
				if err == nil {
					_, err = db.Exec("DROP TABLE IF EXISTS " + table)
					_ = db.Close()
				}
				if err != nil {
					t.Errorf("drop %s: %v", table, err)
				}
			})
			return func() webhook.Store {
				s, err := sqlinbox.OpenPostgres(dsn, sqlinbox.WithTable(table))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				if err := s.Migrate(context.Background()); err != nil {
					t.Fatalf("PostgreSQL at PAGPOLAR_TEST_POSTGRES_DSN: %v", err)
				}
				return s
			}
		}},
		{"redis", func(t testing.TB) func() webhook.Store {
			url := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
			if url == "" {
				t.Skip("PAGPOLAR_TEST_REDIS_URL is not set: skipping Redis")
			}
			prefix := "pagpolar-test:e2e:" + randomName()
			t.Cleanup(func() {
				o, _ := redis.ParseURL(url)
				c := redis.NewClient(o)
				defer c.Close()
				ctx := context.Background()
				iter := c.Scan(ctx, 0, "{"+prefix+"}:*", 500).Iterator()
				for iter.Next(ctx) {
					c.Del(ctx, iter.Val())
				}
			})
			return func() webhook.Store {
				// The shared test Redis keeps nothing on disk: opted out by name
				// (redisinbox's own tests check a private Redis with an AOF).
				s, err := redisinbox.NewFromURL(url, redisinbox.WithPrefix(prefix), redisinbox.WithLogger(quietLogger()), redisinbox.AllowVolatile())
				if err != nil {
					t.Fatalf("Redis at PAGPOLAR_TEST_REDIS_URL: %v", err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		}},
		{"redis-cluster", func(t testing.TB) func() webhook.Store {
			nodes := os.Getenv("PAGPOLAR_TEST_REDIS_CLUSTER")
			if nodes == "" {
				t.Skip("PAGPOLAR_TEST_REDIS_CLUSTER is not set: skipping the Redis Cluster (.ci/run starts one)")
			}
			prefix := "pagpolar-test:e2e:" + randomName()
			t.Cleanup(func() {
				c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ",")})
				ctx := context.Background()
				_ = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
					iter := m.Scan(ctx, 0, "{"+prefix+"}:*", 500).Iterator()
					for iter.Next(ctx) {
						m.Del(ctx, iter.Val())
					}
					return nil
				})
				_ = c.Close()
			})
			return func() webhook.Store {
				// One client per Store (Close closes it); the CI Cluster keeps
				// an append-only file: no opt-out.
				s, err := redisinbox.New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ",")}),
					redisinbox.WithPrefix(prefix), redisinbox.WithLogger(quietLogger()))
				if err != nil {
					t.Fatalf("Redis Cluster at PAGPOLAR_TEST_REDIS_CLUSTER: %v", err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		}},
	}
}

// TestInboxWithSender drives the handler over HTTP with the fake's webhook
// sender, on every store.
func TestInboxWithSender(t *testing.T) {
	scenarios := []struct {
		name string
		fn   func(t *testing.T, open func() webhook.Store)
	}{
		{"DuplicatesAndResendEverything", e2eDuplicates},
		{"ConcurrentDuplicates", e2eConcurrentDuplicates},
		{"CreatedAfterPaid", e2eCreatedAfterPaid},
		{"FailsThenSucceeds", e2eFailsThenSucceeds},
		{"AlwaysFailsGoesDead", e2eDead},
		{"SlowHandlerFastAnswer", e2eSlowHandler},
		{"RestartMidway", e2eRestart},
		{"StoreRefusesWrites", e2eStoreRefuses},
		{"WrongToken", e2eWrongToken},
		{"OversizedAndMalformed", e2eBadBodies},
		{"FakeServerEvents", e2eFakeServer},
		{"ShutdownHandBacksAreNotAttempts", e2eShutdownHandBacks},
		{"RenewedWithoutNextBilling", e2eRenewedFallback},
		{"PayloadSealedAtRest", e2eSealed},
		{"ReapProcessedAndDead", e2eReap},
		{"SettlesUnknownSubscribe", e2eSettlesUnknownSubscribe},
		{"SettlesHeldOperationLater", e2eSettlesHeldLater},
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.fn(t, b.new(t)) })
			}
		})
	}
}

// rig is an Inbox behind an HTTP server and a sender posting to it, on one clock.
type rig struct {
	*harness
	url    string
	sender *pagpolartest.WebhookSender
}

func newRig(t *testing.T, store webhook.Store, clock *pagpolartest.Clock, edit func(*webhook.Config), opts ...pagpolartest.SenderOption) *rig {
	t.Helper()
	if clock == nil {
		clock = pagpolartest.NewClock()
	}
	h := newHarness(t, store, clock, edit).start()
	srv := httptest.NewServer(h.in)
	t.Cleanup(srv.Close)
	s := pagpolartest.NewWebhookSender(srv.URL, token, append([]pagpolartest.SenderOption{pagpolartest.WithSenderClock(clock)}, opts...)...)
	t.Cleanup(s.Close)
	return &rig{harness: h, url: srv.URL, sender: s}
}

func (r *rig) flush() {
	r.t.Helper()
	if err := r.sender.Flush(ctxFor(r.t)); err != nil {
		r.t.Fatal(err)
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

func txWire(event, id, status string) wire.WebhookEnvelope {
	return wire.WebhookEnvelope{Event: event, Data: wire.WebhookData{Transaction: &wire.WebhookTransaction{
		ID: id, Sale: wire.Sale{Identifier: id, Status: status, PaymentMethod: wire.MethodPix, Amount: 9990},
	}}}
}

// allOK checks that every attempt the sender made was answered 200.
func (r *rig) allOK() {
	r.t.Helper()
	for _, d := range r.sender.Deliveries() {
		if !d.OK() {
			r.t.Errorf("attempt %+v was not accepted", d)
		}
	}
}

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

var errCut = fmt.Errorf("%w: the process is gone", webhook.ErrUnavailable)

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
