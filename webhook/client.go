package webhook

import (
	"context"
	"time"

	"github.com/pagpolar/pagpolar-go"
)

// FromClient adapts the SDK's client to API, for ResolveSale,
// ResolveSubscription and CheckRefundRequest.
func FromClient(c *pagpolar.Client) API { return clientAPI{c} }

type clientAPI struct{ c *pagpolar.Client }

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func (a clientAPI) GetSale(ctx context.Context, id string) (Sale, error) {
	s, err := a.c.Payments.GetSale(ctx, id)
	if err != nil {
		return Sale{}, err
	}
	return Sale{Identifier: s.ID, Status: s.Status, ExternalReference: s.ExternalReference, PaymentMethod: s.PaymentMethod,
		Amount: s.Amount, RefundedAmount: s.RefundedAmount, OfferIdentifier: s.OfferID, SubscriptionID: s.SubscriptionID,
		CreatedAt: rfc3339(s.CreatedAt)}, nil
}

func (a clientAPI) GetSubscription(ctx context.Context, id string) (Subscription, error) {
	s, err := a.c.Subscriptions.Get(ctx, id)
	if err != nil {
		return Subscription{}, err
	}
	return Subscription{ID: s.ID, Status: s.Status, ExternalReference: s.ExternalReference, OfferIdentifier: s.OfferID,
		PaymentMethod: s.PaymentMethod, Amount: s.Amount, NextBillingAt: s.NextBillingAt, CreatedAt: rfc3339(s.CreatedAt)}, nil
}

func (a clientAPI) ListRefunds(ctx context.Context, saleID string) ([]Refund, error) {
	rs, err := a.c.Refunds.ListBySale(ctx, saleID)
	if err != nil {
		return nil, err
	}
	out := make([]Refund, len(rs))
	for i, r := range rs {
		out[i] = Refund{Identifier: r.ID, SaleIdentifier: r.SaleID, Amount: r.Amount, Status: r.Status, CreatedAt: rfc3339(r.CreatedAt)}
	}
	return out, nil
}
