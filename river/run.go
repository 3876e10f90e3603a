package pagpolarriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	pagpolar "github.com/pagpolar/pagpolar-go"
)

// Payer is what a charge needs that the job row must not hold: the
// payer's personal data and, for card payments, the tokenizer's token.
type Payer struct {
	Customer  pagpolar.Customer
	CardToken string // CreditCardIntent, and SubscribeIntent paying by card
}

// A Resolver loads an order's payer when its intent runs. The application
// implements it over its own tables (the order's customer row).
//
// An error wrapping ErrUnresolvable (the order or its customer is gone)
// cancels the job; any other error is taken as passing (the database is
// away) and the job is run again later. Nothing is sent before the payer
// is resolved. The error's text is kept in the job row (River's errors):
// keep personal data out of it.
type Resolver interface {
	Payer(ctx context.Context, orderID string) (Payer, error)
}

// ResolverFunc is a Resolver.
type ResolverFunc func(ctx context.Context, orderID string) (Payer, error)

// Payer calls f.
func (f ResolverFunc) Payer(ctx context.Context, orderID string) (Payer, error) {
	return f(ctx, orderID)
}

// ErrUnresolvable is what a Resolver wraps when the order's payer cannot
// ever be loaded: the job is cancelled with nothing sent.
var ErrUnresolvable = errors.New("pagpolarriver: payer cannot be resolved")

// errNoResolver: a charge intent ran on workers registered without one.
var errNoResolver = errors.New("pagpolarriver: no Resolver configured for a charge intent")

// Result is a succeeded operation, as OnSettled sees it. Exactly one of
// Charge, Subscription, PlanChange and Refund is set, by Kind.
type Result struct {
	Kind        string // the job kind (KindPix, ...)
	JobID       int64
	OperationID string
	OrderID     string            // the intent's OrderID ("" when a refund or plan change gave none)
	Decision    pagpolar.Decision // the effect's decision: a pending PIX or a card in analysis is an answer too
	EffectID    string            // the sale, subscription, plan change or refund ID (a plan change answered with the subscription: its ID)
	Operation   pagpolar.Operation

	Charge       *pagpolar.Charge
	Subscription *pagpolar.SubscriptionResult
	PlanChange   *pagpolar.PlanChangeResult
	Refund       *pagpolar.RefundResult
}

func resolve(ctx context.Context, r Resolver, orderID string) (Payer, error) {
	if r == nil {
		return Payer{}, errNoResolver
	}
	p, err := r.Payer(ctx, orderID)
	if err != nil {
		return Payer{}, &resolveError{orderID: orderID, err: err}
	}
	return p, nil
}

// resolveError is a Resolver's failure; nothing was sent.
type resolveError struct {
	orderID string
	err     error
}

func (e *resolveError) Error() string {
	return fmt.Sprintf("pagpolarriver: resolving the payer of order %q: %v", e.orderID, e.err)
}
func (e *resolveError) Unwrap() error { return e.err }

func (a PixIntent) run(ctx context.Context, c *pagpolar.Client, r Resolver) (Result, error) {
	p, err := resolve(ctx, r, a.OrderID)
	if err != nil {
		return Result{}, err
	}
	ch, err := c.Payments.Pix(ctx, pagpolar.PixParams{OfferID: a.OfferID, ExternalReference: a.ExternalReference,
		Customer: p.Customer, OperationID: a.OperationID})
	if err != nil {
		return Result{}, err
	}
	return chargeResult(KindPix, a.OrderID, ch), nil
}

func (a BoletoIntent) run(ctx context.Context, c *pagpolar.Client, r Resolver) (Result, error) {
	p, err := resolve(ctx, r, a.OrderID)
	if err != nil {
		return Result{}, err
	}
	var due time.Time
	if a.DueDate != "" {
		if due, err = time.Parse(time.DateOnly, a.DueDate); err != nil {
			return Result{}, invalid("DueDate", "want YYYY-MM-DD")
		}
	}
	ch, err := c.Payments.Boleto(ctx, pagpolar.BoletoParams{OfferID: a.OfferID, ExternalReference: a.ExternalReference,
		Customer: p.Customer, DueDate: due, OperationID: a.OperationID})
	if err != nil {
		return Result{}, err
	}
	return chargeResult(KindBoleto, a.OrderID, ch), nil
}

func (a CreditCardIntent) run(ctx context.Context, c *pagpolar.Client, r Resolver) (Result, error) {
	p, err := resolve(ctx, r, a.OrderID)
	if err != nil {
		return Result{}, err
	}
	ch, err := c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: a.OfferID, ExternalReference: a.ExternalReference,
		Customer: p.Customer, CardToken: p.CardToken, Installments: a.Installments, OperationID: a.OperationID})
	if err != nil {
		return Result{}, err
	}
	return chargeResult(KindCreditCard, a.OrderID, ch), nil
}

func (a SubscribeIntent) run(ctx context.Context, c *pagpolar.Client, r Resolver) (Result, error) {
	p, err := resolve(ctx, r, a.OrderID)
	if err != nil {
		return Result{}, err
	}
	token := ""
	if a.PaymentMethod == "credit_card" {
		token = p.CardToken
	}
	s, err := c.Subscriptions.Subscribe(ctx, pagpolar.SubscribeParams{OfferID: a.OfferID, ExternalReference: a.ExternalReference,
		Customer: p.Customer, PaymentMethod: a.PaymentMethod, CardToken: token, OperationID: a.OperationID})
	if err != nil {
		return Result{}, err
	}
	return Result{Kind: KindSubscribe, OperationID: s.Operation.ID, OrderID: a.OrderID, Decision: s.Decision(),
		EffectID: s.Subscription.ID, Operation: s.Operation, Subscription: s}, nil
}

func (a PlanChangeIntent) run(ctx context.Context, c *pagpolar.Client, _ Resolver) (Result, error) {
	pc, err := c.Subscriptions.ChangePlan(ctx, pagpolar.ChangePlanParams{OperationID: a.OperationID,
		SubscriptionID: a.SubscriptionID, NewOfferID: a.NewOfferID})
	if err != nil {
		return Result{}, err
	}
	id := pc.PlanChange.ID
	if id == "" {
		id = pc.PlanChange.SubscriptionID
	}
	return Result{Kind: KindPlanChange, OperationID: pc.Operation.ID, OrderID: a.OrderID, Decision: pc.Decision(),
		EffectID: id, Operation: pc.Operation, PlanChange: pc}, nil
}

func (a RefundIntent) run(ctx context.Context, c *pagpolar.Client, _ Resolver) (Result, error) {
	rf, err := c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: a.OperationID, SaleID: a.SaleID,
		Amount: a.Amount, Reason: a.Reason})
	if err != nil {
		return Result{}, err
	}
	return Result{Kind: KindRefund, OperationID: rf.Operation.ID, OrderID: a.OrderID, Decision: rf.Decision(),
		EffectID: rf.Refund.ID, Operation: rf.Operation, Refund: rf}, nil
}

func chargeResult(kind, orderID string, ch *pagpolar.Charge) Result {
	return Result{Kind: kind, OperationID: ch.Operation.ID, OrderID: orderID, Decision: ch.Decision(),
		EffectID: ch.Sale.ID, Operation: ch.Operation, Charge: ch}
}
