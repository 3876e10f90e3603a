package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// The API's shapes, named here so that applications can use them (they are
// defined once, in the SDK's internal wire package).
type (
	// Envelope is one webhook delivery: id and creation_date (new on every
	// attempt), event, data and, on Playground sends, test.
	Envelope = wire.WebhookEnvelope
	// Data carries data.transaction or data.subscription.
	Data = wire.WebhookData
	// Transaction is data.transaction: a sale whose identifier is also "id".
	Transaction = wire.WebhookTransaction
	// Sale is the REST shape of a sale (GET /sales/{identifier}).
	Sale = wire.Sale
	// Subscription is data.subscription and the REST shape of GET /subscriptions/{id}.
	Subscription = wire.Subscription
	// Refund is an entry of GET /refunds?sale_identifier=.
	Refund = wire.Refund
)

// ErrMalformed is wrapped by ParseEnvelope's errors: the body is not a
// PagPolar envelope (the handler answers 400).
var ErrMalformed = errors.New("webhook: malformed envelope")

// ParseEnvelope decodes a delivery body: one JSON object with a non-empty
// string "event" and, when present, "data" holding data.transaction and/or
// data.subscription objects. A transaction needs "id" (or "identifier"; each
// fills the other when missing) and a subscription needs "id", because the
// dedupe key is built from them. Unknown fields are ignored. The shapes inside
// data are ASSUMED (internal/wire): a type mismatch there is an error that
// names the field, so that a wrong assumption shows up as 400s in PagPolar's
// delivery log instead of silently lost events.
//
// An envelope whose data holds neither object is valid: Empty reports it.
func ParseEnvelope(body []byte) (*Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if env.Event == "" {
		return nil, fmt.Errorf("%w: event: missing or empty", ErrMalformed)
	}
	if tx := env.Data.Transaction; tx != nil {
		switch {
		case tx.ID == "" && tx.Identifier == "":
			return nil, fmt.Errorf("%w: data.transaction.id: missing or empty", ErrMalformed)
		case tx.ID == "":
			tx.ID = tx.Identifier
		case tx.Identifier == "":
			tx.Identifier = tx.ID
		}
	}
	if sub := env.Data.Subscription; sub != nil && sub.ID == "" {
		return nil, fmt.Errorf("%w: data.subscription.id: missing or empty", ErrMalformed)
	}
	return &env, nil
}

// Empty reports whether env carries neither data.transaction nor
// data.subscription: such events are acknowledged and ignored.
func Empty(env *Envelope) bool {
	return env.Data.Transaction == nil && env.Data.Subscription == nil
}

// Event is what a HandlerFunc receives: the stored envelope and where its
// processing stands.
type Event struct {
	// Name is the envelope's event, e.g. "TRANSACTION_PAID".
	Name string
	// Envelope is the delivery first stored under Key. Its data is the state
	// at send time: compare statuses before applying them (see Ranking).
	Envelope Envelope
	// Key is the dedupe key the event is stored under.
	Key string
	// Attempt counts the runs of the handler for this key, starting at 1.
	// A run that a shutdown interrupted is given back, so the next run has
	// the same number.
	Attempt int
	// Deliveries counts the deliveries received for this key so far.
	Deliveries int
	// ReceivedAt is when the first delivery was stored.
	ReceivedAt time.Time
	// Test is true for an accepted Playground test event.
	Test bool
	// Raw is the body as received.
	Raw []byte
}

// Transaction returns data.transaction, or nil.
func (e *Event) Transaction() *Transaction { return e.Envelope.Data.Transaction }

// Subscription returns data.subscription, or nil.
func (e *Event) Subscription() *Subscription { return e.Envelope.Data.Subscription }

// entityOf names the sale or subscription an event is about: events of one
// entity are processed one at a time. The event's prefix decides which object
// counts when data carries both, as in the dedupe key table.
func entityOf(env *Envelope) string {
	tx, sub := env.Data.Transaction, env.Data.Subscription
	if tx != nil && (sub == nil || !strings.HasPrefix(env.Event, "SUBSCRIPTION_")) {
		return "sale:" + tx.ID
	}
	if sub != nil {
		return "subscription:" + sub.ID
	}
	return ""
}
