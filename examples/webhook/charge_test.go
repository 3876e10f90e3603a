package main

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/keystore"
	"github.com/pagpolar/pagpolar-go/keystore/storeurl"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
)

// TestChargeSettledByItsEvent runs -charge as against `pagpolar sim
// -webhook-url ... -hold 1`: the fake keeps the PIX charge in processing
// (its 60 s window, as the sim's), the client gives up with "outcome
// unknown", and only then — the test moves the fake's clock past the hold —
// is the sale created and its TRANSACTION_CREATED delivered by the fake's
// webhook sender to the example's receiver, whose Settle is the client
// sharing the key store. The operation must go from unknown to succeeded
// with the ledger's only sale, settled from the event (the client's hook
// says so), with no request sent after the call ended.
func TestChargeSettledByItsEvent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clock := pagpolartest.NewClock()
	api := pagpolartest.NewServer(t, pagpolartest.WithClock(clock))
	api.Inject(pagpolartest.Fault{Route: "pix", Action: pagpolartest.FaultHold, Delay: 10 * time.Minute})

	cfg := exampleConfig(t)
	keys, closeKeys, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "keys.db")+"?declared_new=test")
	if err != nil {
		t.Fatal(err)
	}
	defer closeKeys()
	settledBy := make(chan pagpolar.Source, 4)
	client, sent, err := newClient(api.URL, api.CredentialID, pagpolar.StaticToken(api.Token), keys, cfg.log,
		pagpolar.WithHook(func(_ context.Context, e pagpolar.Event) {
			if e.Kind == pagpolar.EventSettle {
				settledBy <- e.Source
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.client, cfg.keys, cfg.sent, cfg.cred, cfg.offerID = client, keys, sent, api.CredentialID, "offer-basic"
	const ref = "PEDIDO-WH-1"
	id := pagpolar.RecordID(api.CredentialID, "pix:"+ref)

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := chargeAndSettle(ctx, cfg, ref, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	var (
		out    strings.Builder
		mark   time.Time // when the charge had ended, on the fake's clock
		sender *pagpolartest.WebhookSender
	)
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		out.WriteString(line + "\n")
		switch {
		case strings.HasPrefix(line, "receiving webhooks at "):
			sender = pagpolartest.NewWebhookSenderFor(api, strings.TrimPrefix(line, "receiving webhooks at "), exampleToken)
			defer sender.Close()
		case strings.Contains(line, "waiting for PagPolar's webhook event"):
			// The call has ended: the record is unknown, nobody holds it.
			rec, err := keys.Get(ctx, id)
			if err != nil || rec.State != keystore.StateUnknown || rec.LeaseOwner != "" && rec.LeaseExpiresAt.After(time.Now()) {
				t.Fatalf("after the call: %+v %v, want unknown and not held", rec, err)
			}
			if n := len(api.Ledger().Sales); n != 0 {
				t.Fatalf("%d sales before the hold ended", n)
			}
			mark = clock.Now()
			if err := api.WaitHolds(ctx, 1); err != nil {
				t.Fatal(err)
			}
			clock.Advance(10 * time.Minute) // the API ends processing: the sale and its event
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("chargeAndSettle: %v\n%s", err, out.String())
	}
	rec, err := keys.Get(ctx, id)
	l := api.Ledger()
	if err != nil || rec.State != keystore.StateSucceeded || len(l.Sales) != 1 || rec.ResultRef != l.Sales[0].Identifier {
		t.Fatalf("record %+v (%v), sales %+v", rec, err, l.Sales)
	}
	// The operation was settled by the event, not by a lookup: the first
	// settle the client reports is "webhook", and nothing reached the API
	// after the call ended.
	if src := <-settledBy; src != pagpolar.SourceWebhook {
		t.Errorf("settled from %s, want webhook", src)
	}
	for _, r := range l.Requests {
		if !r.At.Before(mark) {
			t.Errorf("a request after the charge's call ended: %s %s", r.Method, r.Path)
		}
	}
	for _, want := range []string{
		"the charge's outcome is unknown",
		"is unknown; waiting for PagPolar's webhook event",
		"is succeeded, sale " + rec.ResultRef + ": settled by the event; requests the client sent meanwhile: 0",
		"the same call again: sale " + rec.ResultRef + ", answered from local_record (no request)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	t.Logf("output:\n%s", out.String())
}
