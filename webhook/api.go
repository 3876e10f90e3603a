package webhook

import (
	"context"
	"errors"
	"fmt"
)

// SaleGetter reads a sale's current state (GET /sales/{identifier}).
type SaleGetter interface {
	GetSale(ctx context.Context, identifier string) (Sale, error)
}

// SubscriptionGetter reads a subscription's current state
// (GET /subscriptions/{id}).
type SubscriptionGetter interface {
	GetSubscription(ctx context.Context, id string) (Subscription, error)
}

// RefundLister lists a sale's refunds (GET /refunds?sale_identifier=).
type RefundLister interface {
	ListRefunds(ctx context.Context, saleIdentifier string) ([]Refund, error)
}

// API is the part of the PagPolar client the helpers below use;
// FromClient adapts the SDK's *pagpolar.Client to it.
type API interface {
	SaleGetter
	SubscriptionGetter
	RefundLister
}

// Resolution says which status an application should hold after an event,
// so that an order never moves backwards.
type Resolution struct {
	// Status is the status to hold: the event's, the API's, or the stored one.
	Status string
	// Apply reports that Status differs from the stored status: move to it.
	Apply bool
	// Order is how the event's status compared with the stored one.
	Order Order
	// Asked reports that the API was asked for the current state.
	Asked bool
}

// ResolveSale decides what an event about a sale changes, following the
// PagPolar page's flow: nothing stored yet or a newer status → apply the
// event's; the same status → nothing; an older status, or one the ranking
// cannot place → ask the API (GET /sales/{identifier}) and apply its status
// unless it is the stored one or older than it (a lagging read never moves an
// order back either). rank nil means SaleRanking().
//
// It returns the sale read from the API when it asked (nil otherwise).
func ResolveSale(ctx context.Context, api SaleGetter, rank Ranking, stored string, tx *Transaction) (Resolution, *Sale, error) {
	if tx == nil {
		return Resolution{}, nil, errors.New("webhook: ResolveSale: transaction: nil")
	}
	if rank == nil {
		rank = SaleRanking()
	}
	r, ask := resolve(rank, stored, tx.Status)
	if !ask {
		return r, nil, nil
	}
	if api == nil {
		return r, nil, fmt.Errorf("webhook: ResolveSale %s: status %q is %s than stored %q and no API to ask", tx.ID, tx.Status, r.Order, stored)
	}
	cur, err := api.GetSale(ctx, tx.ID)
	if err != nil {
		return r, nil, fmt.Errorf("webhook: ResolveSale %s: GET /sales: %w", tx.ID, err)
	}
	return settle(rank, r, stored, cur.Status), &cur, nil
}

// ResolveSubscription is ResolveSale for an event about a subscription; it
// asks GET /subscriptions/{id}. rank nil means SubscriptionRanking().
func ResolveSubscription(ctx context.Context, api SubscriptionGetter, rank Ranking, stored string, sub *Subscription) (Resolution, *Subscription, error) {
	if sub == nil {
		return Resolution{}, nil, errors.New("webhook: ResolveSubscription: subscription: nil")
	}
	if rank == nil {
		rank = SubscriptionRanking()
	}
	r, ask := resolve(rank, stored, sub.Status)
	if !ask {
		return r, nil, nil
	}
	if api == nil {
		return r, nil, fmt.Errorf("webhook: ResolveSubscription %s: status %q is %s than stored %q and no API to ask", sub.ID, sub.Status, r.Order, stored)
	}
	cur, err := api.GetSubscription(ctx, sub.ID)
	if err != nil {
		return r, nil, fmt.Errorf("webhook: ResolveSubscription %s: GET /subscriptions: %w", sub.ID, err)
	}
	return settle(rank, r, stored, cur.Status), &cur, nil
}

// resolve decides without the API, or reports that the API must be asked.
func resolve(rank Ranking, stored, received string) (Resolution, bool) {
	if stored == "" {
		return Resolution{Status: received, Apply: true, Order: Newer}, false
	}
	switch o := rank.Compare(stored, received); o {
	case Newer:
		return Resolution{Status: received, Apply: true, Order: o}, false
	case Same:
		return Resolution{Status: stored, Order: o}, false
	default:
		return Resolution{Status: stored, Order: o}, true
	}
}

// settle applies the API's current status unless it would move backwards.
func settle(rank Ranking, r Resolution, stored, current string) Resolution {
	r.Asked = true
	if current != stored && rank.Compare(stored, current) != Older {
		r.Status, r.Apply = current, true
	}
	return r
}

// RefundCheck is the answer of CheckRefundRequest.
type RefundCheck struct {
	// Refunds is every refund of the sale, as the API listed them.
	Refunds []Refund
	// New holds the refunds the application has not handled yet. Empty: the
	// TRANSACTION_ASK_REFUNDING repeats a request already handled.
	New []Refund
}

// CheckRefundRequest tells a new TRANSACTION_ASK_REFUNDING from a repeat.
// That event is never deduped (the same sale can get a new request once the
// previous one ended), so the page says to check GET
// /refunds?sale_identifier=: CheckRefundRequest lists the sale's refunds and
// returns those for which handled (the application's own record, keyed by
// refund identifier) reports false. That each request appears in the list
// under its own identifier is ASSUMED.
func CheckRefundRequest(ctx context.Context, api RefundLister, saleIdentifier string, handled func(refundIdentifier string) (bool, error)) (RefundCheck, error) {
	if api == nil || handled == nil {
		return RefundCheck{}, errors.New("webhook: CheckRefundRequest: api and handled must not be nil")
	}
	refunds, err := api.ListRefunds(ctx, saleIdentifier)
	if err != nil {
		return RefundCheck{}, fmt.Errorf("webhook: CheckRefundRequest %s: GET /refunds: %w", saleIdentifier, err)
	}
	c := RefundCheck{Refunds: refunds}
	for _, rf := range refunds {
		done, err := handled(rf.Identifier)
		if err != nil {
			return RefundCheck{}, fmt.Errorf("webhook: CheckRefundRequest %s: refund %s: %w", saleIdentifier, rf.Identifier, err)
		}
		if !done {
			c.New = append(c.New, rf)
		}
	}
	return c, nil
}
