package pagpolar

import (
	"context"
	"net/url"
	"strings"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// SubscriptionsService creates subscriptions and changes their plans.
type SubscriptionsService struct{ c *Client }

// SubscribeParams are the params of Subscriptions.Subscribe.
type SubscribeParams struct {
	OfferID           string   // required: the plan's offer
	ExternalReference string   // required
	Customer          Customer // required
	PaymentMethod     string   // "credit_card", "pix" or "boleto"
	CardToken         string   // required for credit_card
	OperationID       string   // default "subscribe:" + ExternalReference
}

// SubscriptionResult is the result of Subscriptions.Subscribe.
type SubscriptionResult struct {
	Subscription *Subscription
	Operation    Operation
}

// ChangePlanParams are the params of Subscriptions.ChangePlan.
type ChangePlanParams struct {
	// OperationID is required: a subscription can change plans many times,
	// so only your records know which change this is.
	OperationID    string
	SubscriptionID string // required
	NewOfferID     string // required: the new plan's offer
}

// PlanChangeResult is the result of Subscriptions.ChangePlan.
type PlanChangeResult struct {
	PlanChange *PlanChange
	Operation  Operation
}

// Subscribe creates a subscription, at most once per operation. A lost answer
// is settled through GET /subscriptions?external_reference= (an ASSUMED
// route); where the API does not offer it, an ambiguous subscribe ends in an
// *OutcomeUnknownError, never in a blind resend. Errors as Pix.
func (s *SubscriptionsService) Subscribe(ctx context.Context, p SubscribeParams) (*SubscriptionResult, error) {
	if err := validateCharge(p.OfferID, p.ExternalReference, p.Customer, p.OperationID); err != nil {
		return nil, err
	}
	if err := validateMethod("PaymentMethod", p.PaymentMethod); err != nil {
		return nil, err
	}
	var card *wire.Card
	if p.PaymentMethod == wire.MethodCreditCard {
		if err := required("CardToken", p.CardToken); err != nil {
			return nil, err
		}
		card = &wire.Card{Token: p.CardToken}
	} else if p.CardToken != "" {
		return nil, &ValidationError{Field: "CardToken", Reason: "only for PaymentMethod credit_card"}
	}
	body := wire.SubscribeRequest{ExternalReference: p.ExternalReference, Customer: wireCustomer(p.Customer), PaymentMethod: p.PaymentMethod, Card: card}
	spec := &opSpec{
		kind: kindSubscribe, id: orDefault(p.OperationID, kindSubscribe, p.ExternalReference),
		path: strings.Replace(wire.RouteSubscribe, "{id}", url.PathEscape(p.OfferID), 1), body: mustJSON(body),
		fpIn: fields{public: []string{kindSubscribe, p.OfferID, p.ExternalReference, p.PaymentMethod}, private: func() []string { return append(customerFields(p.Customer), p.CardToken) }},
		meta: opMeta{ExternalReference: p.ExternalReference, OfferID: p.OfferID, Method: p.PaymentMethod},
	}
	res, err := s.c.run(ctx, spec)
	if err != nil {
		return nil, err
	}
	sub, err := resultOf[Subscription](spec.id, res)
	if err != nil {
		return nil, err
	}
	return &SubscriptionResult{Subscription: sub, Operation: res.op}, nil
}

// ChangePlan moves a subscription to another plan, at most once per
// operation. Before the first send it records the subscription's existing
// plan changes, so a lost answer is settled by finding a new one (SAFETY
// rule 11). Errors as Pix.
func (s *SubscriptionsService) ChangePlan(ctx context.Context, p ChangePlanParams) (*PlanChangeResult, error) {
	if err := validateOperationID(p.OperationID, true); err != nil {
		return nil, err
	}
	if err := identifier("SubscriptionID", p.SubscriptionID, maxReference); err != nil {
		return nil, err
	}
	if err := identifier("NewOfferID", p.NewOfferID, maxReference); err != nil {
		return nil, err
	}
	body := wire.PlanChangeRequest{OfferIdentifier: p.NewOfferID}
	spec := &opSpec{
		kind: kindPlanChange, id: p.OperationID,
		path: strings.Replace(wire.RoutePlanChange, "{id}", url.PathEscape(p.SubscriptionID), 1), body: mustJSON(body),
		fpIn: fields{public: []string{kindPlanChange, p.SubscriptionID, p.NewOfferID}},
		meta: opMeta{SubscriptionID: p.SubscriptionID, OfferID: p.NewOfferID},
	}
	res, err := s.c.run(ctx, spec)
	if err != nil {
		return nil, err
	}
	pc, err := resultOf[PlanChange](spec.id, res)
	if err != nil {
		return nil, err
	}
	return &PlanChangeResult{PlanChange: pc, Operation: res.op}, nil
}

// Get reads one subscription. A 404 matches ErrNotFound.
func (s *SubscriptionsService) Get(ctx context.Context, id string) (*Subscription, error) {
	if err := identifier("id", id, maxReference); err != nil {
		return nil, err
	}
	e, err := s.c.getObject(ctx, effSubscription, subscriptionPath(id))
	if err != nil {
		return nil, err
	}
	sub := e.subscription(&s.c.shapes)
	return &sub, nil
}

// ListByExternalReference lists subscriptions with the reference (ASSUMED
// route; a 404 means the API does not offer it). Every page is read; an
// error wrapping ErrIncompleteList, with what was read, if not all could be.
func (s *SubscriptionsService) ListByExternalReference(ctx context.Context, ref string) ([]Subscription, error) {
	if err := identifier("ref", ref, maxReference); err != nil {
		return nil, err
	}
	effs, err := s.c.listAll(ctx, effSubscription, wire.RouteSubscriptions, url.Values{"external_reference": {ref}})
	out := make([]Subscription, 0, len(effs))
	for _, e := range effs {
		out = append(out, e.subscription(&s.c.shapes))
	}
	return out, err
}
