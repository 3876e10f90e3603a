package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/internal/report"
	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// settleByWebhooks is the demo's last phase, run when operations are still
// "outcome unknown" once the reconciler has given up: PagPolar's webhook
// events settle them. Every event the fake emitted for the credential
// during the run is delivered by the fake's webhook sender (a new envelope
// per attempt, concurrently, out of order) to a webhook.Inbox whose Settle
// is the demo's client, sharing its key store. Everything reported is
// measured: the unknown records are read from the store before and after,
// and the requests are those the fake received during the phase.
//
// It returns the operations the events settled.
func settleByWebhooks(ctx context.Context, c *pagpolar.Client, store keystore.Store, srv *pagpolartest.Server, show func(line func(time.Duration) string) *progress) (*report.Webhooks, []string, error) {
	start := time.Now()
	recs, err := store.List(ctx, keystore.Filter{States: []keystore.State{keystore.StateUnknown}, Prefix: pagpolar.RecordID(srv.CredentialID, ""), Limit: 1 << 20})
	if err != nil {
		return nil, nil, fmt.Errorf("listing the unknown operations: %w", err)
	}
	w := &report.Webhooks{UnknownBefore: len(recs)}
	if len(recs) == 0 {
		return w, nil, nil
	}
	const token = "whk_demo"
	inbox, err := webhook.New(webhook.Config{
		Store:             webhook.NewMemoryStore(),
		Tokens:            []string{token},
		PlaintextPayloads: true,
		Default:           func(context.Context, *webhook.Event) error { return nil }, // the shop's handlers: nothing to do here
		Settle:            c,
		PollInterval:      50 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return nil, nil, err
	}
	if err := inbox.Start(); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = inbox.Shutdown(context.Background())
		return nil, nil, err
	}
	hs := &http.Server{Handler: inbox, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
		_ = inbox.Shutdown(sctx)
	}()

	var (
		envs    []wire.WebhookEnvelope
		settled []string
	)
	for _, ev := range srv.Events() {
		if ev.CredentialID == srv.CredentialID {
			envs = append(envs, pagpolartest.EnvelopeFor(ev))
		}
	}
	w.Events = len(envs)
	p := show(func(el time.Duration) string {
		return fmt.Sprintf("webhook events: delivering the run's %d events to an inbox whose Settle is the client (%d operations unknown), %s",
			len(envs), len(recs), el.Round(100*time.Millisecond))
	})
	defer p.stop()
	mark := srv.Clock.Now()
	sender := pagpolartest.NewWebhookSender("http://"+ln.Addr().String()+"/", token, pagpolartest.WithSenderClock(srv.Clock))
	defer sender.Close()
	sender.SendAll(envs)
	if err := sender.Flush(ctx); err != nil {
		return nil, nil, err
	}
	// Every delivery is answered (stored, or refused); wait until the
	// inbox has run every stored event.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := inbox.List(ctx, webhook.Filter{States: []webhook.State{webhook.StateReceived, webhook.StateProcessing, webhook.StateError}, Limit: 1})
		if err != nil {
			return nil, nil, err
		}
		if len(left) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("waiting for the inbox to process the events: %w", ctx.Err())
		case <-tick.C:
		}
	}
	for _, d := range sender.Deliveries() {
		w.Deliveries++
		if !d.OK() {
			w.Refused++
		}
	}
	for _, r := range recs {
		now, err := store.Get(ctx, r.OperationID)
		switch {
		case errors.Is(err, keystore.ErrNotFound):
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("reading %s: %w", r.OperationID, err)
		case now.State == keystore.StateUnknown:
			w.StillUnknown++
		case now.State == keystore.StateSucceeded:
			w.Settled++ // events settle only successes
			if _, op, ok := pagpolar.SplitRecordID(r.OperationID); ok {
				settled = append(settled, op)
			}
		default:
			w.Other = append(w.Other, fmt.Sprintf("%s: unknown, then %s", r.OperationID, now.State))
		}
	}
	for _, r := range srv.Ledger().Requests {
		if r.CredentialID == srv.CredentialID && !r.At.Before(mark) {
			w.Requests++
		}
	}
	w.MS = float64(time.Since(start).Microseconds()) / 1000
	return w, settled, nil
}

// carryOn runs again, as the order system's background job would, the
// orders whose first operation an event settled: their refund or plan
// change had waited for it. It returns how many orders it ran.
func carryOn(ctx context.Context, run *orderRunner, seed int64, n int, settled []string, res *results, conc int) int {
	want := map[string]bool{}
	for _, op := range settled {
		want[op] = true
	}
	var orders []int
	for i := range n {
		if want[chargeOpID(orderAt(seed, i))] {
			orders = append(orders, i)
		}
	}
	forEachOrder(ctx, len(orders), conc, func(k int) {
		for _, o := range run.process(ctx, orderAt(seed, orders[k])) {
			res.set(o)
		}
	})
	return len(orders)
}
