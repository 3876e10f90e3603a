package webhook_test

import (
	"context"
	"github.com/pagpolar/pagpolar-go/keystore"
	"testing"

	"github.com/pagpolar/pagpolar-go"
	"github.com/pagpolar/pagpolar-go/pagpolartest"
	"github.com/pagpolar/pagpolar-go/webhook"
)

// TestFromClient: the adapter reads through the SDK's client, and
// ResolveSale uses it to refuse moving a paid order back to pending.
func TestFromClient(t *testing.T) {
	ctx := context.Background()
	srv := pagpolartest.NewServer(t)
	c, err := pagpolar.NewClient(srv.CredentialID, pagpolar.StaticToken(srv.Token), pagpolar.WithBaseURL(srv.URL), pagpolar.WithStore(keystore.NewMemory()))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.Payments.CreditCard(ctx, pagpolar.CreditCardParams{OfferID: "offer-premium", ExternalReference: "o-1", CardToken: "tok_ok",
		Customer: pagpolar.Customer{Name: "Ana", Email: "ana@example.com", Document: "12345678909"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refunds.Create(ctx, pagpolar.RefundParams{OperationID: "rf-1", SaleID: ch.Sale.ID, Amount: 100}); err != nil {
		t.Fatal(err)
	}
	api := webhook.FromClient(c)
	s, err := api.GetSale(ctx, ch.Sale.ID)
	if err != nil || s.Identifier != ch.Sale.ID || s.Status != "partially_refunded" || s.Amount != 19990 {
		t.Fatalf("GetSale: %+v %v", s, err)
	}
	rs, err := api.ListRefunds(ctx, ch.Sale.ID)
	if err != nil || len(rs) != 1 || rs[0].Amount != 100 || rs[0].SaleIdentifier != ch.Sale.ID {
		t.Fatalf("ListRefunds: %+v %v", rs, err)
	}
	// A late "pending" event for a sale stored as paid: never backwards.
	tx := &webhook.Transaction{ID: ch.Sale.ID, Sale: webhook.Sale{Identifier: ch.Sale.ID, Status: "pending"}}
	res, _, err := webhook.ResolveSale(ctx, api, nil, "paid", tx)
	if err != nil || res.Status == "pending" {
		t.Fatalf("ResolveSale moved a paid order back: %+v %v", res, err)
	}
}
