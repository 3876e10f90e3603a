package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
	"github.com/pagpolar/pagpolar-go/webhook/redisinbox"
)

var exampleKey = webhook.PayloadKey{ID: "k1", Secret: bytes.Repeat([]byte{0x42}, 32)}

// TestReceiver runs the example on a free port and delivers to it with the
// fake's sender: a PAID, a duplicate PAID, and a CREATED that arrives last.
func TestReceiver(t *testing.T) {
	cfg := exampleConfig(t)
	receive(t, cfg)
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
	var payload []byte
	if err := db.QueryRow(`SELECT deliveries, payload FROM `+"pagpolar_webhook_inbox"+` WHERE dedupe_key = 'TRANSACTION_PAID:sale_1'`).Scan(&n, &payload); err != nil || n != 2 {
		t.Errorf("PAID deliveries %d (%v), want 2", n, err)
	}
	if id, ok := webhook.Sealed(payload); !ok || id != exampleKey.ID || bytes.Contains(payload, []byte("sale_1")) {
		t.Errorf("stored body not sealed with %s: %q", exampleKey.ID, payload)
	}
}

// TestReceiverOnSharedRedis keeps the events in the shared development
// Redis, which keeps nothing on disk: refused as it is, accepted once
// PAGPOLAR_WEBHOOK_REDIS_VOLATILE says so.
func TestReceiverOnSharedRedis(t *testing.T) {
	url := os.Getenv("PAGPOLAR_TEST_REDIS_URL")
	if url == "" {
		t.Skip("PAGPOLAR_TEST_REDIS_URL is not set")
	}
	cfg := exampleConfig(t)
	cfg.redisURL = url
	cfg.redisPrefix = fmt.Sprintf("pagpolar-test:example:%d", time.Now().UnixNano())
	t.Cleanup(func() { cleanRedis(t, url, cfg.redisPrefix) })
	if err := run(context.Background(), cfg, nil); !errors.Is(err, redisinbox.ErrVolatile) || !strings.Contains(err.Error(), "PAGPOLAR_WEBHOOK_REDIS_VOLATILE") {
		t.Fatalf("run on a Redis without an AOF: %v; want refused, naming PAGPOLAR_WEBHOOK_REDIS_VOLATILE", err)
	}
	cfg.redisVolatile = true
	receive(t, cfg)
	var listed bytes.Buffer
	if err := ops(context.Background(), cfg, func(s webhook.Store) error {
		return listEvents(context.Background(), s, webhook.StateProcessed, &listed)
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(listed.String(), "TRANSACTION_PAID:sale_1") || !strings.Contains(listed.String(), "TRANSACTION_CREATED:sale_1") {
		t.Errorf("-list processed on Redis:\n%s", listed.String())
	}
}

// cleanRedis removes every key under prefix from the shared Redis.
func cleanRedis(t *testing.T, url, prefix string) {
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	defer c.Close()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, "{"+prefix+"}:*", 500).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

func TestFromEnvWantsAPayloadChoice(t *testing.T) {
	t.Setenv("PAGPOLAR_WEBHOOK_TOKEN", "whk")
	t.Setenv("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS", "")
	t.Setenv("PAGPOLAR_WEBHOOK_PLAINTEXT", "")
	t.Setenv("PAGPOLAR_BASE_URL", "")
	t.Setenv("PAGPOLAR_CREDENTIAL_ID", "")
	t.Setenv("PAGPOLAR_TOKEN", "")
	var c config
	if err := c.fromEnv(); err == nil || !strings.Contains(err.Error(), "PAGPOLAR_WEBHOOK_PAYLOAD_KEYS") {
		t.Fatalf("fromEnv without payload keys: %v", err)
	}
	t.Setenv("PAGPOLAR_WEBHOOK_PLAINTEXT", "yes")
	if c = (config{}); c.fromEnv() != nil || !c.plaintext {
		t.Fatalf("PAGPOLAR_WEBHOOK_PLAINTEXT=yes: %+v", c)
	}
	t.Setenv("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS", "k2:"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)))
	if c = (config{}); c.fromEnv() != nil || len(c.payloadKeys) != 1 || c.payloadKeys[0].ID != "k2" {
		t.Fatalf("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS: %+v", c)
	}
}

// TestFromEnvSaysWhichAPI: with the API's three variables the receiver
// says it checks statuses against that base URL; with only some of them
// it refuses to start rather than silently check nothing.
func TestFromEnvSaysWhichAPI(t *testing.T) {
	t.Setenv("PAGPOLAR_WEBHOOK_TOKEN", "whk")
	t.Setenv("PAGPOLAR_WEBHOOK_PLAINTEXT", "yes")
	t.Setenv("PAGPOLAR_WEBHOOK_PAYLOAD_KEYS", "")
	t.Setenv("PAGPOLAR_BASE_URL", "http://127.0.0.1:9/v1")
	t.Setenv("PAGPOLAR_CREDENTIAL_ID", "cred_1")
	t.Setenv("PAGPOLAR_TOKEN", "tok")
	var logs bytes.Buffer
	c := config{log: slog.New(slog.NewTextHandler(&logs, nil))}
	err := c.fromEnv()
	defer c.close()
	if err != nil || c.api == nil || c.client == nil || !strings.Contains(logs.String(), "against the API at http://127.0.0.1:9/v1") ||
		!strings.Contains(logs.String(), "a temporary SQLite file") {
		t.Fatalf("err %v, api %v, log %q", err, c.api, logs.String())
	}
	c.close()
	// PAGPOLAR_STORE names the key store the events settle operations of.
	t.Setenv("PAGPOLAR_STORE", "sqlite:"+filepath.Join(t.TempDir(), "keys.db"))
	logs.Reset()
	if err := c.fromEnv(); err != nil || c.keys == nil || !strings.Contains(logs.String(), "key store in PAGPOLAR_STORE") {
		t.Fatalf("PAGPOLAR_STORE: err %v, log %q", err, logs.String())
	}
	c.close()
	t.Setenv("PAGPOLAR_STORE", "nosuch://x")
	if c = (config{log: c.log}); c.fromEnv() == nil {
		t.Fatal("a bad PAGPOLAR_STORE: want an error")
	}
	c.close()
	t.Setenv("PAGPOLAR_STORE", "")
	t.Setenv("PAGPOLAR_TOKEN", "")
	if c = (config{log: c.log}); c.fromEnv() == nil {
		t.Fatal("two of the three API variables: want an error")
	}
}

func exampleConfig(t *testing.T) config {
	return config{
		tokens:      []string{exampleToken},
		dbPath:      filepath.Join(t.TempDir(), "webhooks.db"),
		addr:        "127.0.0.1:0",
		log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		payloadKeys: []webhook.PayloadKey{exampleKey},
	}
}

const exampleToken = "whk_example"

// receive runs the receiver with cfg and delivers a CREATED (lost once, so
// it arrives after the PAID), a PAID and a duplicate PAID.
func receive(t *testing.T, cfg config) {
	t.Helper()
	const token = exampleToken
	outcomes := make(chan webhook.Record, 16)
	cfg.onOutcome = func(r webhook.Record) { outcomes <- r }
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
}

// TestListensOnLoopbackByDefault: without PAGPOLAR_WEBHOOK_ADDR the
// receiver listens on this machine only.
func TestListensOnLoopbackByDefault(t *testing.T) {
	host, _, err := net.SplitHostPort(defaultAddr)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Errorf("default address %q is not a loopback address", defaultAddr)
	}
}
