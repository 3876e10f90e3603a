package webhook

import (
	"fmt"
	"strings"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// KeyFunc returns the dedupe key of an event. dedupe = false means the event
// must not be deduped: every delivery is stored and processed on its own (its
// key is then ignored). An error makes the handler answer 400.
//
// Keys must be stable across delivery attempts: never use the envelope id or
// creation_date, which change on every attempt.
type KeyFunc func(env *Envelope) (key string, dedupe bool, err error)

// DefaultKey builds keys as the PagPolar page's table says:
//
//	TRANSACTION_ASK_REFUNDING   none (the same sale can get a new request later;
//	                            check it with CheckRefundRequest)
//	other TRANSACTION_*         event:data.transaction.id
//	SUBSCRIPTION_RENEWED        event:data.subscription.id:data.subscription.next_billing_at
//	other SUBSCRIPTION_*        event:data.subscription.id
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
				// Without it every cycle's renewal would share one key and all
				// but the first would be dropped.
				return "", false, fmt.Errorf("%w: %s: data.subscription.next_billing_at: missing", ErrMalformed, ev)
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
