package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// chargePolicy gives up quickly, as a checkout request that cannot wait
// would: 2 s per attempt and 3 s in all, where the defaults wait 30 s and
// outlast the API's 60 s in-processing window. A charge the API is still
// processing then ends "outcome unknown" instead of waiting for it; its
// webhook event settles it later. Keep the defaults in production, unless
// your receiver settles (Config.Settle) what such a caller leaves.
var chargePolicy = pagpolar.RetryPolicy{AttemptTimeout: 2 * time.Second, MaxSettleWait: 3 * time.Second}

// newClient is the API client of the receiver (and of -charge): its key
// store is the one the receiver settles from events. sent counts the HTTP
// requests it sends.
func newClient(base, cred string, tok pagpolar.TokenSource, keys keystore.Store, log *slog.Logger, opts ...pagpolar.Option) (*pagpolar.Client, *atomic.Int64, error) {
	sent := new(atomic.Int64)
	counting := &http.Client{Transport: countingTransport{next: http.DefaultTransport, n: sent}}
	c, err := pagpolar.NewClient(cred, tok, append([]pagpolar.Option{pagpolar.WithBaseURL(base), pagpolar.WithStore(keys), pagpolar.WithLogger(log),
		pagpolar.WithRetryPolicy(chargePolicy), pagpolar.WithHTTPClient(counting)}, opts...)...)
	return c, sent, err
}

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}

// chargeAndSettle is -charge: it starts the receiver, charges one PIX
// order whose answer is lost, waits until the order's webhook event has
// settled it in the key store, shows that the same call is then answered
// from the store, and stops the receiver.
func chargeAndSettle(ctx context.Context, cfg config, ref string, out io.Writer) error {
	if cfg.client == nil {
		return errors.New("-charge needs an API: load the variables `pagpolar sim -webhook-url ...` prints (README.md)")
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	ready, done := make(chan string, 1), make(chan error, 1)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { done <- run(rctx, cfg, ready) }()
	select {
	case addr := <-ready:
		if host, port, err := net.SplitHostPort(addr); err == nil && (net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified()) {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		fmt.Fprintf(out, "receiving webhooks at http://%s/webhooks/pagpolar\n", addr)
	case err := <-done:
		return err
	}
	order := pagpolar.PixParams{OfferID: cfg.offerID, ExternalReference: ref,
		Customer: pagpolar.Customer{Name: "Maria Silva", Email: "maria@exemplo.com", Document: "123.456.789-09"}}
	if err := chargeLost(ctx, cfg.client, order, out); err != nil {
		return err
	}
	rec, err := waitSettled(ctx, cfg.keys, cfg.sent, pagpolar.RecordID(cfg.cred, "pix:"+ref), out)
	if err != nil {
		return err
	}
	again, err := cfg.client.Payments.Pix(ctx, order)
	if err != nil {
		return fmt.Errorf("the same call again: %w", err)
	}
	fmt.Fprintf(out, "the same call again: sale %s, answered from %s (no request)\n", again.Sale.ID, again.Operation.Source)
	if again.Sale.ID != rec.ResultRef {
		return fmt.Errorf("the same call answered sale %s, the event settled %s", again.Sale.ID, rec.ResultRef)
	}
	stop()
	return <-done
}

// chargeLost charges order and returns once the call has ended "outcome
// unknown" (against `pagpolar sim -hold 1`: the API is still processing
// it when the client gives up, and the lookups do not find it yet).
func chargeLost(ctx context.Context, client *pagpolar.Client, order pagpolar.PixParams, out io.Writer) error {
	fmt.Fprintf(out, "charging order %s by PIX (offer %s)...\n", order.ExternalReference, order.OfferID)
	ch, err := client.Payments.Pix(ctx, order)
	switch {
	case err == nil:
		return fmt.Errorf("the charge succeeded (sale %s, from %s): nothing left for an event to settle; run the sim with -hold 1 -hold-delay 15s (README.md)", ch.Sale.ID, ch.Operation.Source)
	case !errors.Is(err, pagpolar.ErrOutcomeUnknown):
		return fmt.Errorf("the charge: %w", err)
	}
	fmt.Fprintf(out, "the charge's outcome is unknown: %v\n", err)
	return nil
}

// waitSettled waits, reading the key store every 200 ms, until the record
// id is settled (here: by the receiver, from the order's event), and says
// how many requests the client sent meanwhile.
func waitSettled(ctx context.Context, keys keystore.Store, sent *atomic.Int64, id string, out io.Writer) (keystore.Record, error) {
	rec, err := keys.Get(ctx, id)
	if err != nil {
		return rec, err
	}
	fmt.Fprintf(out, "key store: %s is %s; waiting for PagPolar's webhook event about it...\n", id, rec.State)
	before := sent.Load()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !rec.State.Settled() {
		select {
		case <-ctx.Done():
			return rec, fmt.Errorf("%s is still %s: %w (call Pix again with the same params, or `pagpolar ops settle`, to settle it by lookup)", id, rec.State, ctx.Err())
		case <-tick.C:
		}
		if rec, err = keys.Get(ctx, id); err != nil {
			return rec, err
		}
	}
	fmt.Fprintf(out, "key store: %s is %s, sale %s: settled by the event; requests the client sent meanwhile: %d\n", id, rec.State, rec.ResultRef, sent.Load()-before)
	return rec, nil
}
