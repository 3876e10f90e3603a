package webhook_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/webhook"
)

const customerBody = `{"id":"evt_9","event":"TRANSACTION_PAID","data":{"transaction":{"id":"sale_9","status":"paid","customer":{"name":"Maria Silva","email":"maria@exemplo.com","document":"123.456.789-09"}}}}`

// Stored payloads are sealed: the store holds no customer data in clear,
// the handler gets the body as received.
func TestPayloadSealedAtRest(t *testing.T) {
	seen := make(chan []byte, 1)
	h := newHarness(t, nil, nil, func(c *webhook.Config) {
		c.Default = func(_ context.Context, ev *webhook.Event) error { seen <- ev.Raw; return nil }
	}).start()
	if w := h.post([]byte(customerBody)); w.Code != http.StatusOK {
		t.Fatalf("%d", w.Code)
	}
	r := h.waitOutcome("TRANSACTION_PAID:sale_9", webhook.StateProcessed)
	if raw := <-seen; string(raw) != customerBody {
		t.Errorf("handler saw %q, want the body as received", raw)
	}
	stored := h.get(r.Key)
	for _, pii := range []string{"Maria", "maria@exemplo.com", "123.456.789-09", "sale_9"} {
		if bytes.Contains(stored.Payload, []byte(pii)) {
			t.Errorf("stored payload holds %q in clear", pii)
		}
	}
	if id, ok := webhook.Sealed(stored.Payload); !ok || id != testKey.ID {
		t.Errorf("Sealed = %q, %v; want %q, true", id, ok, testKey.ID)
	}
	if plain, err := h.in.Payload(stored); err != nil || string(plain) != customerBody {
		t.Errorf("Inbox.Payload = %q, %v", plain, err)
	}
	// Only the right key opens it, only on its own record.
	if _, err := webhook.OpenPayload(stored); !errors.Is(err, webhook.ErrPayloadKeyMissing) {
		t.Errorf("OpenPayload without keys: %v, want ErrPayloadKeyMissing", err)
	}
	wrong := webhook.PayloadKey{ID: testKey.ID, Secret: bytes.Repeat([]byte{1}, 32)}
	if _, err := webhook.OpenPayload(stored, wrong); !errors.Is(err, webhook.ErrPayloadCorrupt) {
		t.Errorf("OpenPayload with another secret under the same ID: %v, want ErrPayloadCorrupt", err)
	}
	moved := stored
	moved.Key = "TRANSACTION_PAID:other"
	if _, err := webhook.OpenPayload(moved, testKey); !errors.Is(err, webhook.ErrPayloadCorrupt) {
		t.Errorf("a payload copied onto another record opened: %v", err)
	}
}

// Keys rotate: events sealed with the old key still run once the new key
// seals, as long as the old key is kept after it.
func TestPayloadKeyRotation(t *testing.T) {
	newKey := webhook.PayloadKey{ID: "test-2", Secret: bytes.Repeat([]byte{0x33}, 32)}
	store := webhook.NewMemoryStore()
	old := newHarness(t, store, nil, nil) // seals with testKey, not started
	if w := old.post([]byte(customerBody)); w.Code != http.StatusOK {
		t.Fatal(w.Code)
	}
	seen := make(chan []byte, 2)
	rotated := newHarness(t, store, nil, func(c *webhook.Config) {
		c.PayloadKeys = []webhook.PayloadKey{newKey, testKey}
		c.Default = func(_ context.Context, ev *webhook.Event) error { seen <- ev.Raw; return nil }
	}).start()
	second := strings.Replace(customerBody, "sale_9", "sale_10", 1)
	rotated.post([]byte(second))
	rotated.waitOutcome("TRANSACTION_PAID:sale_9", webhook.StateProcessed)
	rotated.waitOutcome("TRANSACTION_PAID:sale_10", webhook.StateProcessed)
	if id, _ := webhook.Sealed(rotated.get("TRANSACTION_PAID:sale_10").Payload); id != newKey.ID {
		t.Errorf("new event sealed with %q, want the first key %q", id, newKey.ID)
	}
	got := map[string]bool{string(<-seen): true, string(<-seen): true}
	if !got[customerBody] || !got[second] {
		t.Errorf("handler saw %v", got)
	}
}

// A process without the key an event was sealed with does not kill it: the
// attempt fails and is retried (another process, or the next deploy, may
// have the key); a payload that does not authenticate is dead.
func TestPayloadWithUnknownKeyIsRetried(t *testing.T) {
	store := webhook.NewMemoryStore()
	old := newHarness(t, store, nil, nil)
	old.post([]byte(customerBody))
	other := webhook.PayloadKey{ID: "other", Secret: bytes.Repeat([]byte{7}, 32)}
	h := newHarness(t, store, nil, func(c *webhook.Config) {
		c.PayloadKeys = []webhook.PayloadKey{other}
		c.Default = func(context.Context, *webhook.Event) error { t.Error("handler ran on an unopened payload"); return nil }
	}).start()
	r := h.waitOutcome("TRANSACTION_PAID:sale_9", webhook.StateError)
	if !strings.Contains(r.LastError, "not configured") || strings.Contains(r.LastError, "Maria") {
		t.Errorf("LastError %q", r.LastError)
	}
}

func TestParsePayloadKeys(t *testing.T) {
	k1 := bytes.Repeat([]byte{1}, 32)
	k2 := bytes.Repeat([]byte{2}, 32)
	keys, err := webhook.ParsePayloadKeys("k2:" + base64.StdEncoding.EncodeToString(k2) + ", k1:" + base64.RawURLEncoding.EncodeToString(k1))
	if err != nil || len(keys) != 2 || keys[0].ID != "k2" || !bytes.Equal(keys[0].Secret, k2) || keys[1].ID != "k1" || !bytes.Equal(keys[1].Secret, k1) {
		t.Fatalf("ParsePayloadKeys = %+v, %v", keys, err)
	}
	secret := base64.StdEncoding.EncodeToString(k1)
	for _, bad := range []string{"", "nocolon", "k1:" + base64.StdEncoding.EncodeToString(k1[:16]), "k1:!!!", ":" + secret, "k1:" + secret + ",k1:" + secret, "bad id:" + secret} {
		_, err := webhook.ParsePayloadKeys(bad)
		if err == nil {
			t.Errorf("ParsePayloadKeys(%q) succeeded", bad)
			continue
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q quotes the secret", err)
		}
	}
}
