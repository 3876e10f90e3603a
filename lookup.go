package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/pagpolar/pagpolar-go/internal/wire"
	"github.com/pagpolar/pagpolar-go/keystore"
)

// Operation kinds (Record.Kind).
const (
	kindPix        = "pix"
	kindBoleto     = "boleto"
	kindCreditCard = "credit_card"
	kindSubscribe  = "subscribe"
	kindPlanChange = "plan_change"
	kindRefund     = "refund"
)

// Sale statuses that mean "the charge was created" when found by a lookup;
// declined/failed mean the attempt ended in a refusal. Anything else is not
// understood and never taken for success (CONTRACT: statuses are assumed).
var (
	saleCreated  = map[string]bool{wire.SaleStatusPending: true, wire.SaleStatusPaid: true, wire.SaleStatusRefunded: true, wire.SaleStatusPartiallyRefunded: true, wire.SaleStatusCanceled: true, wire.SaleStatusExpired: true}
	saleRefused  = map[string]bool{wire.SaleStatusDeclined: true, "failed": true, "refused": true}
	subCreated   = map[string]bool{wire.SubscriptionStatusActive: true, wire.SubscriptionStatusPending: true, wire.SubscriptionStatusDelayed: true, wire.SubscriptionStatusCanceled: true}
	refundExists = map[string]bool{wire.RefundStatusPending: true, wire.RefundStatusCompleted: true}
)

// after reports whether an effect created at ts (server clock, RFC 3339)
// can belong to an operation first sent at first: earlier attempts and
// renewals share the external reference, so older effects are not ours.
func (c *Client) after(ts string, first time.Time) bool {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return false
	}
	return !t.Before(first.Add(-c.policy.ClockSkew))
}

// successFrom is the earliest time a *successful* effect can be ours. It is
// the first send, unless a 409 proved that another sender (another host with
// its own store, deriving the same key) was already processing our key: its
// request began at most one processing window before the 409, and its effect
// is ours. Refusals (declines) keep the strict bound, so an earlier
// operation's decline is never taken for this one's.
func successFrom(m opMeta, rec keystore.Record) time.Time {
	if !m.SharedFrom.IsZero() && m.SharedFrom.Before(rec.FirstSentAt) {
		return m.SharedFrom
	}
	return rec.FirstSentAt
}

func inSnapshot(id string, snap []string) bool {
	for _, s := range snap {
		if s == id {
			return true
		}
	}
	return false
}

// lookup finds the effect of an operation after an ambiguous attempt
// (SAFETY rule 5), matching it to the operation, not just to the reference.
func (c *Client) lookup(ctx context.Context, kind string, m opMeta, rec keystore.Record) (lookupOutcome, error) {
	switch kind {
	case kindPix, kindBoleto, kindCreditCard:
		var list wire.List[wire.Sale]
		if _, err := c.get(ctx, wire.RouteSales, url.Values{"external_reference": {m.ExternalReference}}, &list); err != nil {
			return lookupOutcome{}, err
		}
		var refused *wire.Sale
		for i := range list.Data {
			s := &list.Data[i]
			if s.PaymentMethod != m.Method || s.OfferIdentifier != m.OfferID || s.SubscriptionID != "" || !c.after(s.CreatedAt, successFrom(m, rec)) {
				continue
			}
			switch {
			case saleCreated[s.Status]:
				return lookupOutcome{kind: lookupSucceeded, ref: s.Identifier, result: mustJSON(saleFromWire(*s))}, nil
			case saleRefused[s.Status]:
				if refused == nil && c.after(s.CreatedAt, rec.FirstSentAt) {
					refused = s
				}
			default:
				return lookupOutcome{kind: lookupUnclear, ref: "sale " + s.Identifier, reason: fmt.Sprintf("sale has status %q, which the SDK does not understand", s.Status)}, nil
			}
		}
		if refused != nil {
			return lookupOutcome{kind: lookupFailed, ref: refused.Identifier, reason: fmt.Sprintf("sale %s was %s", refused.Identifier, refused.Status)}, nil
		}
		return lookupOutcome{kind: lookupNotFound}, nil

	case kindRefund:
		var list wire.List[wire.Refund]
		if _, err := c.get(ctx, wire.RouteRefunds, url.Values{"sale_identifier": {m.SaleID}}, &list); err != nil {
			return lookupOutcome{}, err
		}
		for _, r := range list.Data {
			if inSnapshot(r.Identifier, m.Snapshot) || r.Amount != m.Amount || !c.after(r.CreatedAt, rec.FirstSentAt) {
				continue
			}
			if refundExists[r.Status] {
				return lookupOutcome{kind: lookupSucceeded, ref: r.Identifier, result: mustJSON(refundFromWire(r))}, nil
			}
			if r.Status == wire.RefundStatusFailed {
				return lookupOutcome{kind: lookupFailed, ref: r.Identifier, reason: "refund " + r.Identifier + " failed"}, nil
			}
			return lookupOutcome{kind: lookupUnclear, ref: "refund " + r.Identifier, reason: fmt.Sprintf("refund has status %q", r.Status)}, nil
		}
		return lookupOutcome{kind: lookupNotFound}, nil

	case kindSubscribe:
		var list wire.List[wire.Subscription]
		_, err := c.get(ctx, wire.RouteSubscriptions, url.Values{"external_reference": {m.ExternalReference}}, &list)
		if err != nil {
			var ae *APIError
			if errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 405 || ae.StatusCode == 501) {
				return lookupOutcome{kind: lookupUnsupported, reason: "GET /subscriptions?external_reference= answered " + fmt.Sprint(ae.StatusCode)}, nil
			}
			return lookupOutcome{}, err
		}
		for _, s := range list.Data {
			if s.OfferIdentifier != m.OfferID && !planChangedFrom(s, m.OfferID) {
				continue
			}
			if s.PaymentMethod != m.Method || !c.after(s.CreatedAt, successFrom(m, rec)) {
				continue
			}
			if subCreated[s.Status] {
				return lookupOutcome{kind: lookupSucceeded, ref: s.ID, result: mustJSON(subscriptionFromWire(s))}, nil
			}
			return lookupOutcome{kind: lookupUnclear, ref: "subscription " + s.ID, reason: fmt.Sprintf("subscription has status %q", s.Status)}, nil
		}
		return lookupOutcome{kind: lookupNotFound}, nil

	case kindPlanChange:
		var s wire.Subscription
		if _, err := c.get(ctx, strings.Replace(wire.RouteSubscription, "{id}", url.PathEscape(m.SubscriptionID), 1), nil, &s); err != nil {
			return lookupOutcome{}, err
		}
		for _, pc := range s.PlanChanges {
			if inSnapshot(pc.ID, m.Snapshot) || pc.OfferIdentifier != m.OfferID || !c.after(pc.CreatedAt, rec.FirstSentAt) {
				continue
			}
			return lookupOutcome{kind: lookupSucceeded, ref: pc.ID, result: mustJSON(planChangeFromWire(pc))}, nil
		}
		return lookupOutcome{kind: lookupNotFound}, nil
	}
	return lookupOutcome{kind: lookupUnsupported, reason: "unknown operation kind " + kind}, nil
}

// planChangedFrom: a subscription found by reference may since have changed
// plan; its first offer is the from-offer of its first plan change.
func planChangedFrom(s wire.Subscription, offer string) bool {
	return len(s.PlanChanges) > 0 && s.PlanChanges[0].FromOfferIdentifier == offer
}

// snapshot lists the effects that exist before the first send, so a later
// lookup can tell this operation's effect from earlier ones (SAFETY rule 11).
func (c *Client) snapshot(ctx context.Context, kind string, m opMeta) ([]string, error) {
	var ids []string
	switch kind {
	case kindRefund:
		var list wire.List[wire.Refund]
		if _, err := c.get(ctx, wire.RouteRefunds, url.Values{"sale_identifier": {m.SaleID}}, &list); err != nil {
			return nil, err
		}
		for _, r := range list.Data {
			ids = append(ids, r.Identifier)
		}
	case kindPlanChange:
		var s wire.Subscription
		if _, err := c.get(ctx, strings.Replace(wire.RouteSubscription, "{id}", url.PathEscape(m.SubscriptionID), 1), nil, &s); err != nil {
			return nil, err
		}
		for _, pc := range s.PlanChanges {
			ids = append(ids, pc.ID)
		}
	}
	return ids, nil
}

// accept decodes a 2xx body and checks it against the operation (SAFETY
// rule 7): a replay answers with the first response for the key, whatever we
// sent now, so a body for another reference, method, offer or amount is a
// collision, never a success.
func (c *Client) accept(kind string, m opMeta, body []byte) (string, []byte, error) {
	switch kind {
	case kindPix, kindBoleto, kindCreditCard:
		var s wire.Sale
		if err := json.Unmarshal(body, &s); err != nil {
			return "", nil, fmt.Errorf("2xx body is not a sale: %w", err)
		}
		if s.Identifier == "" {
			return "", nil, errors.New("2xx body has no sale identifier")
		}
		if s.ExternalReference != m.ExternalReference || s.PaymentMethod != m.Method || (s.OfferIdentifier != "" && s.OfferIdentifier != m.OfferID) {
			return "", nil, fmt.Errorf("the API answered with sale %s for reference %q/%s/%s, but this operation is %q/%s/%s",
				s.Identifier, s.ExternalReference, s.PaymentMethod, s.OfferIdentifier, m.ExternalReference, m.Method, m.OfferID)
		}
		return s.Identifier, mustJSON(saleFromWire(s)), nil
	case kindRefund:
		var r wire.Refund
		if err := json.Unmarshal(body, &r); err != nil {
			return "", nil, fmt.Errorf("2xx body is not a refund: %w", err)
		}
		if r.Identifier == "" || r.SaleIdentifier != m.SaleID || r.Amount != m.Amount {
			return "", nil, fmt.Errorf("the API answered with refund %q of sale %q amount %d, but this operation refunds %d of %q",
				r.Identifier, r.SaleIdentifier, r.Amount, m.Amount, m.SaleID)
		}
		return r.Identifier, mustJSON(refundFromWire(r)), nil
	case kindSubscribe:
		var s wire.Subscription
		if err := json.Unmarshal(body, &s); err != nil {
			return "", nil, fmt.Errorf("2xx body is not a subscription: %w", err)
		}
		if s.ID == "" || s.ExternalReference != m.ExternalReference || (s.OfferIdentifier != m.OfferID && !planChangedFrom(s, m.OfferID)) {
			return "", nil, fmt.Errorf("the API answered with subscription %q for %q/%s, but this operation subscribes %q to %s",
				s.ID, s.ExternalReference, s.OfferIdentifier, m.ExternalReference, m.OfferID)
		}
		return s.ID, mustJSON(subscriptionFromWire(s)), nil
	case kindPlanChange:
		var pc wire.PlanChange
		if err := json.Unmarshal(body, &pc); err != nil {
			return "", nil, fmt.Errorf("2xx body is not a plan change: %w", err)
		}
		if pc.ID == "" || pc.OfferIdentifier != m.OfferID || (pc.SubscriptionID != "" && pc.SubscriptionID != m.SubscriptionID) {
			return "", nil, fmt.Errorf("the API answered with plan change %q of %q to %s, but this operation moves %q to %s",
				pc.ID, pc.SubscriptionID, pc.OfferIdentifier, m.SubscriptionID, m.OfferID)
		}
		return pc.ID, mustJSON(planChangeFromWire(pc)), nil
	}
	return "", nil, fmt.Errorf("unknown operation kind %q", kind)
}
