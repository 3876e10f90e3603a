package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// TestReceiver runs the example on a free port and delivers to it with the
// fake's sender: a PAID, a duplicate PAID, and a CREATED that arrives last.
func TestReceiver(t *testing.T) {
	const token = "whk_example"
	outcomes := make(chan webhook.Record, 16)
	cfg := config{
		tokens:    []string{token},
		dbPath:    filepath.Join(t.TempDir(), "webhooks.db"),
		addr:      "127.0.0.1:0",
		log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		onOutcome: func(r webhook.Record) { outcomes <- r },
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	url := "http://" + addr + "/webhooks/pagpolar"

	clock := pagpolartest.NewClock()
	sender := pagpolartest.NewWebhookSender(url, token, pagpolartest.WithSenderClock(clock), pagpolartest.WithDuplicatePaid(),
		pagpolartest.WithLoss(func(env wire.WebhookEnvelope, attempt int) bool {
			return env.Event == wire.EventTransactionCreated && attempt == 1
		}))
	defer sender.Close()
	sale := func(event, status string) wire.WebhookEnvelope {
		return wire.WebhookEnvelope{Event: event, Data: wire.WebhookData{Transaction: &wire.WebhookTransaction{
			ID: "sale_1", Sale: wire.Sale{Identifier: "sale_1", Status: status}}}}
	}
	sender.Send(sale(webhook.EventTransactionCreated, wire.SaleStatusPending))
	sender.Send(sale(webhook.EventTransactionPaid, wire.SaleStatusPaid))
	flushCtx, stopFlush := context.WithTimeout(context.Background(), 30*time.Second)
	defer stopFlush()
	if err := sender.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	wait := func(key string) {
		t.Helper()
		for {
			select {
			case r := <-outcomes:
				if r.Key == key && r.State == webhook.StateProcessed {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("%s not processed", key)
			}
		}
	}
	wait("TRANSACTION_PAID:sale_1")
	clock.Advance(30 * time.Second) // the lost CREATED comes back
	if err := sender.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	wait("TRANSACTION_CREATED:sale_1")

	// A wrong token is refused.
	req, _ := http.NewRequest(http.MethodPost, url, nil)
	req.Header.Set("Authorization", "Bearer nope")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, d := range sender.Deliveries() {
		if d.Err != nil && d.Attempt == 1 && d.Event == webhook.EventTransactionCreated {
			continue // the loss we asked for
		}
		if !d.OK() {
			t.Errorf("delivery %+v refused", d)
		}
	}
	// The order is paid: the late CREATED did not move it back.
	db, _, err := openDB(context.Background(), cfg.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var status string
	if err := db.QueryRow(`SELECT status FROM orders WHERE sale_id = 'sale_1'`).Scan(&status); err != nil || status != "paid" {
		t.Errorf("order status %q (%v), want paid", status, err)
	}
	var n int
	if err := db.QueryRow(`SELECT deliveries FROM ` + "pagpolar_webhook_inbox" + ` WHERE dedupe_key = 'TRANSACTION_PAID:sale_1'`).Scan(&n); err != nil || n != 2 {
		t.Errorf("PAID deliveries %d (%v), want 2", n, err)
	}
}
