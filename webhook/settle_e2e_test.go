package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// A delivered event settles an unknown client operation.
// A subscribe whose answer is lost on an API without a subscription lookup
// ends "outcome unknown"; the fake's webhook sender then delivers the
// subscription's events to an inbox whose Settle is the client: the
// operation is settled succeeded, and the settling sent no request.
// Events that do not match (another offer, another method, a subscription
// older than the first send) leave an operation unknown.
func e2eSettlesUnknownSubscribe(t *testing.T, open func() webhook.Store) {
	clock, api, keys, client := settleClient(t, pagpolartest.WithoutSubscriptionLookup())
	ctx := ctxFor(t)
	cust := settleCustomer
	// An earlier charge went through: the client knows the API's clock.
	if _, err := client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "warm-up", Customer: cust}); err != nil {
		t.Fatal(err)
	}
	lost := func(ref string) {
		t.Helper()
		api.Inject(pagpolartest.Fault{Route: "subscribe", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
		_, err := client.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OfferID: "plan-basic", ExternalReference: ref, Customer: cust, PaymentMethod: "pix"})
		if !errors.Is(err, pagpolar.ErrOutcomeUnknown) {
			t.Fatalf("subscribe %s: %v, want ErrOutcomeUnknown (no subscription lookup)", ref, err)
		}
	}
	lost("sub-a")
	lost("sub-b")
	before := len(api.Events())

	r := newRig(t, open(), clock, func(c *webhook.Config) { c.Settle = client })
	sender := pagpolartest.NewWebhookSender(r.url, token, pagpolartest.WithSenderClock(clock))
	defer sender.Close()
	state := func(ref string) keystore.Record {
		rec, err := keys.Get(ctx, pagpolar.RecordID(api.CredentialID, "subscribe:"+ref))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	requests := len(api.Ledger().Requests)

	// Mismatching events about sub-b: another offer, another method, a
	// subscription created long before the first send.
	var subB wire.Subscription
	for _, ev := range api.Events()[:before] {
		if ev.Subscription != nil && ev.Subscription.ExternalReference == "sub-b" {
			subB = *ev.Subscription
		}
	}
	if subB.ID == "" {
		t.Fatal("no event for sub-b's subscription")
	}
	for i, mutate := range []func(*wire.Subscription){
		func(s *wire.Subscription) { s.ID += "-x0"; s.OfferIdentifier = "plan-pro" },
		func(s *wire.Subscription) { s.ID += "-x1"; s.PaymentMethod = "credit_card" },
		func(s *wire.Subscription) {
			s.ID += "-x2"
			s.CreatedAt = clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
		},
	} {
		s := subB
		mutate(&s)
		env := wire.WebhookEnvelope{Event: wire.EventSubscriptionCreated, Data: wire.WebhookData{Subscription: &s}}
		sender.Send(env)
		if err := sender.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		r.waitOutcome(wire.EventSubscriptionCreated+":"+s.ID, webhook.StateProcessed)
		if st := state("sub-b").State; st != keystore.StateUnknown {
			t.Fatalf("mismatching event %d settled sub-b: %s", i, st)
		}
	}

	// The real events: sub-a and sub-b are settled by them.
	var envs []wire.WebhookEnvelope
	for _, ev := range api.Events()[:before] {
		if ev.Subscription != nil {
			envs = append(envs, pagpolartest.EnvelopeFor(ev))
		}
	}
	sender.SendAll(envs)
	if err := sender.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, env := range envs {
		r.waitOutcome(env.Event+":"+env.Data.Subscription.ID, webhook.StateProcessed)
	}
	for _, ref := range []string{"sub-a", "sub-b"} {
		rec := state(ref)
		if rec.State != keystore.StateSucceeded || rec.ResultRef == "" {
			t.Fatalf("%s after its event: %s %q (%s)", ref, rec.State, rec.ResultRef, rec.Error)
		}
	}
	if n := len(api.Ledger().Requests) - requests; n != 0 {
		t.Fatalf("settling from events sent %d requests to the API, want 0", n)
	}
	// The same call now answers from the record.
	res, err := client.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-a", Customer: cust, PaymentMethod: "pix"})
	if err != nil || res.Operation.Source != pagpolar.SourceLocalRecord {
		t.Fatalf("after settling: %v", err)
	}
	if n := len(api.Ledger().Subscriptions); n != 2 {
		t.Fatalf("%d subscriptions, want 2", n)
	}

}

// An event that arrives while its operation is held by the worker still
// running the call settles nothing then (that worker's to settle); when
// the call then ends unknown and lets go, the event, kept in memory, is
// offered to Settle again and settles it — with no request, and without
// running the handler twice. Before settle_later.go the operation stayed
// unknown.
func e2eSettlesHeldLater(t *testing.T, open func() webhook.Store) {
	clock, api, keys, client := settleClient(t, pagpolartest.WithoutSubscriptionLookup())
	ctx := ctxFor(t)
	cust := settleCustomer
	if _, err := client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "warm-up", Customer: cust}); err != nil {
		t.Fatal(err)
	}
	api.Inject(pagpolartest.Fault{Route: "subscribe", Action: pagpolartest.FaultCommitThenDrop, Times: 1})
	_, err := client.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OfferID: "plan-basic", ExternalReference: "sub-held", Customer: cust, PaymentMethod: "pix"})
	if !errors.Is(err, pagpolar.ErrOutcomeUnknown) {
		t.Fatalf("subscribe: %v, want ErrOutcomeUnknown (no subscription lookup)", err)
	}
	id := pagpolar.RecordID(api.CredentialID, "subscribe:sub-held")
	// Another worker holds the operation (its call is still running).
	held, err := keys.Acquire(ctx, id, "worker-2", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var handled sync.Map
	r := newRig(t, open(), clock, func(c *webhook.Config) {
		c.Settle = client
		c.Default = func(_ context.Context, ev *webhook.Event) error {
			n, _ := handled.LoadOrStore(ev.Key, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return nil
		}
	})
	var envs []wire.WebhookEnvelope
	for _, ev := range api.Events() {
		if ev.Subscription != nil && ev.Subscription.ExternalReference == "sub-held" {
			envs = append(envs, pagpolartest.EnvelopeFor(ev))
		}
	}
	if len(envs) == 0 {
		t.Fatal("no event for the subscription")
	}
	requests := len(api.Ledger().Requests)
	r.sender.SendAll(envs)
	r.flush()
	for _, env := range envs {
		r.waitOutcome(env.Event+":"+env.Data.Subscription.ID, webhook.StateProcessed)
	}
	rec, err := keys.Get(ctx, id)
	if err != nil || rec.State != keystore.StateUnknown {
		t.Fatalf("while held: %s %v, want unknown (the holder's to settle)", rec.State, err)
	}
	// The worker's call ends unknown and lets go.
	if err := keys.Release(ctx, id, held.LeaseToken); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitFor)
	for {
		clock.Advance(time.Second)
		rec, err = keys.Get(ctx, id)
		if err == nil && rec.State == keystore.StateSucceeded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the worker let go: %s %q, want succeeded (settled by the event offered again)", rec.State, rec.Error)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(api.Ledger().Requests) - requests; n != 0 {
		t.Fatalf("settling from events sent %d requests, want 0", n)
	}
	handled.Range(func(k, v any) bool {
		if n := v.(*atomic.Int32).Load(); n != 1 {
			t.Errorf("handler ran %d times for %v, want 1", n, k)
		}
		return true
	})
}

// settleCustomer is the customer of the settling tests' charges.
var settleCustomer = pagpolar.Customer{Name: "Ana", Email: "ana@example.com", Document: "529.982.247-25"}

// settleClient is a fake API on a test clock (windows of 300 ms), a memory
// key store on the same clock and a client over both with short policy
// windows: the client a Config.Settle of the settling tests uses.
func settleClient(t *testing.T, opts ...pagpolartest.Option) (*pagpolartest.Clock, *pagpolartest.Server, *keystore.Memory, *pagpolar.Client) {
	t.Helper()
	clock := pagpolartest.NewClock()
	api := pagpolartest.NewServer(t, append([]pagpolartest.Option{pagpolartest.WithClock(clock), pagpolartest.WithProcessingWindow(300 * time.Millisecond)}, opts...)...)
	keys := keystore.NewMemoryWithClock(clock)
	client, err := pagpolar.NewClient(api.CredentialID, pagpolar.StaticToken(api.Token), pagpolar.WithBaseURL(api.URL), pagpolar.WithStore(keys),
		pagpolar.WithClock(clock), pagpolar.WithLogger(slog.New(slog.DiscardHandler)),
		pagpolar.WithRetryPolicy(pagpolar.RetryPolicy{ProcessingWindow: 300 * time.Millisecond, WindowMargin: 50 * time.Millisecond, SettleDelay: 60 * time.Millisecond,
			LookupInterval: 20 * time.Millisecond, MaxRetryAfter: 20 * time.Millisecond, AttemptTimeout: time.Second, LeaseTTL: 3 * time.Second, MaxSettleWait: 2 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return clock, api, keys, client
}

// A Playground test event through the inbox: with AcceptTestEvents (a staging
// receiver, or production with the Playground wired to it), a Playground
// test event reaches Config.Settle like a real one. process.go wraps the
// handler with SettleFromWebhook without looking at Event.Test, and
// SettleFromWebhook does not read the flag either (and cannot see the
// X-PagPolar-Test header at all). A test transaction naming the order's
// reference settles the unknown charge SUCCEEDED on a sale that does not
// exist; the next call answers it from the record. CONTRACT.md: "in
// production, discard test events before processing" — the SDK's own
// settling is processing.
func TestInbox_TestEventSettlesNoOperation(t *testing.T) {
	for _, how := range []string{"body-test-flag", "header-only"} {
		t.Run(how, func(t *testing.T) {
			clock, api, keys, client := settleClient(t)
			ctx := ctxFor(t)
			cust := settleCustomer
			if _, err := client.Payments.Pix(ctx, pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "warm-up", Customer: cust}); err != nil {
				t.Fatal(err)
			}
			// The charge is never processed, its lookups fail, the caller's
			// deadline ends: unknown, and no sale exists.
			api.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultDropBeforeProcessing, Times: 1})
			api.Inject(pagpolartest.Fault{Route: "get_sales", Action: pagpolartest.Fault500NoCommit})
			p := pagpolar.PixParams{OfferID: "offer-basic", ExternalReference: "PEDIDO-1234", Customer: cust}
			cctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
			_, err := client.Payments.Pix(cctx, p)
			cancel()
			if !errors.Is(err, pagpolar.ErrOutcomeUnknown) {
				t.Fatalf("charge: %v, want unknown", err)
			}
			api.ClearFaults()
			clock.Advance(5 * time.Second)

			r := newHarness(t, nil, clock, func(c *webhook.Config) { c.Settle = client; c.AcceptTestEvents = true }).start()
			now := clock.Now().UTC()
			env := map[string]any{
				"id": "evt_playground_1", "creation_date": now.Format(time.RFC3339), "event": wire.EventTransactionPaid,
				"data": map[string]any{"transaction": map[string]any{
					"id": "sale_playground_0001", "identifier": "sale_playground_0001", "status": "paid",
					"external_reference": "PEDIDO-1234", "payment_method": "pix", "offer_identifier": "offer-basic",
					"amount": 9990, "created_at": now.Format(time.RFC3339Nano),
				}},
			}
			var hdr []string
			if how == "body-test-flag" {
				env["test"] = true
			} else {
				hdr = []string{wire.HeaderTestEvent, "true"}
			}
			body, _ := json.Marshal(env)
			if w := r.post(body, hdr...); w.Code != 200 {
				t.Fatalf("delivery answered %d", w.Code)
			}
			r.waitOutcome("test:"+wire.EventTransactionPaid+":sale_playground_0001", webhook.StateProcessed)
			rec, err := keys.Get(ctx, pagpolar.RecordID(api.CredentialID, "pix:PEDIDO-1234"))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("the charge's record after the test event: %s %q", rec.State, rec.ResultRef)
			if rec.State == keystore.StateSucceeded {
				t.Errorf("SUCCEEDED WITHOUT EFFECT: a Playground test event settled the real charge on sale %q; sales in the ledger under the reference: %d",
					rec.ResultRef, salesUnderRef(api, "PEDIDO-1234"))
			}
		})
	}
}

func salesUnderRef(api *pagpolartest.Server, ref string) int {
	n := 0
	for _, s := range api.Ledger().Sales {
		if s.ExternalReference == ref {
			n++
		}
	}
	return n
}
