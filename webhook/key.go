package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// KeyFunc returns the dedupe key of an event. dedupe = false means the event
// must not be deduped: every delivery is stored and processed on its own (its
// key is then ignored). An error wrapping ErrUseFallbackKey makes the Inbox
// store the event under FallbackKey; any other error makes it answer 400.
//
// Keys must be stable across delivery attempts: never use the envelope id or
// creation_date, which change on every attempt.
type KeyFunc func(env *Envelope) (key string, dedupe bool, err error)

// ErrUseFallbackKey is returned by a KeyFunc for an event that lacks the
// field its key needs but must still be stored (answering 400 would make
// PagPolar resend it forever): the Inbox keys it with FallbackKey.
var ErrUseFallbackKey = errors.New("webhook: the key's field is missing: use the fallback key")

// FallbackKey is the dedupe key of an event whose own key field is missing:
//
//	event:<data.subscription.id or data.transaction.id>:data-<hash>
//
// where hash is the first 32 hex digits of the SHA-256 of the delivery's
// "data" member in canonical JSON (object keys sorted, no insignificant
// space, numbers as written). A resend of the event (a new id and
// creation_date, the same data) gets the same key and is deduped; a delivery
// whose data differs in any field, known to this SDK or not, is a new event.
// So a resend carrying newer data is processed again: handlers compare
// statuses anyway (see Ranking). This is an SDK decision, not PagPolar's
// table (CONTRACT.md marks it [assumed]).
func FallbackKey(env *Envelope, body []byte) (string, error) {
	var raw struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return "", fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	canon, err := canonicalJSON(raw.Data)
	if err != nil {
		return "", fmt.Errorf("%w: data: %w", ErrMalformed, err)
	}
	id := ""
	switch {
	case env.Data.Subscription != nil && (strings.HasPrefix(env.Event, "SUBSCRIPTION_") || env.Data.Transaction == nil):
		id = env.Data.Subscription.ID
	case env.Data.Transaction != nil:
		id = env.Data.Transaction.ID
	}
	sum := sha256.Sum256(canon)
	return env.Event + ":" + id + ":data-" + hex.EncodeToString(sum[:16]), nil
}

// canonicalJSON re-encodes a JSON value with sorted object keys, no spaces
// and numbers kept as written.
func canonicalJSON(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return []byte("null"), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v) // maps marshal with sorted keys; json.Number as written
}

// DefaultKey builds keys as the PagPolar page's table says:
//
//	TRANSACTION_ASK_REFUNDING   none (the same sale can get a new request later;
//	                            check it with CheckRefundRequest)
//	other TRANSACTION_*         event:data.transaction.id
//	SUBSCRIPTION_RENEWED        event:data.subscription.id:data.subscription.next_billing_at
//	other SUBSCRIPTION_*        event:data.subscription.id
//
// A SUBSCRIPTION_RENEWED without next_billing_at cannot be keyed by the
// table: DefaultKey returns ErrUseFallbackKey, and the Inbox stores it under
// FallbackKey (event, subscription id and a hash of data) and answers 200,
// instead of a 400 that PagPolar would resend forever.
//
// so SUBSCRIPTION_DELAYED, which can arrive once a day while a subscription
// is late, is handled on its first notice only; use KeyEveryDelayed to handle
// every notice. An event of neither family is keyed on the transaction when
// data has one, else on the subscription.
func DefaultKey(env *Envelope) (string, bool, error) {
	return tableKey(env, false)
}

// KeyEveryDelayed is DefaultKey except that SUBSCRIPTION_DELAYED is never
// deduped: each daily notice is processed ("if you want to remind the
// customer every day, don't discard this event").
func KeyEveryDelayed(env *Envelope) (string, bool, error) {
	return tableKey(env, true)
}

func tableKey(env *Envelope, everyDelayed bool) (string, bool, error) {
	ev := env.Event
	tx, sub := env.Data.Transaction, env.Data.Subscription
	switch {
	case ev == wire.EventTransactionAskRefunding:
		return "", false, nil
	case ev == wire.EventSubscriptionDelayed && everyDelayed:
		return "", false, nil
	case strings.HasPrefix(ev, "TRANSACTION_"):
		if tx == nil {
			return "", false, fmt.Errorf("%w: %s: data.transaction: missing", ErrMalformed, ev)
		}
		return ev + ":" + tx.ID, true, nil
	case strings.HasPrefix(ev, "SUBSCRIPTION_"):
		if sub == nil {
			return "", false, fmt.Errorf("%w: %s: data.subscription: missing", ErrMalformed, ev)
		}
		if ev == wire.EventSubscriptionRenewed {
			if sub.NextBillingAt == "" {
				// Keyed on the subscription alone, every cycle's renewal would
				// share one key and all but the first would be dropped.
				return "", false, fmt.Errorf("%w: %s: data.subscription.next_billing_at: missing", ErrUseFallbackKey, ev)
			}
			return ev + ":" + sub.ID + ":" + sub.NextBillingAt, true, nil
		}
		return ev + ":" + sub.ID, true, nil
	case tx != nil:
		return ev + ":" + tx.ID, true, nil
	case sub != nil:
		return ev + ":" + sub.ID, true, nil
	}
	return "", false, fmt.Errorf("%w: %s: data: empty", ErrMalformed, ev)
}
