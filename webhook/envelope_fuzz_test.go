package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/pagpolar/pagpolar-go/webhook"
)

// FuzzParseEnvelope feeds arbitrary bodies to ParseEnvelope, DefaultKey and
// the handler (on a memory store, not started). The seed corpus is in
// testdata/fuzz/FuzzParseEnvelope. Properties:
//   - nothing panics; a rejection wraps ErrMalformed;
//   - an accepted envelope has an event, and the ids its key needs;
//   - re-encoding an accepted envelope parses to the same event and key;
//   - the handler answers 200 exactly when the body is an envelope that is
//     empty, a test event, or has a key (its own or the fallback key), and
//     stores exactly one event in the last case; otherwise 400 and nothing
//     stored.
func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"id":"e1","creation_date":"2031-01-01T00:00:00Z","event":"TRANSACTION_PAID","data":{"transaction":{"id":"s1","status":"paid","amount":9990}}}`))
	f.Add([]byte(`{"event":"SUBSCRIPTION_RENEWED","data":{"subscription":{"id":"sub1","next_billing_at":"2031-02-01T00:00:00Z"}}}`))
	f.Add([]byte(`{"event":"TRANSACTION_PAID"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		env, err := webhook.ParseEnvelope(body)
		var key string
		var dedupe bool
		var keyErr error
		if err != nil {
			if !errors.Is(err, webhook.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
		} else {
			key, dedupe, keyErr = checkEnvelope(t, env)
			if errors.Is(keyErr, webhook.ErrUseFallbackKey) {
				key, keyErr = webhook.FallbackKey(env, body)
				dedupe = true
				if keyErr == nil && !strings.HasPrefix(key, env.Event+":") {
					t.Fatalf("fallback key %q does not start with the event %q", key, env.Event)
				}
			}
		}

		store := webhook.NewMemoryStore()
		in, err2 := webhook.New(webhook.Config{
			Store: store, Tokens: []string{token}, Logger: quietLogger(), PlaintextPayloads: true,
			Default: func(context.Context, *webhook.Event) error { return nil },
		})
		if err2 != nil {
			t.Fatal(err2)
		}
		w := deliver(in, body, "Authorization", "Bearer "+token)
		stored, err3 := store.List(context.Background(), webhook.Filter{})
		if err3 != nil {
			t.Fatal(err3)
		}
		switch {
		case err != nil:
			if w.Code != http.StatusBadRequest || len(stored) != 0 {
				t.Fatalf("malformed body: %d, %d stored; want 400, none", w.Code, len(stored))
			}
		case env.Test || webhook.Empty(env):
			if w.Code != http.StatusOK || len(stored) != 0 {
				t.Fatalf("test or empty event: %d, %d stored; want 200, none", w.Code, len(stored))
			}
		case keyErr != nil:
			if w.Code != http.StatusBadRequest || len(stored) != 0 {
				t.Fatalf("event without a key (%v): %d, %d stored; want 400, none", keyErr, w.Code, len(stored))
			}
		default:
			if w.Code != http.StatusOK || len(stored) != 1 {
				t.Fatalf("event: %d, %d stored; want 200, 1", w.Code, len(stored))
			}
			if dedupe && stored[0].Key != key {
				t.Fatalf("stored under %q, want %q", stored[0].Key, key)
			}
			if string(stored[0].Payload) != string(body) {
				t.Fatalf("payload not stored as received")
			}
		}
	})
}

func checkEnvelope(t *testing.T, env *webhook.Envelope) (string, bool, error) {
	t.Helper()
	if env.Event == "" {
		t.Fatal("accepted an envelope without event")
	}
	if tx := env.Data.Transaction; tx != nil && (tx.ID == "" || tx.Identifier == "") {
		t.Fatalf("accepted a transaction without id: %+v", tx)
	}
	if sub := env.Data.Subscription; sub != nil && sub.ID == "" {
		t.Fatalf("accepted a subscription without id: %+v", sub)
	}
	key, dedupe, err := webhook.DefaultKey(env)
	switch {
	case err != nil:
		if !errors.Is(err, webhook.ErrMalformed) && !errors.Is(err, webhook.ErrUseFallbackKey) {
			t.Fatalf("key error %v wraps neither ErrMalformed nor ErrUseFallbackKey", err)
		}
	case dedupe && !strings.HasPrefix(key, env.Event+":"):
		t.Fatalf("key %q does not start with the event %q", key, env.Event)
	case !dedupe && key != "":
		t.Fatalf("no dedupe but key %q", key)
	}
	again, err2 := json.Marshal(env)
	if err2 != nil {
		t.Fatalf("re-encoding an accepted envelope: %v", err2)
	}
	env2, err2 := webhook.ParseEnvelope(again)
	if err2 != nil {
		t.Fatalf("re-encoded envelope rejected: %v\n%s", err2, again)
	}
	key2, dedupe2, keyErr2 := webhook.DefaultKey(env2)
	if env2.Event != env.Event || key2 != key || dedupe2 != dedupe || (keyErr2 == nil) != (err == nil) || webhook.Empty(env2) != webhook.Empty(env) {
		t.Fatalf("re-encoded envelope differs: %q %q %v / %q %q %v", env.Event, key, dedupe, env2.Event, key2, dedupe2)
	}
	return key, dedupe, err
}
