package pagpolar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
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
	t, ok := parseServerTime(ts)
	return ok && !t.Before(first.Add(-c.policy.ClockSkew))
}

func parseServerTime(ts string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, ts)
	return t, err == nil
}

// getList reads a list route once (the settle loop is the retry) and
// insists on its "data" member: a list in another shape must never read as
// "nothing found".
func (c *Client) getList(ctx context.Context, path string, q url.Values, out any) error {
	var raw map[string]json.RawMessage
	if _, err := c.getN(ctx, path, q, &raw, 1); err != nil {
		return err
	}
	data, ok := raw["data"]
	if !ok {
		return fmt.Errorf("pagpolar: GET %s answered a list without \"data\"; refusing to read it as empty", path)
	}
	if err := json.Unmarshal([]byte(`{"data":`+string(data)+`}`), out); err != nil {
		return fmt.Errorf("pagpolar: decoding %s list: %w", path, err)
	}
	return nil
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
	return slices.Contains(snap, id)
}

// lookup finds the effect of an operation after an ambiguous attempt
// (SAFETY rule 5), matching it to the operation, not just to the reference.
func (c *Client) lookup(ctx context.Context, kind string, m opMeta, rec keystore.Record) (lookupOutcome, error) {
	switch kind {
	case kindPix, kindBoleto, kindCreditCard:
		var list wire.List[wire.Sale]
		if err := c.getList(ctx, wire.RouteSales, url.Values{"external_reference": {m.ExternalReference}}, &list); err != nil {
			return lookupOutcome{}, err
		}
		var refused, unclear *wire.Sale
		for i := range list.Data {
			s := &list.Data[i]
			if s.SubscriptionID != "" || differs(s.PaymentMethod, m.Method) || differs(s.OfferIdentifier, m.OfferID) {
				continue // a renewal, or another operation's sale under the same reference
			}
			created, ok := parseServerTime(s.CreatedAt)
			if !ok || s.PaymentMethod == "" || s.OfferIdentifier == "" {
				// Ours or not, we cannot tell: never read that as "not found".
				if unclear == nil {
					unclear = s
				}
				continue
			}
			if created.Before(successFrom(m, rec).Add(-c.policy.ClockSkew)) {
				continue
			}
			switch {
			case saleCreated[s.Status]:
				return lookupOutcome{kind: lookupSucceeded, ref: s.Identifier, value: saleFromWire(*s)}, nil
			case saleRefused[s.Status]:
				// Declines get no skew allowance: an earlier operation's decline
				// must never settle this one.
				if refused == nil && !created.Before(rec.FirstSentAt) {
					refused = s
				}
			default:
				if unclear == nil {
					unclear = s
				}
			}
		}
		if unclear != nil {
			return lookupOutcome{kind: lookupUnclear, ref: "sale " + unclear.Identifier, reason: fmt.Sprintf("a sale under this reference (status %q, created %q) cannot be matched to the operation or understood", unclear.Status, unclear.CreatedAt)}, nil
		}
		if refused != nil {
			return lookupOutcome{kind: lookupFailed, ref: refused.Identifier, reason: fmt.Sprintf("sale %s was %s", refused.Identifier, refused.Status)}, nil
		}
		return lookupOutcome{kind: lookupNotFound}, nil

	case kindRefund:
		var list wire.List[wire.Refund]
		if err := c.getList(ctx, wire.RouteRefunds, url.Values{"sale_identifier": {m.SaleID}}, &list); err != nil {
			return lookupOutcome{}, err
		}
		for _, r := range list.Data {
			if inSnapshot(r.Identifier, m.Snapshot) || (r.Amount != 0 && r.Amount != m.Amount) {
				continue
			}
			if _, ok := parseServerTime(r.CreatedAt); !ok || r.Amount == 0 {
				return lookupOutcome{kind: lookupUnclear, ref: "refund " + r.Identifier, reason: "a new refund of the sale cannot be matched (no amount or creation time)"}, nil
			}
			if !c.after(r.CreatedAt, successFrom(m, rec)) {
				continue
			}
			if refundExists[r.Status] {
				return lookupOutcome{kind: lookupSucceeded, ref: r.Identifier, value: refundFromWire(r)}, nil
			}
			if r.Status == wire.RefundStatusFailed {
				return lookupOutcome{kind: lookupFailed, ref: r.Identifier, reason: "refund " + r.Identifier + " failed"}, nil
			}
			return lookupOutcome{kind: lookupUnclear, ref: "refund " + r.Identifier, reason: fmt.Sprintf("refund has status %q", r.Status)}, nil
		}
		return lookupOutcome{kind: lookupNotFound}, nil

	case kindSubscribe:
		var list wire.List[wire.Subscription]
		err := c.getList(ctx, wire.RouteSubscriptions, url.Values{"external_reference": {m.ExternalReference}}, &list)
		if err != nil {
			var ae *APIError
			if errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 405 || ae.StatusCode == 501) {
				return lookupOutcome{kind: lookupUnsupported, reason: "GET /subscriptions?external_reference= answered " + fmt.Sprint(ae.StatusCode)}, nil
			}
			return lookupOutcome{}, err
		}
		for _, s := range list.Data {
			if (s.OfferIdentifier != m.OfferID && !planChangedFrom(s, m.OfferID)) || differs(s.PaymentMethod, m.Method) {
				continue
			}
			if _, ok := parseServerTime(s.CreatedAt); !ok || s.PaymentMethod == "" {
				return lookupOutcome{kind: lookupUnclear, ref: "subscription " + s.ID, reason: "a subscription under this reference cannot be matched (no payment method or creation time)"}, nil
			}
			if !c.after(s.CreatedAt, successFrom(m, rec)) {
				continue
			}
			if subCreated[s.Status] {
				return lookupOutcome{kind: lookupSucceeded, ref: s.ID, value: subscriptionFromWire(s)}, nil
			}
			return lookupOutcome{kind: lookupUnclear, ref: "subscription " + s.ID, reason: fmt.Sprintf("subscription has status %q", s.Status)}, nil
		}
		return lookupOutcome{kind: lookupNotFound}, nil

	case kindPlanChange:
		var s wire.Subscription
		if _, err := c.getN(ctx, strings.Replace(wire.RouteSubscription, "{id}", url.PathEscape(m.SubscriptionID), 1), nil, &s, 1); err != nil {
			return lookupOutcome{}, err
		}
		for _, pc := range s.PlanChanges {
			if inSnapshot(pc.ID, m.Snapshot) || differs(pc.OfferIdentifier, m.OfferID) {
				continue
			}
			if _, ok := parseServerTime(pc.CreatedAt); !ok || pc.OfferIdentifier == "" {
				return lookupOutcome{kind: lookupUnclear, ref: "plan change " + pc.ID, reason: "a new plan change cannot be matched (no offer or creation time)"}, nil
			}
			if !c.after(pc.CreatedAt, successFrom(m, rec)) {
				continue
			}
			if pc.Status == wire.PlanChangeStatusApplied {
				return lookupOutcome{kind: lookupSucceeded, ref: pc.ID, value: planChangeFromWire(pc)}, nil
			}
			return lookupOutcome{kind: lookupUnclear, ref: "plan change " + pc.ID, reason: fmt.Sprintf("plan change has status %q, which the SDK does not take for success", pc.Status)}, nil
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

// acceptError says why a 2xx body was not taken as this operation's
// success. collision: the body is well formed and names another request (a
// replay of someone else's first answer: SAFETY rule 7). Otherwise the body
// could not be verified (an unexpected shape): the effect may well be ours.
type acceptError struct {
	collision bool
	msg       string
}

func (e *acceptError) Error() string { return e.msg }

func unverifiable(format string, args ...any) *acceptError {
	return &acceptError{msg: fmt.Sprintf(format, args...)}
}

// differs reports a field that is present and not what we sent.
func differs(got, want string) bool { return got != "" && got != want }

// accept decodes a 2xx body and checks it against the operation (SAFETY
// rule 7): a replay answers with the first response for the key, whatever we
// sent now, so a body for another reference, method, offer or amount is a
// collision, never a success. A body missing what we check is not proof of
// anything and is settled by lookup instead.
func (c *Client) accept(kind string, m opMeta, body []byte) (string, any, *acceptError) {
	switch kind {
	case kindPix, kindBoleto, kindCreditCard:
		var s wire.Sale
		if err := json.Unmarshal(body, &s); err != nil {
			return "", nil, unverifiable("2xx body is not a sale: %v", err)
		}
		if differs(s.ExternalReference, m.ExternalReference) || differs(s.PaymentMethod, m.Method) || differs(s.OfferIdentifier, m.OfferID) {
			return "", nil, &acceptError{collision: true, msg: fmt.Sprintf("the API answered with sale %s for %q/%s/%s, but this operation is %q/%s/%s",
				s.Identifier, s.ExternalReference, s.PaymentMethod, s.OfferIdentifier, m.ExternalReference, m.Method, m.OfferID)}
		}
		if s.Identifier == "" || s.ExternalReference == "" || s.PaymentMethod == "" {
			return "", nil, unverifiable("2xx sale lacks identifier, external_reference or payment_method")
		}
		return s.Identifier, saleFromWire(s), nil
	case kindRefund:
		var r wire.Refund
		if err := json.Unmarshal(body, &r); err != nil {
			return "", nil, unverifiable("2xx body is not a refund: %v", err)
		}
		if differs(r.SaleIdentifier, m.SaleID) || (r.Amount != 0 && r.Amount != m.Amount) {
			return "", nil, &acceptError{collision: true, msg: fmt.Sprintf("the API answered with refund %q of sale %q amount %d, but this operation refunds %d of %q",
				r.Identifier, r.SaleIdentifier, r.Amount, m.Amount, m.SaleID)}
		}
		if r.Identifier == "" || r.SaleIdentifier == "" || r.Amount == 0 {
			return "", nil, unverifiable("2xx refund lacks identifier, sale_identifier or amount")
		}
		return r.Identifier, refundFromWire(r), nil
	case kindSubscribe:
		var s wire.Subscription
		if err := json.Unmarshal(body, &s); err != nil {
			return "", nil, unverifiable("2xx body is not a subscription: %v", err)
		}
		if differs(s.ExternalReference, m.ExternalReference) || (s.OfferIdentifier != "" && s.OfferIdentifier != m.OfferID && !planChangedFrom(s, m.OfferID)) {
			return "", nil, &acceptError{collision: true, msg: fmt.Sprintf("the API answered with subscription %q for %q/%s, but this operation subscribes %q to %s",
				s.ID, s.ExternalReference, s.OfferIdentifier, m.ExternalReference, m.OfferID)}
		}
		if s.ID == "" || s.ExternalReference == "" || s.OfferIdentifier == "" {
			return "", nil, unverifiable("2xx subscription lacks id, external_reference or offer_identifier")
		}
		return s.ID, subscriptionFromWire(s), nil
	case kindPlanChange:
		var pc wire.PlanChange
		if err := json.Unmarshal(body, &pc); err != nil {
			return "", nil, unverifiable("2xx body is not a plan change: %v", err)
		}
		if differs(pc.OfferIdentifier, m.OfferID) || differs(pc.SubscriptionID, m.SubscriptionID) {
			return "", nil, &acceptError{collision: true, msg: fmt.Sprintf("the API answered with plan change %q of %q to %s, but this operation moves %q to %s",
				pc.ID, pc.SubscriptionID, pc.OfferIdentifier, m.SubscriptionID, m.OfferID)}
		}
		if pc.ID == "" || pc.OfferIdentifier == "" {
			return "", nil, unverifiable("2xx plan change lacks id or offer_identifier")
		}
		return pc.ID, planChangeFromWire(pc), nil
	}
	return "", nil, unverifiable("unknown operation kind %q", kind)
}
