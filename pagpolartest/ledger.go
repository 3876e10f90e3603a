package pagpolartest

import (
	"sort"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Ledger is a snapshot of everything the server created and every request it
// received, for assertions. Slices are in creation order; objects show their
// current state (a refunded sale has status refunded).
type Ledger struct {
	Sales         []LedgerSale
	Refunds       []LedgerRefund
	Subscriptions []LedgerSubscription
	PlanChanges   []LedgerPlanChange
	Requests      []RequestLog
}

// LedgerSale is a sale as the API would return it, plus who created it.
type LedgerSale struct {
	wire.Sale
	CredentialID string
	Key          string    // the Idempotency-Key of the request that created it; "" for renewals
	CreatedAt    time.Time // on the server's Clock
	VisibleAt    time.Time // when list lookups started (or start) to see it; CreatedAt unless lagged
	Renewal      bool
	Decision
}

// Decision is an effect's decision under WithAsync. Status (of the
// embedding type) is its current status; Undecided and DecidedAt say
// whether it may still change. Synchronous effects have the zero value.
type Decision struct {
	Async     bool      // answered undecided (WithAsync)
	Undecided bool      // still undecided: a card sale in analysis, a refund requested, a plan change scheduled
	DecideAt  time.Time // when it is decided by time (Async.DecideAfter); zero: only by an explicit call
	DecidedAt time.Time // on the server's Clock; zero while undecided or when synchronous
}

func (d decision) export() Decision {
	return Decision{Async: d.async, Undecided: d.undecided(), DecideAt: d.due, DecidedAt: d.decidedAt}
}

// LedgerRefund is a refund plus who created it.
type LedgerRefund struct {
	wire.Refund
	CredentialID string
	Key          string
	CreatedAt    time.Time
	VisibleAt    time.Time
	Decision
}

// LedgerSubscription is a subscription (with every plan change, lagged or
// not) plus who created it.
type LedgerSubscription struct {
	wire.Subscription
	CredentialID string
	Key          string
	CreatedAt    time.Time
	VisibleAt    time.Time
}

// LedgerPlanChange is a plan change plus who made it.
type LedgerPlanChange struct {
	wire.PlanChange
	CredentialID string
	Key          string
	CreatedAt    time.Time
	VisibleAt    time.Time
	Decision
}

// RequestLog is one request the server received, logged when it was answered
// or dropped (before the client can see the outcome).
type RequestLog struct {
	At                time.Time // arrival, on the server's Clock
	Method, Path      string
	Route             string // a Fault.Route name; "" for an unknown route
	Key               string // the Idempotency-Key header, as sent
	CredentialID      string // "" when authentication failed
	Status            int    // 0 when the connection was dropped
	Replayed          bool
	Fault             string // the FaultAction names applied, "+"-separated; "" for none
	ExternalReference string // what faults match on: see Fault.ExternalReference
	RequestID         string // the X-Request-Id answered (or that would have been)
	Dropped           bool   // closed without an answer
	Panic             string // a recovered panic (answered 500): always a bug in the fake
}

// Effect is one thing a request (or Renew) created, in a uniform shape for
// counting duplicates.
type Effect struct {
	Kind              string // "sale", "refund", "subscription", "plan_change"
	ID                string
	CredentialID      string
	Key               string
	ExternalReference string // sales and subscriptions
	Method            string // payment method of sales and subscriptions
	SaleID            string // refunds: the refunded sale
	SubscriptionID    string // plan changes; sales created by a subscription
	OfferID           string
	Status            string
	Amount            int64
	Successful        bool // it took effect: a sale not declined, a refund completed, pending or undecided, any subscription, a plan change applied or scheduled
	Undecided         bool // its decision is still to come (WithAsync); it took effect all the same
	Renewal           bool
	CreatedAt         time.Time
}

// Effects lists every effect in the ledger, oldest first. The first sale of a
// subscription is listed as a sale with SubscriptionID set.
func (l Ledger) Effects() []Effect {
	var out []Effect
	for _, s := range l.Sales {
		out = append(out, Effect{
			Kind: "sale", ID: s.Identifier, CredentialID: s.CredentialID, Key: s.Key,
			ExternalReference: s.ExternalReference, Method: s.PaymentMethod,
			SubscriptionID: s.SubscriptionID, OfferID: s.OfferIdentifier, Status: s.Status,
			Amount: s.Amount, Successful: s.Status != wire.SaleStatusDeclined, Undecided: s.Undecided,
			Renewal: s.Renewal, CreatedAt: s.CreatedAt,
		})
	}
	for _, r := range l.Refunds {
		out = append(out, Effect{
			Kind: "refund", ID: r.Identifier, CredentialID: r.CredentialID, Key: r.Key,
			SaleID: r.SaleIdentifier, Status: r.Status, Amount: r.Amount,
			Successful: r.Status == wire.RefundStatusCompleted || r.Status == wire.RefundStatusPending || r.Undecided,
			Undecided:  r.Undecided, CreatedAt: r.CreatedAt,
		})
	}
	for _, s := range l.Subscriptions {
		out = append(out, Effect{
			Kind: "subscription", ID: s.ID, CredentialID: s.CredentialID, Key: s.Key,
			ExternalReference: s.ExternalReference, Method: s.PaymentMethod,
			SubscriptionID: s.ID, OfferID: s.OfferIdentifier, Status: s.Status,
			Amount: s.Amount, Successful: true, CreatedAt: s.CreatedAt,
		})
	}
	for _, p := range l.PlanChanges {
		out = append(out, Effect{
			Kind: "plan_change", ID: p.ID, CredentialID: p.CredentialID, Key: p.Key,
			SubscriptionID: p.SubscriptionID, OfferID: p.OfferIdentifier, Status: p.Status,
			Successful: p.Status == wire.PlanChangeStatusApplied || p.Undecided,
			Undecided:  p.Undecided, CreatedAt: p.CreatedAt,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// Duplicates groups the successful effects by group and returns the groups
// holding two or more of them: the operations that took effect more than
// once. Effects for which group returns "" are ignored.
func (l Ledger) Duplicates(group func(Effect) string) map[string][]Effect {
	by := make(map[string][]Effect)
	for _, e := range l.Effects() {
		if !e.Successful {
			continue
		}
		if g := group(e); g != "" {
			by[g] = append(by[g], e)
		}
	}
	for g, es := range by {
		if len(es) < 2 {
			delete(by, g)
		}
	}
	return by
}

// DefaultGroup names the business operation an effect belongs to, for
// Duplicates: a charge (a sale that is not a renewal, or a subscription) by
// credential, kind, payment method and external reference; a refund or plan
// change by credential, kind and key, since several per sale or subscription
// are legitimate. Renewals and the first sale of a subscription (covered by
// the subscription itself) return "". A charge without an external reference
// is grouped by its key instead.
func DefaultGroup(e Effect) string {
	switch {
	case e.Renewal, e.Kind == "sale" && e.SubscriptionID != "":
		return ""
	case e.Kind == "sale" || e.Kind == "subscription":
		if e.ExternalReference == "" {
			return e.CredentialID + "|" + e.Kind + "|" + e.Method + "|key:" + e.Key
		}
		return e.CredentialID + "|" + e.Kind + "|" + e.Method + "|" + e.ExternalReference
	default:
		return e.CredentialID + "|" + e.Kind + "|" + e.Key
	}
}

// CountByKey counts the successful effects created under key (by any
// credential). A subscribe counts once: the subscription, not its first sale.
func (l Ledger) CountByKey(key string) int {
	n := 0
	for _, e := range l.Effects() {
		if e.Successful && e.Key == key && !(e.Kind == "sale" && e.SubscriptionID != "" && !e.Renewal) {
			n++
		}
	}
	return n
}

// StatusOf returns the current status of the sale, refund, subscription or
// plan change with that identifier, and whether its decision is still to
// come (WithAsync); ok is false when the ledger holds no such effect.
func (l Ledger) StatusOf(id string) (status string, undecided, ok bool) {
	for _, e := range l.Effects() {
		if e.ID == id {
			return e.Status, e.Undecided, true
		}
	}
	return "", false, false
}
